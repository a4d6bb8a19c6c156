"""The model card of a trained policy (badpo.engine.model_card): the Hub's YAML header, what the
card says, and the evaluation section that compare fills. Training writes it: the end-to-end test
in tests/comparing/test_compare_runs.py and test_the_card_of_a_trained_run_says_what_trained_it here."""

from __future__ import annotations

import json

import yaml

from badpo.engine.model_card import CardFacts, card_text, with_evaluation
from fixtures.engine import judgment_rows, write_jsonl


def facts(**changes) -> CardFacts:
    base = dict(method="ba_dpo_pooled", description="BA-DPO, one theta", base_model="HuggingFaceTB/SmolLM2-135M",
                base_is_local=False, lora=True, attributes=["names", "length"], judgments=96, pairs=24,
                annotators=6, data_sha256="f00d", beta=0.1, steps=100, seed=42,
                theta={"woman_coded": (0.5, None), "length": (-0.25, None)})
    return CardFacts(**(base | changes))


def header(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_the_header_is_what_the_hub_reads():
    assert header(card_text(facts())) == {"library_name": "peft", "base_model": "HuggingFaceTB/SmolLM2-135M",
                                          "pipeline_tag": "text-generation",
                                          "tags": ["badpo", "dpo", "preference-optimization", "ba-dpo"]}
    local = header(card_text(facts(base_is_local=True, lora=False, theta={})))
    assert local == {"library_name": "transformers", "pipeline_tag": "text-generation",
                     "tags": ["badpo", "dpo", "preference-optimization"]}
    odd = header(card_text(facts(base_model="unknown (a model built in memory)")))
    assert "base_model" not in odd  # not a Hub id: said in the text, not claimed in the header


def test_the_card_says_method_data_attributes_and_theta():
    text = card_text(facts())
    assert "method `ba_dpo_pooled` (BA-DPO, one theta): a LoRA adapter on `HuggingFaceTB/SmolLM2-135M`" in text
    assert "96 judgments of 24 pairs by 6 annotators; sha256 `f00d`." in text
    assert "Declared attributes: `names`, `length`." in text
    assert "| woman\\_coded | +0.500 | — |" in text and "| length | -0.250 | — |" in text
    assert "No annotator bias was learned" in card_text(facts(theta={}))


def test_the_evaluation_section_is_replaced_and_nothing_else():
    text = card_text(facts())
    filled = with_evaluation(text, ["- removes 98% [90, 105]"])
    before, after = text.split("<!-- badpo:evaluation -->")[0], text.split("<!-- /badpo:evaluation -->")[1]
    assert filled == before + "<!-- badpo:evaluation -->\n- removes 98% [90, 105]\n<!-- /badpo:evaluation -->" + after
    assert with_evaluation(filled, ["again"]).count("again") == 1
    assert with_evaluation("# someone's README\n", ["x"]) is None


def test_the_card_of_a_trained_run_says_what_trained_it(tmp_path, save_model_dir, cli_training):
    save_model_dir(tmp_path / "model", n_positions=64)
    write_jsonl(tmp_path / "judgments.jsonl", judgment_rows(n_pairs=6, judgments_per_pair=4))
    run = tmp_path / "run"
    assert cli_training(["train", f"data={tmp_path}/judgments.jsonl", "attributes=[signed=regex:emily|greg]",
                         "method=ba_dpo_pooled", f"model.name_or_path={tmp_path}/model", f"output_dir={run}",
                         "steps=2", "batch_size=8", "micro_batch_size=8", "tokenization.max_prompt_tokens=16",
                         "tokenization.max_length=64", "runtime.num_threads=1", "report.progress_bar=false"]) == 0
    text = (run / "policy" / "README.md").read_text()
    lora = (run / "policy" / "adapter_config.json").is_file()
    assert header(text)["library_name"] == ("peft" if lora else "transformers") and "base_model" not in header(text)
    sha = json.loads((run / "data_fingerprint.json").read_text())["sha256"]
    theta_bar = json.loads((run / "theta.json").read_text())
    assert f"sha256 `{sha}`" in text and "24 judgments of 6 pairs" in text
    assert "Declared attributes: `signed=regex:emily|greg`." in text
    assert "method `ba_dpo_pooled`" in text and "| signed |" in text
    assert theta_bar  # the card's theta is theta.json's: the row is checked to three decimals below
    from badpo.core.bias import BiasChannel

    mean = float(BiasChannel.load(run / "theta.json").mean()[0])
    assert f"| signed | {mean:+.3f} | — |" in text


def test_data_in_the_card_is_text_a_backtick_a_tag_or_a_line_break_cannot_escape():
    """A spec with a backtick and a tag stays inside its code span (fenced by a longer backtick run);
    a given: name with a pipe, a tag and a line break stays one table cell; the markdown renders no tag."""
    from badpo.core.html_page import markdown_html

    spec = "signoff=regex:`</code><script>alert(1)</script>"
    name = "paid|x\n<b>bold</b>"
    text = card_text(facts(attributes=[spec], theta={name: (0.5, None)}))
    assert "Declared attributes: ``signoff=regex:`</code><script>alert(1)</script>``." in text
    row = next(line for line in text.splitlines() if line.startswith("| paid"))
    assert row == "| paid\\|x\\n&lt;b&gt;bold&lt;/b&gt; | +0.500 | — |"
    rendered = markdown_html(text.split("---\n", 2)[2])
    assert "<script>" not in rendered and "<b>" not in rendered
    marked = card_text(facts(theta={r"regex:\.": (0.1, None), "_a_ [x](u)": (0.2, None)}))
    assert "| regex:\\\\. |" in marked and "| \\_a\\_ \\[x\\](u) |" in marked  # no emphasis, link or lost backslash


def test_the_card_shows_how_to_load_it_and_says_when_theta_had_not_settled():
    adapter, full = card_text(facts()), card_text(facts(lora=False))
    assert "AutoPeftModelForCausalLM.from_pretrained" in adapter and "AutoModelForCausalLM.from_pretrained" in full
    moving = card_text(facts(settled=False))
    assert "theta_bar was still moving over the run's last tenth" in moving
    assert "still moving" not in card_text(facts(settled=True)) and "still moving" not in card_text(facts())
