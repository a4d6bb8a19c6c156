"""Built-in examples on a corpus with planted biases: the audit's (``badpo audit --example``) and
a judgments file as a user holds one (``badpo build example-csv OUTDIR``).

The tiny world's prompts (:mod:`badpo.corpora.tiny`) signed by the Signed-UltraFeedback protocol
(:mod:`badpo.corpora.signing`). The audit example audits them (:func:`badpo.auditing.estimates.audit`)
and sets the audit beside the values its planted theta_k imply. The CSV example writes their
judgments with a user's own column names and no precomputed attribute, beside the tiny model whose
tokenizer reads them: the data of ``configs/experiment_tiny_own_data.yaml``, which runs ``badpo
experiment`` on it as on anyone's own file. Both live here because they build a corpus; the audit
itself knows nothing of corpora.
"""

from __future__ import annotations

import csv
import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from badpo.auditing.estimates import Audit, LogOdds, audit
from badpo.auditing.terminal_table import format_audit, format_estimate
from badpo.core.attributes import resolve_attributes
from badpo.core.config import ConfigError
from badpo.core.label_counts import label_counts
from badpo.corpora.signing import SigningConfig, implied_log_odds, sign_corpus
from badpo.corpora.tiny import TinyWorldConfig, build_model, build_tokenizer, tiny_base_pairs

__all__ = ["CSV_COLUMNS", "OUTPUT_FILES", "ExampleCsvConfig", "build_example_csv", "example_report", "summary_text"]

# badpo's field -> the example file's column: a user's own names, mapped back by `columns`
CSV_COLUMNS = {"prompt_id": "question_id", "prompt": "question", "chosen": "better", "rejected": "worse",
               "annotator": "worker", "annotator_class": "worker_group"}
OUTPUT_FILES = {
    "judgments.csv": "every judgment, one row each, in the columns of CSV_COLUMNS (no split, no attributes)",
    "model/": "the tiny GPT-2 (random init) and the tokenizer that reads the file's texts",
}


def example_report(seed: int = 0, n_pairs: int = 3000) -> tuple[Audit, str]:
    """Audit a built-in corpus with planted biases; the table is followed by what its theta_k imply.

    The corpus: ``n_pairs`` base pairs of the tiny world signed by the Signed-UltraFeedback
    protocol with its default configuration (60 annotators, 40/20/40 pair types, 4 judgments
    per pair), data seed ``seed``, every prompt kept (no held-out split); attributes ``names``.
    The implied value of a slice is logit(mean over its swap judgments of sigma(theta_k . dg)),
    dg oriented toward the attribute side (``signing.implied_log_odds``): what the audit
    estimates up to sampling error. It is not the class mean of theta_k (a logit of a mean of
    sigmoids is pulled toward 0), which is shown beside it.
    """
    world = TinyWorldConfig(n_pairs=n_pairs, signing=SigningConfig(seed=seed, heldout_share=0.0))
    corpus = sign_corpus(tiny_base_pairs(world)[0], world.signing)
    labels = label_counts(corpus.train, {"chosen_rejected": len(corpus.train)})  # plain wins, as badpo audit says
    result = dataclasses.replace(audit(corpus.train, resolve_attributes(["names"])), labels=labels.to_dict())
    implied = implied_log_odds(corpus, corpus.train, ("swap",))
    lines = ["", f"planted corpus (seed {seed}, {n_pairs} pairs, tiny-world prompts signed as in "
             "Signed-UltraFeedback): swap pairs, audit vs planted theta_k",
             f"{'attribute':<12}  {'slice':<6}  {'cross':>6}  {'audit':>7}  {'s.e.':>6}  "
             f"{'implied':>7}  {'mean theta_k':>12}"]
    empty = LogOdds(0, 0, 0)
    for i, c in enumerate(result.coordinates):
        for key, value in implied[c.name].items():
            counts = (c.by_pair_type.get("swap", empty) if key == "all"
                      else c.by_pair_type_class.get("swap", {}).get(key, empty))
            estimate, se = format_estimate(counts)
            members = [a.theta[i] for a in corpus.annotators if key in ("all", a.annotator_class)]
            shown = "-" if value is None else f"{value:+.3f}"
            lines.append(f"{c.name:<12}  {key:<6}  {counts.cross:>6}  {estimate:>7}  {se:>6}  "
                         f"{shown:>7}  {float(np.mean(members)):>+12.3f}")
    return result, f"{labels.line()}\n" + format_audit(result) + "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ExampleCsvConfig:
    """``badpo build example-csv``: how much of the tiny signed world to write."""

    n_pairs: int = 600  # prompts, one base pair each, 4 judgments a pair
    seed: int = 0  # data seed (the signing protocol's)

    def __post_init__(self) -> None:
        if self.n_pairs < 2:
            raise ConfigError(f"n_pairs: need at least 2 prompts to hold some out, got {self.n_pairs}")


def build_example_csv(config: ExampleCsvConfig, outdir: str | Path) -> dict:
    """Write ``judgments.csv`` and ``model/`` (:data:`OUTPUT_FILES`) into ``outdir``: the judgments of
    the tiny signed world (60 planted annotators, its default classes) with nothing held out, the
    columns renamed as a user's file would have them; returns the counts."""
    out = Path(outdir)
    world = TinyWorldConfig(n_pairs=config.n_pairs, signing=SigningConfig(seed=config.seed, heldout_share=0.0))
    corpus = sign_corpus(tiny_base_pairs(world)[0], world.signing)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "judgments.csv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(CSV_COLUMNS.values())
        for j in corpus.train:
            writer.writerow([getattr(j, name) for name in CSV_COLUMNS])
    tokenizer = build_tokenizer(world.signing.surnames, world.model.n_positions)
    build_model(world.model, tokenizer).save_pretrained(out / "model")
    tokenizer.save_pretrained(out / "model")
    return {"outdir": str(out), "judgments": len(corpus.train), "prompts": config.n_pairs,
            "workers": len({j.annotator for j in corpus.train})}


def summary_text(stats: dict) -> str:
    """What ``badpo build example-csv`` prints."""
    columns = ", ".join(f"{column} ({field})" for field, column in CSV_COLUMNS.items())
    return (f"example judgments in {stats['outdir']}: judgments.csv ({stats['judgments']} judgments by "
            f"{stats['workers']} workers on {stats['prompts']} questions; columns {columns}) and model/ "
            "(the tiny GPT-2 that reads them, at its random initialisation)")
