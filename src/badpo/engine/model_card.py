"""The model card of a trained policy: ``policy/README.md``, with the YAML header the Hugging Face
Hub reads, so that a folder pushed as it is says what it is. Written at the end of ``badpo train``
(what was trained, on which data, which attributes were declared, theta's summary); ``badpo
compare`` fills its evaluation section (:func:`with_evaluation`) with the run's verdict lines: the
share of the baseline's shift removed, with its interval.

Text only, built from the run's own settings and numbers: nothing in it runs code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from badpo.core.jsonio import atomic_write_text
from badpo.core.markdown_escape import code_span, markdown_text

__all__ = ["CARD_FILE", "CardFacts", "card_text", "code_span", "table_cell", "theta_summary", "with_evaluation",
           "write_card"]

CARD_FILE = "README.md"
# a Hub id: what the header's YAML holds unquoted and the Hub reads as base_model
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")
_EVALUATION = re.compile(r"<!-- badpo:evaluation -->.*<!-- /badpo:evaluation -->", re.S)
_NOT_EVALUATED = ("Not evaluated yet: `badpo evaluate RUN --heldout H --prompts P` on this run and a DPO run "
                  "of the same data, then `badpo compare DPO_RUN RUN` writes the removal here.")


@dataclass(frozen=True)
class CardFacts:
    """What the card says of a run; ``theta``: per declared attribute, (theta_bar, sd of theta_k
    or None under a pooled theta)."""

    method: str
    description: str
    base_model: str
    base_is_local: bool
    lora: bool
    attributes: Sequence[str]
    judgments: int
    pairs: int
    annotators: int
    data_sha256: str | None
    beta: float
    steps: int
    seed: int
    theta: Mapping[str, tuple[float, float | None]]
    settled: bool | None = None  # theta_bar settled over the run's last tenth (None: not known)


def table_cell(text: str) -> str:
    """``text`` as one cell of a Markdown table, shown as it is (:func:`badpo.core.markdown_escape.markdown_text`)."""
    return markdown_text(text)


def _header(facts: CardFacts) -> list[str]:
    tags = ["badpo", "dpo", "preference-optimization"] + (["ba-dpo"] if facts.theta else [])
    lines = ["---", f"library_name: {'peft' if facts.lora else 'transformers'}", "pipeline_tag: text-generation"]
    if not facts.base_is_local and _HUB_ID.fullmatch(facts.base_model):  # a local path is said below
        lines.append(f"base_model: {facts.base_model}")
    return [*lines, "tags:", *(f"- {tag}" for tag in tags), "---"]


def _theta_lines(facts: CardFacts) -> list[str]:
    if not facts.theta:
        return ["No annotator bias was learned (theta fixed at 0): the policy learned from every label as is."]
    lines = ["The annotators' bias on each declared attribute, explained by theta and not learned by the "
             "policy (theta_bar: the pool's level in log-odds per unit of the attribute; sd: the spread "
             "of the annotators' theta_k):", "", "| attribute | theta_bar | sd of theta_k |", "|:--|--:|--:|"]
    for name, (mean, spread) in facts.theta.items():
        lines.append(f"| {table_cell(name)} | {mean:+.3f} | {'—' if spread is None else f'{spread:.3f}'} |")
    if facts.settled is False:
        lines += ["", "theta_bar was still moving over the run's last tenth (`run.json`: `theta_convergence`): read it "
                  "as a lower bound, or train longer."]
    return lines


def _usage_lines(facts: CardFacts) -> list[str]:
    """How to load the policy: transformers for a full model, peft on its base for an adapter."""
    loader = ("from peft import AutoPeftModelForCausalLM\n"
              "model = AutoPeftModelForCausalLM.from_pretrained(\"PATH/TO/THIS/FOLDER\")" if facts.lora else
              "from transformers import AutoModelForCausalLM\n"
              "model = AutoModelForCausalLM.from_pretrained(\"PATH/TO/THIS/FOLDER\")")
    return ["## Use", "", "```python", loader,
            "# the tokenizer is saved beside it: AutoTokenizer.from_pretrained(\"PATH/TO/THIS/FOLDER\")", "```"]


def theta_summary(bias: Any) -> dict[str, tuple[float, float | None]]:
    """Per attribute of a bias channel that learns theta: (theta_bar, sd of the theta_k, or None
    for a pooled theta), the card's theta table; {} for none."""
    if bias is None or not bias.facts.learns_theta:
        return {}
    means, spreads = bias.mean().detach().cpu(), bias.theta().detach().cpu().std(dim=0, unbiased=False)
    per_annotator = bias.facts.per_annotator
    return {name: (float(means[j]), float(spreads[j]) if per_annotator else None)
            for j, name in enumerate(bias.attribute_names)}


def card_text(facts: CardFacts, evaluation: Sequence[str] | None = None) -> str:
    """The card: the header, what was trained, the data, theta, the evaluation section."""
    adapter = "a LoRA adapter on" if facts.lora else "full fine-tuning of"
    data = f"sha256 `{facts.data_sha256}`" if facts.data_sha256 else "in-memory rows (no file fingerprint)"
    body = [
        f"# {facts.method}: a policy trained with badpo", "",
        f"Trained with `badpo train`, method {code_span(facts.method)} ({facts.description}): {adapter} "
        f"{code_span(facts.base_model)}, which is also the reference the policy is held to (beta {facts.beta:g}, "
        f"{facts.steps} steps, seed {facts.seed}).", "",
        "## Data", "",
        f"{facts.judgments} judgments of {facts.pairs} pairs by {facts.annotators} annotators; {data}.",
        "Declared attributes: " + (", ".join(code_span(spec) for spec in facts.attributes) or "none") + ".", "",
        "## theta", "", *_theta_lines(facts), "", *_usage_lines(facts), "",
        "## Evaluation", "", "<!-- badpo:evaluation -->", *(evaluation or [_NOT_EVALUATED]),
        "<!-- /badpo:evaluation -->",
    ]
    return "\n".join([*_header(facts), "", *body]) + "\n"


def write_card(policy_dir: Path, facts: CardFacts) -> Path:
    path = policy_dir / CARD_FILE
    atomic_write_text(path, card_text(facts))
    return path


def with_evaluation(card: str, lines: Sequence[str]) -> str | None:
    """The card with its evaluation section replaced by ``lines``; None when the text is not a
    badpo card (no evaluation markers): such a file is the user's and is left alone."""
    if not _EVALUATION.search(card):
        return None
    section = "\n".join(["<!-- badpo:evaluation -->", *lines, "<!-- /badpo:evaluation -->"])
    return _EVALUATION.sub(lambda _: section, card, count=1)
