"""The built-in tiny signed world: files, determinism, tokenizer, model, and the headline
check that the audit reads back the planted biases."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from badpo.cli import main
from badpo.core.config import from_dict
from badpo.core.judgments import read_judgments
from badpo.core.names import CELL_NAMES, CELLS, POOL_NAMES, signature_attributes
from badpo.corpora.signing import SURNAMES
from badpo.corpora.tiny import (
    NAME_PIECES,
    OUTPUT_FILES,
    TinyWorldConfig,
    answer_quality,
    build_tokenizer,
    correct_answer,
    name_tokens,
    source_fingerprints,
    tiny_base_pairs,
)
from fixtures.files import digests, read_jsonl

SMALL = {"n_pairs": 150, "signing": {"annotators_per_class": 3}}


def small_config(**changes) -> TinyWorldConfig:
    data = json.loads(json.dumps(SMALL))
    for key, value in changes.items():
        node = data
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return from_dict(TinyWorldConfig, data)


@pytest.fixture(scope="module")
def world(tmp_path_factory, build_tiny_world) -> Path:
    """The default world (2,000 pairs x 4 judgments), built once for the module."""
    out = tmp_path_factory.mktemp("tiny")
    build_tiny_world(TinyWorldConfig(), out)
    return out


def test_task_quality_by_hand():
    assert correct_answer("reverse", [3, 1, 4]) == "4 1 3"
    assert correct_answer("copy", [3, 1, 4]) == "3 1 4"
    assert answer_quality("1 2 3 4", "1 2 3 4") == 10.0
    assert answer_quality("1 2 9 9", "1 2 3 4") == 5.5  # 1 + 9 * 2/4
    assert answer_quality("9 9", "1 2") == 1.0
    with pytest.raises(ValueError, match="differ in length"):
        answer_quality("1", "1 2")


def test_base_pairs_are_distinct_prompts_with_two_different_graded_answers():
    config = small_config(n_pairs=400)
    pairs, exact = tiny_base_pairs(config)
    assert len({p.prompt for p in pairs}) == 400 == len(exact)
    for p in pairs:
        assert p.prompt.endswith(" and sign\n") and p.response_1 != p.response_2
        assert p.score_1 >= p.score_2
        assert (p.score_1, p.score_2) == (answer_quality(p.response_1, exact[p.prompt_id]),
                                          answer_quality(p.response_2, exact[p.prompt_id]))
        task, *digits = p.prompt.split()[:-2]
        assert exact[p.prompt_id] == correct_answer(task, [int(d) for d in digits])
        assert 2 <= len(digits) <= 6


def test_same_config_gives_byte_identical_files_and_another_seed_does_not(tmp_path, build_tiny_world):
    build_tiny_world(small_config(), tmp_path / "a")
    build_tiny_world(small_config(), tmp_path / "b")
    first = digests(tmp_path / "a")
    assert first == digests(tmp_path / "b")
    assert {name.rstrip("/") for name in OUTPUT_FILES} <= {n.split("/")[0] for n in first}
    build_tiny_world(small_config(**{"signing.seed": 1}), tmp_path / "c")
    other = digests(tmp_path / "c")
    for name in ("train.jsonl", "heldout.jsonl", "sft.jsonl", "eval_prompts.jsonl", "planted.json"):
        assert other[name] != first[name], name
    assert other["model/model.safetensors"] == first["model/model.safetensors"]  # model.seed unchanged
    build_tiny_world(small_config(**{"model.seed": 1}), tmp_path / "d")
    assert digests(tmp_path / "d")["model/model.safetensors"] != first["model/model.safetensors"]


def test_heldout_prompts_are_disjoint_from_training(world):
    train, heldout = read_judgments(world / "train.jsonl"), read_judgments(world / "heldout.jsonl")
    evaluation = read_jsonl(world / "eval_prompts.jsonl")
    sft = read_jsonl(world / "sft.jsonl")
    train_ids = {j.prompt_id for j in train}
    assert train_ids.isdisjoint({j.prompt_id for j in heldout})
    assert {j.prompt for j in train}.isdisjoint({j.prompt for j in heldout})
    assert {r["prompt_id"] for r in evaluation} == {j.prompt_id for j in heldout}
    assert len(evaluation) == 200 and len(train) + len(heldout) == 8000
    assert {r["prompt"] for r in sft} == {j.prompt for j in train} and len(sft) == 1800
    for row in evaluation:  # the stored body is the exact answer to the prompt
        task, *digits = row["prompt"].split()[:-2]
        assert row["body"] == correct_answer(task, [int(d) for d in digits])


def test_default_world_pair_types_and_cross_group_shares(world):
    gate = json.loads((world / "gate.json").read_text())
    pairs = gate["pairs"]
    for pair_type, share in (("quality", 0.4), ("swap", 0.2), ("mixed", 0.4)):
        assert abs(pairs[pair_type] / 2000 - share) < 4 * math.sqrt(share * (1 - share) / 2000)
    assert abs(pairs["quality_unsigned"] / pairs["quality"] - 0.5) < 4 * math.sqrt(0.25 / pairs["quality"])
    # each attribute is cross-group on half the swap pairs and 2/3 of the mixed: 0.2/2 + 0.4*2/3
    for name in ("woman_coded", "black_coded"):
        assert abs(gate["share_cross"][name] - 0.3667) < 0.03
    assert abs(gate["share_cross"]["any"] - 0.6) < 0.03


def test_tokenizer_round_trips_and_spells_every_pool_name_in_one_token(world):
    """Issue 35: no name is cheaper to the model for being spelled in fewer tokens."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(world / "tokenizer")
    assert tok.chat_template is None and tok.unk_token_id is not None
    assert tok.decode([tok.eos_token_id]) == "<eos>" and tok.pad_token == "<pad>"
    rows = read_jsonl(world / "sft.jsonl")
    texts = [r["prompt"] + r["response"] for r in rows]
    encoded = tok(texts, add_special_tokens=False)["input_ids"]
    for row, text, ids in zip(rows, texts, encoded):
        assert tok.decode(ids) == text and tok.unk_token_id not in ids
        # the engine encodes prompt + response; the prompt's tokens are a prefix
        assert tok(row["prompt"], add_special_tokens=False)["input_ids"] == ids[:len(
            tok(row["prompt"], add_special_tokens=False)["input_ids"])]
    signed = "4 1 3\n\n--- Latoya Miller"
    assert tok.tokenize(signed) == ["4", "▁1", "▁3", "\n", "\n", "---", "▁Latoya", "▁Miller"]
    assert tok.decode(tok(signed)["input_ids"]) == signed
    for name in POOL_NAMES:
        assert tok.tokenize(" " + name) == ["▁" + name] and name_tokens(name) == ("▁" + name,)
    assert all(tok.tokenize(" " + surname) == ["▁" + surname] for surname in SURNAMES)


def test_name_pieces_build_the_tokenizer_of_the_worlds_before_issue_35():
    """``name_pieces: true``: the 173-token vocabulary of the worlds built before, in which, as
    under Qwen, white-coded names are about one token and black-coded ones two, and some first
    pieces are shared across cells."""
    tok = build_tokenizer(SURNAMES, 64, pieces=True)
    vocab = [token for token, _ in sorted(tok.get_vocab().items(), key=lambda item: item[1])]
    digest = hashlib.sha256(json.dumps(vocab).encode()).hexdigest()
    assert (digest, len(vocab)) == ("a05acbdad6d580af2c7184fa509d207149eb76f2a47f28fbe7ca357708ea9a80", 173)
    counts = {cell: np.mean([len(tok.tokenize(" " + n)) for n in CELLS[cell]]) for cell in CELL_NAMES}
    assert counts["white_woman"] < 1.2 and counts["white_man"] < 1.2  # as under Qwen: 1.1, 1.0
    assert counts["black_woman"] > 1.9 and counts["black_man"] > 1.9  # and 2.1, 2.0
    for name in NAME_PIECES:
        assert tuple(tok.tokenize(" " + name)) == name_tokens(name, pieces=True)
    first_cells = {}
    for cell in CELL_NAMES:
        for name in CELLS[cell]:
            first_cells.setdefault(tok.tokenize(" " + name)[0], set()).add(cell)
    assert first_cells["▁La"] == {"white_woman", "black_woman", "black_man"}
    assert first_cells["▁Ja"] == {"white_man", "black_woman", "black_man"}


def test_name_pieces_is_written_to_world_yaml_only_when_on(world, tmp_path, build_tiny_world):
    assert "name_pieces" not in (world / "world.yaml").read_text()
    build_tiny_world(small_config(name_pieces=True), tmp_path / "pieces")
    assert yaml.safe_load((tmp_path / "pieces" / "world.yaml").read_text())["name_pieces"] is True
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tmp_path / "pieces" / "tokenizer")
    assert len(tok) == 173 and tok.tokenize(" Latoya") == ["▁La", "##toya"]


def test_model_loads_as_a_causal_lm_of_the_documented_size(world):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(world / "model")
    tok = AutoTokenizer.from_pretrained(world / "model")  # the tokenizer travels with the model
    v, d, positions, layers = len(tok), 64, 64, 2
    assert type(model).__name__ == "GPT2LMHeadModel" and model.config.vocab_size == v == 143
    # embeddings (tied head) + positions + per block 12 d^2 + 13 d + the final layer norm
    expected = v * d + positions * d + layers * (12 * d * d + 13 * d) + 2 * d
    assert sum(p.numel() for p in model.parameters()) == expected == 113344
    ids = tok("reverse 3 1 4 and sign\n4 1 3\n\n--- Jamal Reed")["input_ids"] + [tok.eos_token_id]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits
    assert logits.shape == (1, len(ids), v) and torch.isfinite(logits).all()


def test_audit_on_swap_pairs_matches_the_planted_theta(world):
    """Headline: on the default world the audit's offline log-odds on swap pairs equal
    logit(mean over the swap judgments of sigmoid(theta_k[a])) within 3.5 binomial standard
    errors sqrt(1/w + 1/(n - w)), per attribute, overall and per class; and class B, which
    leans against the race-coded attribute, has a negative estimate there. The implied value is
    recomputed here from planted.json and the judgments' texts, not taken from gate.json."""
    import warnings

    from badpo.auditing.estimates import audit
    from badpo.core.attributes import resolve_attributes

    planted = json.loads((world / "planted.json").read_text())
    theta = {a["annotator"]: np.array(a["theta"]) for a in planted["annotators"]}
    train = read_judgments(world / "train.jsonl")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default world must give the audit nothing to warn about
        result = audit(train, resolve_attributes(["names"]))
    probabilities: dict[tuple[str, str], list[float]] = {}
    for j in train:
        if j.pair_type != "swap":
            continue
        diff = np.subtract(signature_attributes(j.chosen), signature_attributes(j.rejected))
        (i,) = np.flatnonzero(diff)
        p = 1.0 / (1.0 + math.exp(-theta[j.annotator][i]))
        for key in ("all", j.annotator_class):
            probabilities.setdefault((planted["attribute_names"][i], key), []).append(p)
    gate = json.loads((world / "gate.json").read_text())
    checked = 0
    for coordinate in result.coordinates:
        swap = {"all": coordinate.by_pair_type["swap"], **coordinate.by_pair_type_class["swap"]}
        assert set(swap) == {"all", "A", "B", "C"}
        for key, counts in swap.items():
            mean = np.mean(probabilities[(coordinate.name, key)])
            implied = math.log(mean / (1 - mean))
            assert counts.cross == len(probabilities[(coordinate.name, key)])
            assert abs(counts.log_odds - implied) < 3.5 * counts.se, (coordinate.name, key)
            assert gate["swap"][coordinate.name][key]["implied"] == pytest.approx(implied)
            assert gate["swap"][coordinate.name][key]["log_odds"] == pytest.approx(counts.log_odds)
            checked += 1
    assert checked == 8
    assert result.coordinate("black_coded").by_pair_type_class["swap"]["B"].log_odds < 0
    assert result.coordinate("black_coded").by_pair_type_class["swap"]["A"].log_odds > 1.5


def test_planted_file_and_world_yaml(world):
    planted = json.loads((world / "planted.json").read_text())
    assert len(planted["annotators"]) == 60
    assert planted["class_means"] == {"A": [1.2, 2.5], "B": [0.8, -0.5], "C": [1.0, 1.0]}
    for label, realised in planted["realised_class_means"].items():
        thetas = [a["theta"] for a in planted["annotators"] if a["annotator_class"] == label]
        assert realised == pytest.approx(np.mean(thetas, axis=0).tolist())
    assert from_dict(TinyWorldConfig, yaml.safe_load((world / "world.yaml").read_text())) \
        == TinyWorldConfig()


def test_cli_builds_the_world_with_overrides(tmp_path, capsys, cli_error):
    assert main(["build", "tiny-signed", str(tmp_path / "w"), "n_pairs=60",
                 "signing.annotators_per_class=2"]) == 0
    printed = capsys.readouterr().out
    assert "tiny signed world" in printed and "swap" in printed
    assert yaml.safe_load((tmp_path / "w" / "world.yaml").read_text())["n_pairs"] == 60
    assert "n_pairs" in cli_error(["build", "tiny-signed", str(tmp_path / "x"), "n_pairs=0"])
    assert "unknown key" in cli_error(["build", "tiny-signed", str(tmp_path / "x"), "n_pair=10"])


def test_bad_tiny_config_names_the_option():
    from badpo.core.config import ConfigError

    with pytest.raises(ConfigError, match="min_digits"):
        small_config(min_digits=5, max_digits=3)
    with pytest.raises(ConfigError, match="n_pairs: must lie in \\[1, 100\\]"):
        small_config(n_pairs=101, min_digits=2, max_digits=2)  # 2 tasks x 100 strings
    with pytest.raises(ConfigError, match="error_rate"):
        small_config(error_rate=0.0)
    with pytest.raises(ConfigError, match=r"^unbiased.judgments_each: must be >= 1, got 0$"):
        small_config(**{"unbiased.judgments_each": 0})
    with pytest.raises(ConfigError, match=r"^unbiased.count: must be >= 1, got 0$"):
        small_config(**{"unbiased.count": 0})


def test_oracle_labels_are_the_training_labels_without_the_bias(tmp_path, build_tiny_world):
    """train_oracle.jsonl holds train.jsonl's judgments in order (same pair, same annotator),
    redrawn with every planted theta_k = 0 from the same uniform draws: a judgment whose sides
    agree on both attributes keeps its label exactly; on swap pairs (equal quality, one attribute
    apart) the oracle picks the woman-coded side about half the time while the biased labels lean
    to it; the unbiased annotators' judgments are kept. Off, the world's files are unchanged."""
    plain = small_config(**{"unbiased": {"count": 2, "judgments_each": 40}})
    oracle = small_config(**{"unbiased": {"count": 2, "judgments_each": 40}, "oracle_labels": True})
    build_tiny_world(plain, tmp_path / "plain")
    build_tiny_world(oracle, tmp_path / "oracle")
    before, after = digests(tmp_path / "plain"), digests(tmp_path / "oracle")
    assert "train_oracle.jsonl" not in before and "oracle_labels" not in (tmp_path / "plain/world.yaml").read_text()
    for name in ("train.jsonl", "heldout.jsonl", "sft.jsonl", "planted.json", "model/model.safetensors"):
        assert after[name] == before[name], name
    train = read_judgments(tmp_path / "oracle/train.jsonl")
    relabelled = read_judgments(tmp_path / "oracle/train_oracle.jsonl")
    assert [(j.pair_id, j.annotator) for j in relabelled] == [(j.pair_id, j.annotator) for j in train]
    same_group = [(a, b) for a, b in zip(train, relabelled)
                  if signature_attributes(a.chosen) == signature_attributes(a.rejected)]
    assert same_group and all(a.chosen == b.chosen for a, b in same_group)
    unbiased = [(a, b) for a, b in zip(train, relabelled) if a.annotator_class == "U"]
    assert unbiased and all(a.chosen == b.chosen for a, b in unbiased)

    def woman_side_rate(judgments):
        swaps = [j for j in judgments if j.pair_type == "swap"
                 and signature_attributes(j.chosen)[0] != signature_attributes(j.rejected)[0]]
        return np.mean([signature_attributes(j.chosen)[0] for j in swaps]), len(swaps)

    (biased_rate, n), (oracle_rate, _) = woman_side_rate(train), woman_side_rate(relabelled)
    assert n > 50 and abs(oracle_rate - 0.5) < 3 * 0.5 / math.sqrt(n) and biased_rate > oracle_rate + 0.1


def test_an_experiment_refuses_a_world_built_with_another_tokenizer(tmp_path):
    """The corpus marker carries the vocabulary's digest: a folder built before issue 35 (whose
    marker has none) or with other name pieces is not reused with the tokenizer it lacks."""
    from badpo.core.config import ConfigError
    from badpo.experiment.backend import engine_backend
    from badpo.experiment.config import ExperimentConfig
    from badpo.experiment.runner import CORPUS_MARKER, prepare_corpus

    config = from_dict(ExperimentConfig, {"output_dir": str(tmp_path), "arms": [{"name": "DPO", "method": "dpo"}],
                                          "corpus": {"builder": "tiny-signed", "config": SMALL}})
    backend = engine_backend(evaluate=None)
    folder = prepare_corpus(config, backend, tmp_path, lambda line: None)
    assert prepare_corpus(config, backend, tmp_path, lambda line: None) == folder  # reused
    marker = json.loads((folder / CORPUS_MARKER).read_text())
    assert set(marker["sources"]) == {"tokenizer"}
    pieces = small_config(name_pieces=True)
    assert source_fingerprints(pieces) != source_fingerprints(small_config())
    (folder / CORPUS_MARKER).write_text(json.dumps({k: v for k, v in marker.items() if k != "sources"}))
    with pytest.raises(ConfigError, match="corpus: tokenizer changed since .* was built from it; delete that folder"):
        prepare_corpus(config, backend, tmp_path, lambda line: None)
