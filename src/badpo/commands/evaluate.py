"""``badpo evaluate RUN_DIR``: every readout of one finished training run, a summary on stdout and
``readouts.json``."""

from __future__ import annotations

import argparse

from badpo.commands.parsing import Command, add_config_args
from badpo.core.arguments import column_overrides, column_pairs
from badpo.core.config import ConfigError, read_settings

__all__ = ["EVALUATE"]


def _readout_settings() -> type:
    from badpo.readouts.eval_config import EvalConfig

    return EvalConfig


EVALUATE_FILES = """\
data (any format `badpo train` reads: .jsonl, .parquet, .csv, .json, a save_to_disk folder, a Hub id):
  --heldout FILE  judgments the run did not train on: prompt, chosen, rejected, annotator
                  (optional annotator_class, prompt_id, pair_id, g_chosen/g_rejected); the run's
                  columns.* mapping applies (--column FIELD=COLUMN changes a field of it)
                  -> held-out accuracy (same/cross per attribute, gap), vote prediction with the
                     run's theta_k
  --prompts FILE  evaluation prompts: a 'prompt' column (the run's columns.prompt applies),
                  optionally 'body' (the answer body names are read after, with body=given) and
                  'candidates'; default: the distinct prompts of --heldout
                  -> each declared attribute on the policy's and the reference's generations
                     (same prompts, decoder and seed), KL, token counts
  --corpus DIR    DIR/eval_prompts.jsonl + DIR/heldout.jsonl (+ DIR/planted.json), as
                  `badpo build` writes them (badpo's own field names); the default is the folder
                  of the run's training data when it holds them (the run's mapping applies)
  A readout whose input is missing is skipped, and the summary says so and why.

attributes: the run's declared ones (its config.yaml, or the badpo_run.json of a TRL run), or
  -a SPEC per attribute (or attributes=[...]); a module:function spec is never taken from RUN_DIR:
  declare it yourself.
settings: -c FILE and KEY=VALUE anywhere on the line (the readout settings listed below), e.g.
  max_prompts=100 max_new_tokens=128 seed=1 generations=false judge=MODEL; max_new_tokens is
  lowered to what the model's context leaves after the longest prompt (with a notice).
output: a short summary on stdout; every readout in RUN_DIR/readouts.json, or --out FILE outside
  the run folder (an existing file, RUN_DIR/readouts.json included, is replaced only with --overwrite).

example:
  badpo evaluate runs/my-run --heldout data/heldout.csv max_prompts=100
"""


def _add_evaluate(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "evaluate", help="every readout of one finished training run: a summary, and readouts.json",
        description="Read a `badpo train` (or `badpo rm`) output folder on the data you name: each\n"
                    "declared attribute's rate on the policy's and the reference's generations,\n"
                    "held-out accuracy and gap, vote prediction, theta, KL, and the names rates when\n"
                    "names are declared. The reference, tokenizer, tokenization, beta, column mapping\n"
                    "and declared attributes come from RUN_DIR/config.yaml (from RUN_DIR/badpo_run.json\n"
                    "in a folder that BADPOTrainer.save_model wrote with TRL).",
        epilog=EVALUATE_FILES, formatter_class=argparse.RawDescriptionHelpFormatter, any_order=True,
        config_classes=[("readout settings", _readout_settings)],
    )
    parser.add_argument("run_dir", help="the output folder of `badpo train` (or of `badpo rm`: the reward "
                                        "model's tilt on counterfactual pairs and held-out accuracy; or "
                                        "of BADPOTrainer.save_model)")
    parser.add_argument("--heldout", metavar="FILE", help="held-out judgments (see below)")
    parser.add_argument("--prompts", metavar="FILE", help="evaluation prompts (see below)")
    # dest is not "corpus": main() names `badpo build CORPUS` in its error line by args.corpus
    parser.add_argument("--corpus", dest="corpus_dir", metavar="DIR", default=None,
                        help="a corpus folder instead of --heldout/--prompts (see below)")
    parser.add_argument("--column", action="append", default=[], metavar="FIELD=COLUMN",
                        help="the data's column holding a field, replacing the run's mapping of that "
                             "field (repeatable), e.g. annotator=worker_id")
    parser.add_argument("--attribute", "-a", action="append", default=[], metavar="[NAME=]SPEC",
                        help="declared attribute spec (repeatable), instead of the run's own")
    parser.add_argument("--out", metavar="FILE", help="write the readouts here (default RUN_DIR/readouts.json); "
                                                      "never another file inside a run folder")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing readouts.json or --out FILE")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="run the model's own code from the Hub; the run's config.yaml cannot "
                             "turn this on, so give it only for a run you trust")
    add_config_args(parser, "max_prompts=200 generations=false")
    return parser


def _run_evaluate(args: argparse.Namespace) -> int:
    from badpo.api import evaluate  # loads torch when it reads

    overrides, mapped = column_overrides(args.overrides)  # columns.FIELD=COLUMN: --column's other spelling
    columns = column_pairs([*args.column, *mapped]) if args.column or mapped else None
    settings = read_settings(args.config, overrides)
    if args.attribute:
        if "attributes" in settings:
            raise ConfigError("attributes: given twice; use -a SPEC or attributes=[...], not both")
        settings["attributes"] = args.attribute
    result = evaluate(args.run_dir, settings, heldout=args.heldout, prompts=args.prompts, corpus=args.corpus_dir,
                      columns=columns, out=args.out, overwrite=args.overwrite, trust_remote_code=args.trust_remote_code)
    print(result.summary())
    return 0


EVALUATE = (Command("evaluate", _add_evaluate, _run_evaluate),)
