"""MultiPref (``allenai/multipref``) as disaggregated judgments (Datasets appendix, "The MultiPref
corpus and the length attribute").

Each source row is one comparison of two completions of one prompt, with two lists of
annotations, ``normal_worker_annotations`` (crowd) and ``expert_worker_annotations`` (expert);
each annotation carries an ``evaluator`` pseudonym and an ``overall_pref`` in
:data:`OVERALL_PREFS`. The builder

- writes one judgment per non-tie annotation: annotator = evaluator, annotator_class =
  ``crowd`` / ``expert``, pair_id = comparison_id, prompt_id = prompt_id; ties are dropped and
  counted. With ``keep_ties`` a tie is written too (``tie: true``, A as ``chosen``, B as
  ``rejected``), and with ``keep_strength`` a win carries its grade (``strength``: 1 for
  "slightly", 2 for "clearly"); both default to off, which writes the corpus of the paper's tables
  byte for byte as before. The audit summaries leave the kept ties out (counted in
  ``ties_left_out_of_audit``) and read a graded win as a win;
- drops (and counts) a comparison whose prompt or completion is empty, or whose two completions
  are identical, since a judgment needs two different non-empty responses;
- holds out ``heldout_fraction`` of the distinct prompt ids (a seeded permutation of the sorted
  ids), so no held-out prompt appears in the training judgments or the SFT set;
- draws ``n_eval_prompts`` evaluation prompts from the held-out prompts (seeded);
- writes the SFT set: for every training-side comparison, the completion that more of its non-tie
  votes (crowd and expert together) chose. A comparison with as many votes for A as for B
  (including no non-tie vote at all) has no majority and is left out, and counted;
- audits the judgments under each declared attribute (default ``length`` and ``markdown``, both
  computed from the texts by :mod:`badpo.core.attributes`): judgments, cross-group share, offline
  log-odds theta-hat, on the training judgments and on all kept judgments (the paper's
  corpus-level figures); the full audit of the training judgments goes to ``audit.json``.

Attributes are not stored in the judgment rows: training computes them from the texts by the
declared spec. The builder is a pure function of the source rows and the config: the same seed
gives byte-identical files.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from badpo.auditing.estimates import BiasIdentifiabilityWarning, audit
from badpo.core.attributes import resolve_attributes
from badpo.core.config import dump_yaml, to_dict
from badpo.core.jsonio import write_json, write_jsonl
from badpo.core.judgments import Judgment, write_judgments
from badpo.core.label_counts import wins_for_estimates
from badpo.data.hub import CorpusSchemaError, load_split, require_columns
from badpo.data.label_forms import MULTIPREF_LABELS

__all__ = [
    "ANNOTATION_COLUMNS",
    "OVERALL_PREFS",
    "MultiPrefConfig",
    "MultiPrefCorpus",
    "build_multipref",
    "multipref_corpus",
    "split_prompt_ids",
    "summary_text",
    "write_multipref",
]

OVERALL_PREFS: dict[str, str | None] = {  # overall_pref -> the winning side; None is a tie
    "A-is-clearly-better": "a", "A-is-slightly-better": "a", "Tie": None,
    "B-is-slightly-better": "b", "B-is-clearly-better": "b",
}
ANNOTATION_COLUMNS: dict[str, str] = {  # source column -> annotator class
    "normal_worker_annotations": "crowd", "expert_worker_annotations": "expert",
}
REQUIRED_COLUMNS = ("comparison_id", "prompt_id", "text", "completion_a", "completion_b",
                    *ANNOTATION_COLUMNS)


@dataclass(frozen=True)
class MultiPrefConfig:
    source: str = "allenai/multipref"  # Hub id, or a local parquet/jsonl file or directory
    split: str = "train"  # the source split (MultiPref has only "train")
    subset: str | None = None  # Hub configuration name; None for the default one
    heldout_fraction: float = 0.1  # share of distinct prompt ids held out
    n_eval_prompts: int = 300  # evaluation prompts, drawn from the held-out prompts
    seed: int = 0  # data seed: the held-out prompts and the evaluation prompts
    audit_attributes: tuple[str, ...] = ("length", "markdown")  # attribute specs audited
    keep_ties: bool = False  # write tied annotations as tie rows (false: dropped and counted, as the paper)
    keep_strength: bool = False  # write each win's grade as its strength (slightly 1, clearly 2)


@dataclass(frozen=True)
class MultiPrefCorpus:
    """Everything the builder writes, in memory."""

    train: list[Judgment]
    heldout: list[Judgment]
    sft: list[dict[str, str]]  # prompt_id, pair_id, prompt, response (training side only)
    eval_prompts: list[dict[str, str]]  # prompt_id, prompt (held-out side)
    counts: dict[str, Any] = field(default_factory=dict)


def _text(row: Mapping[str, Any], column: str, where: str) -> str:
    """The string in ``column``; an id column may also hold an int, written as its decimal."""
    value = row[column]
    if column.endswith("_id") and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise CorpusSchemaError(f"{where}: column {column!r} must be a string, got "
                                f"{type(value).__name__} {value!r}")
    return value


def _votes(row: Mapping[str, Any], where: str) -> list[tuple[str, str, str | None, int | None]]:
    """(evaluator, class, winning side or None for a tie, strength) of every annotation of a comparison."""
    votes = []
    for column, annotator_class in ANNOTATION_COLUMNS.items():
        annotations = row[column]
        if annotations is None:
            annotations = []
        if not isinstance(annotations, (list, tuple)):
            raise CorpusSchemaError(f"{where}: column {column!r} must be a list of annotations, "
                                    f"got {type(annotations).__name__}")
        for i, annotation in enumerate(annotations):
            here = f"{where}, {column}[{i}]"
            if not isinstance(annotation, Mapping):
                raise CorpusSchemaError(f"{here}: expected an annotation mapping, got "
                                        f"{type(annotation).__name__}")
            evaluator, preference = annotation.get("evaluator"), annotation.get("overall_pref")
            if not isinstance(evaluator, str) or not evaluator.strip():
                raise CorpusSchemaError(f"{here}: 'evaluator' must be a non-empty string, got {evaluator!r}")
            if preference not in OVERALL_PREFS:
                raise CorpusSchemaError(f"{here}: 'overall_pref' {preference!r} is not one of "
                                        f"{list(OVERALL_PREFS)}")
            votes.append((evaluator, annotator_class, *MULTIPREF_LABELS[preference]))
    return votes


def split_prompt_ids(prompt_ids: Sequence[str], heldout_fraction: float, seed: int
                     ) -> frozenset[str]:
    """The held-out prompt ids: ``floor(fraction * n + 0.5)`` of the ``n`` distinct ids.

    The distinct ids are sorted, permuted by ``numpy.random.default_rng(seed)``, and the first
    ones are held out, so the split depends only on the set of ids and the seed (not on row
    order). Both sides must be non-empty.
    """
    distinct = sorted(set(prompt_ids))
    n_heldout = math.floor(heldout_fraction * len(distinct) + 0.5)
    if not 0.0 < heldout_fraction < 1.0 or not 0 < n_heldout < len(distinct):
        raise ValueError(f"heldout_fraction={heldout_fraction} of {len(distinct)} prompts holds out "
                         f"{n_heldout}; both the training and the held-out side need a prompt")
    order = np.random.default_rng(seed).permutation(len(distinct))
    return frozenset(distinct[i] for i in order[:n_heldout])


def _comparisons(rows: Sequence[Mapping[str, Any]], counts: dict[str, Any]
                 ) -> list[tuple[dict[str, str], list[tuple[str, str, str | None, int | None]]]]:
    """(texts and ids, votes) of every usable comparison; the dropped ones are counted."""
    kept = []
    seen_ids: set[str] = set()
    prompt_of: dict[str, str] = {}
    for index, row in enumerate(rows):
        where = f"row {index} (comparison_id {row.get('comparison_id')!r})"
        item = {column: _text(row, column, where)
                for column in ("comparison_id", "prompt_id", "text", "completion_a", "completion_b")}
        if item["comparison_id"] in seen_ids:
            raise CorpusSchemaError(f"{where}: duplicate comparison_id")
        seen_ids.add(item["comparison_id"])
        if prompt_of.setdefault(item["prompt_id"], item["text"]) != item["text"]:
            raise CorpusSchemaError(f"{where}: prompt_id {item['prompt_id']!r} has two different "
                                    "prompt texts")
        votes = _votes(row, where)
        counts["annotations"] += len(votes)
        counts["ties_dropped"] += sum(1 for _, _, side, _ in votes if side is None)
        if not all(item[c].strip() for c in ("text", "completion_a", "completion_b")):
            counts["comparisons_dropped_empty"] += 1
        elif item["completion_a"] == item["completion_b"]:
            counts["comparisons_dropped_identical"] += 1
        else:
            kept.append((item, votes))
    counts["comparisons"] = len(rows)
    counts["prompts"] = len(prompt_of)
    return kept


def _majority_side(votes: Sequence[tuple[str, str, str | None, int | None]]) -> str | None:
    """'a' / 'b' when more non-tie votes chose that side; None on an equal count."""
    for_a = sum(1 for _, _, side, _ in votes if side == "a")
    for_b = sum(1 for _, _, side, _ in votes if side == "b")
    return "a" if for_a > for_b else "b" if for_b > for_a else None


def multipref_corpus(rows: Sequence[Mapping[str, Any]], config: MultiPrefConfig) -> MultiPrefCorpus:
    """The judgments, SFT rows, evaluation prompts and counts from MultiPref rows (pure)."""
    counts: dict[str, Any] = {"annotations": 0, "ties_dropped": 0, "comparisons_dropped_empty": 0,
                              "comparisons_dropped_identical": 0, "sft_skipped_no_majority": 0}
    comparisons = _comparisons(rows, counts)
    heldout_ids = split_prompt_ids([c["prompt_id"] for c, _ in comparisons],
                                   config.heldout_fraction, config.seed)
    train: list[Judgment] = []
    heldout: list[Judgment] = []
    sft: list[dict[str, str]] = []
    class_of: dict[str, str] = {}
    for item, votes in comparisons:
        is_heldout = item["prompt_id"] in heldout_ids
        for evaluator, annotator_class, side, strength in votes:
            if class_of.setdefault(evaluator, annotator_class) != annotator_class:
                raise CorpusSchemaError(f"comparison_id {item['comparison_id']!r}: evaluator "
                                        f"{evaluator!r} appears as both crowd and expert")
            if side is None and not config.keep_ties:
                continue
            winner, loser = ("b", "a") if side == "b" else ("a", "b")  # a tie keeps A first
            label = ({"tie": True} if side is None else {"strength": strength} if config.keep_strength else {})
            (heldout if is_heldout else train).append(Judgment(
                prompt=item["text"], chosen=item[f"completion_{winner}"],
                rejected=item[f"completion_{loser}"], annotator=evaluator,
                annotator_class=annotator_class, prompt_id=item["prompt_id"],
                pair_id=item["comparison_id"], **label))
        if not is_heldout:
            side = _majority_side(votes)
            if side is None:
                counts["sft_skipped_no_majority"] += 1
            else:
                sft.append({"prompt_id": item["prompt_id"], "pair_id": item["comparison_id"],
                            "prompt": item["text"], "response": item[f"completion_{side}"]})
    eval_prompts = _eval_prompts(comparisons, heldout_ids, config)
    counts.update(_written_counts(counts, train + heldout, class_of, config))
    counts.update({
        "comparisons_kept": len(comparisons),  # passed the empty / identical filters
        "judgments_train": len(train), "judgments_heldout": len(heldout),
        "prompts_heldout": len(heldout_ids),
        "prompts_train": len({c["prompt_id"] for c, _ in comparisons} - heldout_ids),
        "sft_rows": len(sft), "eval_prompts": len(eval_prompts),
    })
    return MultiPrefCorpus(train, heldout, sft, eval_prompts, counts)


def _written_counts(counts: dict[str, Any], written: Sequence[Judgment], class_of: Mapping[str, str],
                    config: MultiPrefConfig) -> dict[str, Any]:
    """The counts of the judgments written. The tie share is the source's (every tie annotation, kept or
    not); with ``keep_ties`` the ties written are ``ties_kept`` and only those of dropped comparisons
    stay in ``ties_dropped``; with ``keep_strength``, ``strengths`` counts the wins at each grade."""
    ties = counts["ties_dropped"]
    kept = sum(j.tie for j in written)
    annotators = {j.annotator for j in written}
    out = {
        "ties_dropped": ties - kept,
        "tie_share": ties / counts["annotations"] if counts["annotations"] else None,
        "comparisons_judged": len({j.pair_id for j in written if not j.tie}),  # >= 1 non-tie vote
        "judgments": len(written),
        "annotators": len(annotators),
        "annotators_crowd": sum(1 for a in annotators if class_of[a] == "crowd"),
        "annotators_expert": sum(1 for a in annotators if class_of[a] == "expert"),
    }
    if config.keep_ties:
        out["ties_kept"] = kept
    if config.keep_strength:
        levels = sorted({j.strength for j in written if j.strength is not None})
        out["strengths"] = {str(level): sum(j.strength == level for j in written) for level in levels}
    return out


def _eval_prompts(comparisons, heldout_ids: frozenset[str], config: MultiPrefConfig
                  ) -> list[dict[str, str]]:
    """``n_eval_prompts`` held-out prompts, drawn with a seed of their own, sorted by id."""
    text_of = {item["prompt_id"]: item["text"] for item, _ in comparisons}
    candidates = sorted(heldout_ids)
    if config.n_eval_prompts > len(candidates):
        raise ValueError(f"n_eval_prompts={config.n_eval_prompts} exceeds the {len(candidates)} "
                         "held-out prompts; lower it or raise heldout_fraction")
    rng = np.random.default_rng([config.seed, 1])  # independent of the split's stream
    chosen = sorted(candidates[i] for i in rng.choice(len(candidates), config.n_eval_prompts,
                                                      replace=False))
    return [{"prompt_id": pid, "prompt": text_of[pid]} for pid in chosen]


def _audit_summary(corpus: MultiPrefCorpus, specs: Sequence[str]) -> tuple[dict, dict]:
    """(spec -> {"train", "all", "warnings"} -> short summary, spec -> full audit of the training
    rows). The audit's warnings are kept in the result rather than raised; kept ties are left out
    (the audit reads wins only; the stats count them), a graded win is read as a win."""
    def short(result) -> dict:
        summary = {}
        for c in result.coordinates:
            theta_hat = c.overall.to_dict()["log_odds"]
            summary[c.name] = {"judgments": c.overall.judgments, "cross": c.overall.cross,
                               "share_cross": c.overall.share_cross, "wins": c.overall.wins,
                               "theta_hat": theta_hat,  # the odds restate it, as the paper's table does
                               "odds": None if theta_hat is None else math.exp(theta_hat)}
        return summary

    summary, full = {}, {}
    for spec in specs:
        attributes = resolve_attributes([spec])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BiasIdentifiabilityWarning)
            on_train = audit(wins_for_estimates(corpus.train), attributes)
            on_all = audit(wins_for_estimates(corpus.train + corpus.heldout), attributes)
        full[spec] = on_train.to_dict()
        summary[spec] = {"train": short(on_train), "all": short(on_all),
                         "warnings": list(on_train.warnings)}
    return summary, full


def build_multipref(config: MultiPrefConfig, outdir: str | Path) -> dict[str, Any]:
    """Read the source, write the corpus to ``outdir``, return the statistics.

    Files: ``train.jsonl`` / ``heldout.jsonl`` (judgments), ``sft.jsonl``, ``eval_prompts.jsonl``,
    ``stats.json`` (counts and the audit summaries), ``audit.json`` (full audit of the training
    judgments by spec),
    ``config.yaml``. Raises CorpusNotFoundError when the source cannot be read.
    """
    rows = load_split(config.source, config.split, config.subset)
    require_columns(rows, REQUIRED_COLUMNS, config.source, config.split)
    return write_multipref(multipref_corpus(rows, config), config, outdir)


def write_multipref(corpus: MultiPrefCorpus, config: MultiPrefConfig, outdir: str | Path,
                    corpus_name: str = "multipref") -> dict[str, Any]:
    """Audit ``corpus`` and write the files of :func:`build_multipref` to ``outdir``; return the
    statistics. The tiny length-and-format world (:mod:`badpo.corpora.tiny_multipref`) writes its
    corpus through here too, so both give the same files in the same format."""
    summary, full = _audit_summary(corpus, config.audit_attributes)
    stats = {"corpus": corpus_name, "source": config.source, **corpus.counts, "audit": summary}
    if config.keep_ties:
        stats["ties_left_out_of_audit"] = sum(j.tie for j in corpus.train + corpus.heldout)
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    write_judgments(out / "train.jsonl", corpus.train)
    write_judgments(out / "heldout.jsonl", corpus.heldout)
    write_jsonl(out / "sft.jsonl", corpus.sft)
    write_jsonl(out / "eval_prompts.jsonl", corpus.eval_prompts)
    write_json(out / "stats.json", stats)
    write_json(out / "audit.json", full)
    # the label options appear when set: a corpus built without them keeps the bytes it had before them
    dump_yaml({name: value for name, value in to_dict(config).items()
               if name not in ("keep_ties", "keep_strength") or value}, out / "config.yaml")
    return stats


def summary_text(stats: Mapping[str, Any]) -> str:
    """What ``badpo build multipref`` prints: the counts and the audit on all kept judgments."""
    lines = [f"{stats['corpus']} from {stats['source']}: {stats['judgments']} judgments "
             f"({stats['judgments_train']} train / {stats['judgments_heldout']} held-out) on "
             f"{stats['comparisons_kept']} comparisons over {stats['prompts']} prompts; "
             + (f"{stats['ties_kept']} ties kept as tie rows, " if "ties_kept" in stats else "")
             + f"{stats['ties_dropped']} ties dropped ({100 * (stats['tie_share'] or 0):.1f}%); "
             f"{stats['annotators']} evaluators; {stats['sft_rows']} SFT rows; "
             f"{stats['eval_prompts']} evaluation prompts"]
    for _spec, by_rows in stats["audit"].items():
        for name, row in by_rows["all"].items():
            theta = "-" if row["theta_hat"] is None else f"{row['theta_hat']:+.2f} (odds {row['odds']:.2f} : 1)"
            lines.append(f"  {name}: cross-group {100 * row['share_cross']:.1f}% "
                         f"({row['cross']}), theta-hat {theta}")
        lines += [f"  warning (training judgments): {w}" for w in by_rows["warnings"]]
    return "\n".join(lines)
