"""``badpo compare``'s parser and command, with the other commands; the comparison itself lives in
:mod:`badpo.comparing.compare_runs`, and :mod:`badpo.cli` registers these."""

from __future__ import annotations

import argparse

__all__ = ["COMPARE_EPILOG", "add_compare", "cmd_compare"]


COMPARE_EPILOG = """\
what it reads: each RUN's readouts.json (`badpo evaluate RUN` writes it; or a readouts file written
  with `evaluate --out`) and, beside it, the run's method (run.json / config.yaml), theta.json,
  audit.json (the offline estimates), run.json (whether theta had settled) and data_fingerprint.json
  (what it trained on); a missing one is named in the notes.
what it refuses (one line; --force compares anyway and heads the output with why, except for one
  run given twice under any spelling): two runs holding identical readouts (a copied run folder);
  runs evaluated on other prompts or readout settings (inputs of their readouts.json); runs trained
  on other data (data_fingerprint.json). Evaluate every run on the same --prompts with the same
  settings.
what it prints: for every declared attribute on generated answers, each run's rate and the
  reference's with a 95% interval (bootstrap over prompts, 2000 resamples, seed 0); each run's
  removal of the baseline's shift, (base - run) / (base - ref), with a paired interval, or "not
  measurable" when the baseline's own shift is not a move: below 0.01 of a rate (1 token), an
  interval of zero width or holding 0, or (first-name rates) within evaluate's relabelling null;
  fewer than 10 prompts give no interval; KL, held-out accuracy
  same / cross and gap; theta_bar beside the audit's offline estimate; one verdict line per run
  and readout. When every run declared a names attribute, the same again for the rate from
  first-name probabilities with the answer body fixed (names.first_name, the paper's names readout).
  A run evaluated before per-prompt values were recorded has no interval, and the output says so.
--out DIR: compare.json, compare.md (the tables and verdicts), compare.png (rates with intervals,
  the reference dashed; a panel per readout and attribute) and theta.png (theta_k per annotator
  against the offline estimates, when a run learned them); never inside a run folder.

example:
  badpo compare runs/dpo runs/ba-shared runs/ba-pooled --out runs/compare
"""


def add_compare(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "compare", help="did BA-DPO remove the bias? evaluated runs side by side, with intervals and a verdict",
        description="Compare evaluated runs (a DPO run and BA-DPO runs, say): each declared attribute's rate\n"
                    "with an interval over prompts, each run's removal of the baseline's shift, KL,\n"
                    "held-out accuracy, theta against the audit's estimate, and one verdict line per run\n"
                    "and readout (with names declared, also the rate from first-name probabilities).",
        epilog=COMPARE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter, any_order=True,
    )
    parser.add_argument("runs", nargs="+", metavar="RUN", help="a run folder `badpo evaluate` has read")
    parser.add_argument("--reference", metavar="REF",
                        help="an evaluated run whose policy stands for the reference (default: the reference "
                             "model, as the baseline's evaluation read it)")
    parser.add_argument("--baseline", metavar="RUN",
                        help="the run whose shift the others remove (default: the run whose method is dpo)")
    parser.add_argument("--out", metavar="DIR", help="write compare.json, compare.md, compare.png (and theta.png) here")
    parser.add_argument("--overwrite", action="store_true", help="replace the compare files already in --out DIR")
    parser.add_argument("--force", action="store_true",
                        help="compare runs evaluated or trained differently anyway; the output then says so at its top")
    return parser


def cmd_compare(args: argparse.Namespace) -> int:
    from badpo.api import compare  # matplotlib, when it plots

    print(compare(args.runs, reference=args.reference, baseline=args.baseline, out=args.out,
                  overwrite=args.overwrite, force=args.force).text, end="")
    return 0
