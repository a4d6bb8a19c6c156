"""`badpo evaluate` of a run trained on the user's own data: a judgments CSV with its own column
names and a declared ``regex:`` attribute, a 64-position model, no corpus folder.

One tiny run is trained per module (two steps); each test evaluates it through the CLI."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import shutil
import sys
import warnings
from pathlib import Path

import pytest
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer

from badpo.cli import main
from badpo.core.attributes import resolve_attributes
from badpo.core.config import from_dict
from badpo.engine.tokenize import TokenizationConfig
from badpo.evaluation.trained_run import GenerationCapNotice, cap_new_tokens, prompts_digest, summary
from badpo.readouts.evaluate_policy import EvalConfig, generated_attribute_rates
from badpo.readouts.model import Generations, generate
from fixtures.engine import VOCAB, build_tokenizer, judgment_rows

SIGNOFF = r"thanks|regards"
HEADER = ["question", "better", "worse", "rater"]  # prompt, chosen, rejected, annotator
COLUMNS = ["columns.prompt=question", "columns.chosen=better", "columns.rejected=worse", "columns.annotator=rater"]
PROMPTS = ["what is the best way to learn", "write code", "what is the best way to cook", "write a short answer",
           "sign your name", "what is good", "try this first", "what is the best answer here",
           "what is a long answer and more"]  # the 9th, the longest (8 words), is past max_prompts=8
NAME_ONLY = {"names", "sampled", "woman_share", "black_share", "woman_coded", "black_coded"}


def write_csv(path: Path, rows: list[list[str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    return path


def judgment_csv(path: Path, rows: list[dict]) -> Path:
    """Rows of fixtures.engine.judgment_rows under the user's column names, the signature of a
    signed answer replaced by a closing 'thanks' (what the regex attribute marks)."""
    def signoff(text: str) -> str:
        return text.replace("--- emily smith", "thanks")

    return write_csv(path, [HEADER] + [[r["prompt"], signoff(r["chosen"]), signoff(r["rejected"]), r["annotator"]]
                                       for r in rows])


def all_keys(value) -> set[str]:
    if isinstance(value, dict):
        return set(value).union(*(all_keys(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(all_keys(v) for v in value))
    return set()


def refuse_constant(constant: str):
    raise AssertionError(f"{constant} in readouts.json")


@pytest.fixture(scope="module")
def user_run(tmp_path_factory, save_model_dir):
    """A GPT-2 with 64 positions over the engine fixtures' word vocabulary, judgments in a CSV
    with the user's own column names, `badpo train` for two steps with `signoff=regex:...`."""
    folder = tmp_path_factory.mktemp("user")
    save_model_dir(folder / "model", n_positions=64)
    rows = judgment_rows(n_pairs=8, judgments_per_pair=4)
    judgment_csv(folder / "judgments.csv", rows[:24])
    judgment_csv(folder / "heldout.csv", rows[24:])
    write_csv(folder / "prompts.csv", [["question"]] + [[p] for p in PROMPTS])
    assert main(["train", f"data={folder}/judgments.csv", *COLUMNS, f"attributes=[signoff=regex:{SIGNOFF}]",
                 "method=ba_dpo_shared_mean", f"model.name_or_path={folder}/model", f"output_dir={folder}/run",
                 f"cache_dir={folder}/cache", "steps=2", "batch_size=8", "micro_batch_size=8",
                 "tokenization.max_prompt_tokens=16", "tokenization.max_length=64", "optim.lr=1e-3",
                 "runtime.num_threads=1", "report.progress_bar=false"]) == 0
    return folder


@pytest.fixture(scope="module")
def evaluated(user_run):
    """One `badpo evaluate` call, overrides before and after options, the default max_new_tokens
    (512). Returns (stdout, the warnings raised, readouts.json parsed refusing NaN and Infinity);
    capsys is per test, hence the redirect."""
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(io.StringIO()) as out:
        warnings.simplefilter("always")
        code = main(["evaluate", str(user_run / "run"), "--heldout", str(user_run / "heldout.csv"), "max_prompts=8",
                     "--prompts", str(user_run / "prompts.csv"), "seed=3"])
    assert code == 0
    readouts = json.loads((user_run / "run" / "readouts.json").read_text(), parse_constant=refuse_constant)
    return out.getvalue(), list(caught), readouts


def test_the_summary_shows_the_regex_attribute_for_policy_and_reference(evaluated):
    out, _, readouts = evaluated
    rates = readouts["attribute_rates"]["signoff"]
    assert rates["n"] == 8  # max_prompts=8, given after --heldout, was applied
    row = next(line for line in out.splitlines() if line.strip().startswith("signoff") and "." in line)
    assert row.split() == ["signoff", f"{rates['policy']:.3f}", f"{rates['reference']:.3f}"]
    assert "held-out accuracy" in out and "vote prediction" in out and "KL(policy || reference)" in out
    assert readouts["inputs"]["prompts"].endswith("prompts.csv") and readouts["inputs"]["n_heldout"] == 8


def test_the_rate_is_a_hand_count_of_the_regex_on_the_generated_texts(evaluated, user_run):
    """Generate again with the settings the record names (seed=3 given last on the line, the
    capped 57 tokens, the run's tokenization) and count re.search(SIGNOFF) per text: k of 8."""
    _, _, readouts = evaluated
    tokenizer = AutoTokenizer.from_pretrained(user_run / "model")
    run_config = yaml.safe_load((user_run / "run" / "config.yaml").read_text())
    tokenization = from_dict(TokenizationConfig, run_config["tokenization"])
    for side, path in (("policy", user_run / "run" / "policy"), ("reference", user_run / "model")):
        model = AutoModelForCausalLM.from_pretrained(path).eval()
        texts = generate(model, tokenizer, PROMPTS[:8], 0.7, 0.9, 57, 3, 16, tokenization).texts
        flags = [1 if re.search(SIGNOFF, text) else 0 for text in texts]
        assert readouts["attribute_rates"]["signoff"][side] == sum(flags) / len(texts), (side, texts)
        assert readouts["attribute_rates"]["signoff"]["per_prompt"][side] == flags  # prompt by prompt


def test_the_record_names_the_prompts_its_per_prompt_values_are_on(evaluated):
    """`badpo compare` pairs two runs' per-prompt values only when they were read on the same
    prompts: the record carries the SHA-256 of the 8 prompts read, in order."""
    _, _, readouts = evaluated
    assert readouts["inputs"]["prompts_sha256"] == prompts_digest(PROMPTS[:8])
    settings = readouts["inputs"]["settings"]  # and the settings it read with: compare refuses others
    assert settings["seed"] == 3 and settings["temperature"] == 0.7 and settings["body"] == "reference"
    assert prompts_digest(PROMPTS[:8]) != prompts_digest(PROMPTS[1:9])


def test_max_new_tokens_is_capped_to_the_model_context_with_a_notice(evaluated):
    """64 positions - 7 tokens of the longest read prompt ('what is the best way to learn', one
    token a word, no special tokens) = 57 (the 8-word 9th prompt is not read)."""
    _, caught, readouts = evaluated
    assert readouts["inputs"]["max_new_tokens"] == 57
    notices = [str(w.message) for w in caught if issubclass(w.category, GenerationCapNotice)]
    assert len(notices) == 1 and "max_new_tokens 512 lowered to 57" in notices[0]
    assert "\n" not in notices[0]  # the CLI prints a warning as one line


def test_no_nan_and_no_names_readouts_without_a_names_attribute(evaluated):
    out, _, readouts = evaluated
    assert not all_keys(readouts) & NAME_ONLY  # readouts.json was parsed refusing NaN / Infinity
    assert "nan" not in out.lower() and "names" not in out
    assert set(readouts["heldout"]) == {"signoff"} and "votes/signoff" in readouts
    assert readouts["votes/signoff"]["per_class"] == {}  # the CSV has no annotator classes


def test_a_missing_heldout_file_skips_its_readouts_and_says_why(user_run, capsys):
    assert main(["evaluate", str(user_run / "run"), "--prompts", str(user_run / "prompts.csv"),
                 "max_prompts=2", "max_new_tokens=4", "--overwrite"]) == 0  # the run may be evaluated already
    out = capsys.readouterr().out
    readouts = json.loads((user_run / "run" / "readouts.json").read_text(), parse_constant=refuse_constant)
    assert "heldout" not in readouts and not any(key.startswith("votes") for key in readouts)
    assert set(readouts["skipped"]) == {"heldout", "votes"}
    assert "skipped heldout: no held-out judgments: give --heldout FILE" in out
    assert readouts["attribute_rates"]["signoff"]["n"] == 2


def test_no_evaluation_data_is_a_one_line_error(user_run, cli_error):
    """The run's training data sits in a folder without eval_prompts.jsonl or heldout.jsonl."""
    line = cli_error(["evaluate", str(user_run / "run"), "--overwrite"])  # evaluated by the tests above
    assert "no evaluation data: give --heldout FILE" in line and "the run's training data" in line


def test_a_module_attribute_of_the_run_is_refused_unless_given_on_the_command_line(user_run, tmp_path,
                                                                                   monkeypatch, cli_error):
    """The run folder's config.yaml declares `probe=<module>:value`: evaluate refuses it without
    importing the module; the same specs given with -a are imported and read."""
    module = "evaluate_any_data_probe"
    (tmp_path / f"{module}.py").write_text("from pathlib import Path\n"
                                           "Path(__file__).with_name('imported').write_text('yes')\n"
                                           "def value(prompt, response):\n    return float(len(response) % 2)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    run_dir = Path(shutil.copytree(user_run / "run", tmp_path / "run"))
    (run_dir / "readouts.json").unlink(missing_ok=True)  # an evaluation of user_run is not replaced
    specs = [f"signoff=regex:{SIGNOFF}", f"probe={module}:value"]
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    config["attributes"] = specs
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    heldout = ["--heldout", str(user_run / "heldout.csv")]

    line = cli_error(["evaluate", str(run_dir), *heldout])
    assert f"attribute 'probe={module}:value' runs a module's code" in line and "-a SPEC" in line
    assert not (tmp_path / "imported").exists() and module not in sys.modules

    argv = ["evaluate", str(run_dir), *heldout, "generations=false", "-a", specs[0], "-a", specs[1]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(argv) == 0
    assert (tmp_path / "imported").exists()
    readouts = json.loads((run_dir / "readouts.json").read_text())
    assert set(readouts["heldout"]) == {"signoff", "probe"}
    # nothing is generated, so max_new_tokens is left alone
    assert not [w for w in caught if issubclass(w.category, GenerationCapNotice)]


def test_a_prompt_that_fills_the_context_leaves_no_room_to_answer():
    """An 8-position model and a 9-word prompt kept whole (max_prompt_tokens 16): 8 - 9 < 1."""
    from transformers import GPT2Config, GPT2LMHeadModel  # loads most of transformers: not at collection

    tokenizer = build_tokenizer()
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(VOCAB), n_positions=8, n_embd=8, n_layer=1, n_head=1))
    tokenization = TokenizationConfig(max_prompt_tokens=16, max_length=32)
    with pytest.raises(ValueError, match="9-token evaluation prompt fills the model's 8 positions"):
        cap_new_tokens(EvalConfig(attributes=("markdown",)), model, tokenizer,
                       ["what is the best way to learn and cook"], tokenization)
    with pytest.warns(GenerationCapNotice, match="lowered to 2"):  # 8 - 6 words of 'what is the best way to'
        capped = cap_new_tokens(EvalConfig(attributes=("markdown",), max_new_tokens=5), model, tokenizer,
                                ["what is the best way to"], tokenization)
    assert capped.max_new_tokens == 2


def test_the_summary_reads_a_pair_attribute_by_tokens_a_reward_tilt_and_null_as_n_a():
    """A hand-made record: length shows the mean tokens of both sides first; an undefined (null)
    cross accuracy reads n/a; a reward model's tilt and a skipped readout get a line each."""
    record = {"attribute_rates": {"length": {"policy": 0.25, "reference": 0.5, "n": 4, "policy_tokens": 12.0,
                                             "reference_tokens": 20.5}},
              "heldout": {"length": {"same_accuracy": 0.5, "cross_accuracy": None, "gap": None, "n_same": 6,
                                     "n_cross": 0}},
              "tilt": {"woman_coded": {"mean_difference": 0.1, "share_higher": 0.625, "n": 4}},
              "skipped": {"attribute_rates.flag": "a given: attribute ..."},
              "inputs": {"attributes": ["length", "flag"], "n_heldout": 6, "heldout": "h.csv", "prompts": "p.csv",
                         "n_prompts": 4, "max_new_tokens": 57}}
    lines = summary(record, "out.json").splitlines()
    assert lines[0] == ("read 4 prompts (p.csv), 6 held-out judgments (h.csv); attributes length, flag; "
                        "max_new_tokens 57")
    assert lines[2].split() == ["length", "(mean", "tokens)", "12.0", "20.5", "(marked", "side:", "policy",
                                "0.250,", "reference", "0.500)"]
    assert lines[4].split() == ["length", "0.500", "n/a", "n/a", "6", "/", "0"]
    assert "woman_coded 0.625 (n 4, first name swapped)" in lines[5]  # a record before "edit" was written
    assert lines[-2:] == ["skipped attribute_rates.flag: a given: attribute ...", "every readout: out.json"]
    # several attributes: a last row for the pairs cross-group on any of them (heldout_any)
    entry = {"same_accuracy": 0.5, "cross_accuracy": 0.75, "gap": 0.25, "n_same": 4, "n_cross": 8}
    record["heldout"] = {"woman_coded": entry, "black_coded": entry}
    record["heldout_any"] = {**entry, "same_accuracy": 0.625, "gap": 0.125, "n_same": 2, "n_cross": 10}
    rows = [line.split() for line in summary(record).splitlines()]
    assert ["any", "attribute", "0.625", "0.750", "0.125", "2", "/", "10"] in rows


def test_per_prompt_values_are_recorded_beside_each_rate():
    """Three prompts, hand-made generations: the regex flags (1, 0, 1) beside the rate 2/3; length
    (pair-level, 1.5 times the words) marks the policy's side on prompt 1 (6 words against 3) and
    the reference's on prompt 3 (2 against 1), and the token counts are kept as they are, per side."""
    def answers(texts, tokens):
        return Generations(("p1", "p2", "p3"), texts, ((1,),) * 3, ((2,),) * 3, tokens)

    policy = answers(("a b c d e thanks", "a b", "thanks"), (6, 2, 1))
    reference = answers(("a b thanks", "a b", "c d"), (3, 2, 2))
    rates, skipped = generated_attribute_rates(resolve_attributes([f"signoff=regex:{SIGNOFF}", "length:1.5"]),
                                               policy, reference)
    assert skipped == {}
    assert rates["signoff"] == {"policy": 2 / 3, "reference": 1 / 3, "n": 3,
                                "per_prompt": {"policy": [1, 0, 1], "reference": [1, 0, 0]}}
    length = rates["length"]["per_prompt"]
    assert length == {"policy": [1, 0, 0], "reference": [0, 0, 1], "policy_tokens": [6, 2, 1],
                      "reference_tokens": [3, 2, 2]}
    assert all(type(v) is int for v in length["policy_tokens"])  # 6, not 6.0: compact, and the mean exact
    assert rates["length"]["policy_tokens"] == sum(length["policy_tokens"]) / 3


@pytest.fixture(scope="module")
def templated_run(user_run, tmp_path_factory):
    """The user run read through a reference whose tokenizer has a one-turn chat template
    (``<|user|> p <|assistant|>``), with its prompts as text and as chat messages."""
    folder = tmp_path_factory.mktemp("templated")
    shutil.copytree(user_run / "model", folder / "model")
    build_tokenizer(chat_template=True).save_pretrained(folder / "model")
    shutil.copytree(user_run / "run", folder / "run")
    config = yaml.safe_load((folder / "run" / "config.yaml").read_text())
    config["model"]["name_or_path"] = str(folder / "model")
    (folder / "run" / "config.yaml").write_text(yaml.safe_dump(config))
    for name, prompt in (("text", lambda p: p), ("chat", lambda p: [{"role": "user", "content": p}])):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps({"question": prompt(p)}) + "\n" for p in PROMPTS))
    return folder


def test_chat_prompts_give_the_readouts_of_the_text_they_render_to(templated_run):
    """A one-turn conversation [user: p] renders to the text the template makes of the plain
    prompt p, so every readout (rates, tokens, KL) is the same number. Tokenized a second time with
    the template, or with a BOS, the prompt would change and KL with it."""
    def evaluate(prompts: str) -> dict:
        out = templated_run / f"readouts-{prompts}.json"
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert main(["evaluate", str(templated_run / "run"), "--prompts", str(templated_run / f"{prompts}.jsonl"),
                         "--out", str(out), "max_prompts=8", "seed=3"]) == 0
        return json.loads(out.read_text())

    text, chat = evaluate("text"), evaluate("chat")
    assert (text["inputs"]["chat_prompts"], chat["inputs"]["chat_prompts"]) == (False, True)
    assert text["inputs"]["max_new_tokens"] == chat["inputs"]["max_new_tokens"] == 55  # 64 - 9 tokens
    assert chat["kl"] == text["kl"] and chat["attribute_rates"] == text["attribute_rates"]
    assert {k: v for k, v in chat.items() if k != "inputs"} == {k: v for k, v in text.items() if k != "inputs"}


def test_chat_prompts_beside_text_judgments_are_a_one_line_error(templated_run, user_run, cli_error):
    line = cli_error(["evaluate", str(templated_run / "run"), "--prompts", str(templated_run / "chat.jsonl"),
                      "--heldout", str(user_run / "heldout.csv"), "--overwrite"])
    assert re.search(r"chat\.jsonl gives its prompts as chat messages and .*heldout\.csv as text; give both "
                     r"in one form", line), line


def test_a_new_attribute_alone_is_read_and_the_theta_readout_it_cannot_feed_is_skipped(user_run):
    """-a on an attribute the run did not train on: its rates and held-out accuracy are read; vote
    prediction needs dg on the run's own theta attribute (signoff), so it is skipped, saying why."""
    out = user_run / "readouts-new-attribute.json"
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["evaluate", str(user_run / "run"), "-a", "polite=regex:sure|yes", "--heldout",
                     str(user_run / "heldout.csv"), "--prompts", str(user_run / "prompts.csv"),
                     "--out", str(out), "max_prompts=8"]) == 0
    readouts = json.loads(out.read_text())
    assert set(readouts["attribute_rates"]) == set(readouts["heldout"]) == {"polite"}
    assert not any(key.startswith("votes") for key in readouts)
    assert "theta is on ['signoff'], which evaluation.attributes does not declare" in readouts["skipped"]["votes"]


def test_a_file_given_as_the_run_is_named_as_the_run(tmp_path, cli_error):
    """badpo evaluate some.jsonl spoke of an --out that was never given (issue 76's re-trial)."""
    (tmp_path / "some.jsonl").write_text("{}\n")
    line = cli_error(["evaluate", str(tmp_path / "some.jsonl")])
    assert line.startswith(f"badpo evaluate: RUN_DIR {tmp_path / 'some.jsonl'}: is a file, not a run folder")
    assert "--out" not in line
