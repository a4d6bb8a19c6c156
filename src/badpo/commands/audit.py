"""``badpo audit``: the label audit of declared attributes (through :func:`badpo.api.audit`), the
discovery of attributes (``--discover``) and the stream of a pool still being labelled (``--stream``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from badpo import api
from badpo.auditing.discover_report import add_discover_option, discover_command
from badpo.auditing.stream_file import follow_stream, run_stream
from badpo.commands.parsing import Command, column_map
from badpo.core.arguments import column_pairs
from badpo.core.config import ConfigError
from badpo.core.jsonio import atomic_write_text, dumps
from badpo.core.outputs import check_not_input, check_output_file
from badpo.run_folder.layout import POLICY, REWARD_MODEL

__all__ = ["AUDIT"]


def _add_audit(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "audit", help="label audit: cross-group shares, offline log-odds, annotator graph",
        description="Read from the labels, before training, what they identify about the bias.",
    )
    parser.add_argument("data", nargs="?",
                        help="judgments: a .jsonl/.parquet/.csv/.json file, a save_to_disk folder or a "
                             "Hub dataset id (see docs/data-format.md)")
    parser.add_argument("--split", default=None,
                        help="split of a Hub dataset or saved DatasetDict (default: train / the only one)")
    parser.add_argument("--column", action="append", default=[], metavar="FIELD=COLUMN",
                        help="the data's column holding a field (repeatable), e.g. annotator=worker_id")
    parser.add_argument("--attribute", "-a", action="append", default=[], metavar="[NAME=]SPEC",
                        help="declared attribute spec (repeatable), e.g. markdown, names, length:1.5, "
                             "'signoff=regex:-- (cheers|thanks)$' (NAME= gives it a short name)")
    parser.add_argument("--duplicates", choices=("keep", "drop"), default="keep",
                        help="exact duplicate judgments: keep each as a vote (default) or drop the repeats")
    parser.add_argument("--json", metavar="OUT", help="also write the audit as JSON to OUT")
    parser.add_argument("--example", action="store_true",
                        help="audit the built-in corpus with planted annotator biases instead of DATA")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --example corpus (--discover: of its split)")
    add_discover_option(parser)
    parser.add_argument("--report", metavar="DIR",
                        help="write the per-annotator report to DIR: annotators.csv, audit.json, "
                             "forest-<attribute>.png, README.md")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing --json file, or the report in --report DIR (exactly "
                             "the files that report lists are deleted first)")
    parser.add_argument("--tokenizer", metavar="NAME_OR_PATH",
                        help="say how much of the text this tokenizer reads (the share of its unknown "
                             "token per side; mostly unknown text is an error); default: the tokenizer "
                             "of --run RUN_DIR, if given")
    parser.add_argument("--run", metavar="RUN_DIR", dest="run_dir",
                        help="with --report: show the learned theta_k of this training run beside the estimates")
    parser.add_argument("--pseudonymise", action="store_true",
                        help="replace annotator ids by keyed hashes (HMAC-SHA256) in every output")
    parser.add_argument("--pseudonym-key", metavar="KEY",
                        help="the secret key of --pseudonymise (default: $BADPO_PSEUDONYM_KEY); the "
                             "same key gives the same pseudonyms on every run")
    stream = parser.add_argument_group(
        "streaming (a pool still being labelled; see docs/audit.md)",
        "--stream STATE reads the lines appended to the .jsonl DATA since the last run, keeps each "
        "annotator's estimates in STATE (JSON; created on the first run) and flags an annotator when an "
        "anytime-valid test says its bias differs from the rest of the pool's")
    stream.add_argument("--stream", metavar="STATE", help="the state file of this stream: resumed when it exists")
    stream.add_argument("--alpha", type=float, default=None,
                        help="chance of any false flag in a pool of up to --pool-size annotators, however often "
                             "it is read (default 0.05)")
    stream.add_argument("--pool-size", type=int, default=None, metavar="M",
                        help="the number of annotators alpha is split over (default 100); more annotators "
                             "than M are still tested, and the output says how the bound grows")
    stream.add_argument("--follow", type=float, metavar="SECONDS",
                        help="keep reading every SECONDS until Ctrl-C, printing each flag as it is raised")
    return parser


def _run_stream(args: argparse.Namespace) -> int:
    """``badpo audit DATA --stream STATE``: one pass over what was appended, or --follow."""
    others = [flag for flag, given in (("--example", args.example), ("--report", args.report),
                                       ("--run", args.run_dir), ("--pseudonymise", args.pseudonymise),
                                       ("--tokenizer", args.tokenizer), ("--split", args.split),
                                       ("--column", args.column)) if given]
    if others:
        raise ConfigError(f"--stream reads a .jsonl file with badpo's field names; {', '.join(others)} "
                          "apply to the whole-file audit")
    if not (args.data and args.attribute):
        raise ConfigError("--stream STATE needs DATA (a .jsonl file) and at least one --attribute SPEC")
    if args.follow is not None and not args.follow > 0:
        raise ConfigError(f"--follow: the seconds between reads must be > 0, got {args.follow}")
    if args.follow is not None and args.json:
        raise ConfigError("--json OUT is written by a one-pass run; run one after --follow (the state keeps all)")
    check_not_input(args.stream, "--stream", [("DATA", args.data)])  # the state is rewritten after every read
    if args.json:
        check_output_file(args.json, "--json", args.overwrite, [("DATA", args.data), ("--stream", args.stream)])
    alpha = 0.05 if args.alpha is None else args.alpha
    pool_size = 100 if args.pool_size is None else args.pool_size
    if args.follow is not None:
        try:
            follow_stream(args.data, args.stream, args.attribute, alpha, pool_size, args.follow,
                          lambda line: print(line, flush=True))
        except KeyboardInterrupt:
            print("stopped; the state is saved after every read")
        return 0
    audit, text = run_stream(args.data, args.stream, args.attribute, alpha, pool_size)
    print(text, end="")
    if args.json:
        atomic_write_text(args.json, dumps(audit.table(), indent=1, sort_keys=True) + "\n")
    return 0


def _run_audit(args: argparse.Namespace) -> int:
    from badpo.run_folder.layout import check_outside_runs

    for option, path in (("--json", args.json), ("--report", getattr(args, "report", None))):
        if path:  # a run's theta.json or a model's weights are no place for an audit's output
            check_outside_runs(path, option)
    if args.discover:
        return discover_command(args, column_map(args.column))
    if args.stream:
        return _run_stream(args)
    _check_audit_flags(args)
    key = (args.pseudonym_key or os.environ.get("BADPO_PSEUDONYM_KEY")) if args.pseudonymise else None
    if args.pseudonymise and not key:
        raise ConfigError("--pseudonymise needs a secret key: --pseudonym-key KEY or $BADPO_PSEUDONYM_KEY "
                          "(an unkeyed hash of a short id is reversed by hashing every candidate id)")
    if args.json:  # before the data is read (and before a tokenizer is loaded)
        check_output_file(args.json, "--json", args.overwrite, [("DATA", args.data)])
    result = api.audit(args.data, args.attribute, split=args.split, columns=column_pairs(args.column),
                       report=args.report, run=args.run_dir, pseudonym_key=key, tokenizer=_audit_tokenizer(args),
                       json_out=args.json, overwrite=args.overwrite, example=args.example, seed=args.seed,
                       duplicates=args.duplicates)
    print(result.text, end="")
    return 0


def _check_audit_flags(args: argparse.Namespace) -> None:
    """The flag combinations the audit of declared attributes refuses, each one line naming the flags
    (the API's own checks name its arguments instead)."""
    if args.follow is not None or args.alpha is not None or args.pool_size is not None:
        raise ConfigError("--alpha, --pool-size and --follow apply to --stream STATE")
    if args.example and (args.data or args.attribute or args.split or args.column):
        raise ConfigError("--example audits the built-in corpus; give no DATA, --attribute, --split "
                          "or --column")
    if not args.example and not (args.data and args.attribute):
        raise ConfigError("give DATA and at least one --attribute SPEC (or --example)")
    if args.example and (args.report or args.run_dir or args.pseudonymise or args.tokenizer):
        raise ConfigError("--report, --run, --pseudonymise and --tokenizer apply to DATA, not to --example")
    if args.run_dir and not args.report:
        raise ConfigError("--run RUN_DIR needs --report DIR (the learned theta_k are shown in the report)")
    if args.pseudonym_key and not args.pseudonymise:
        raise ConfigError("--pseudonym-key is the key of --pseudonymise; give both")


def _audit_tokenizer(args: argparse.Namespace):
    """The tokenizer whose coverage of the text the audit reports: ``--tokenizer``, else the one a
    ``--run`` folder saved beside its model; None without either."""
    name = args.tokenizer
    for folder in (POLICY, REWARD_MODEL) if name is None and args.run_dir else ():
        if (Path(args.run_dir) / folder / "tokenizer_config.json").is_file():
            name = str(Path(args.run_dir) / folder)
            break
    if name is None:
        return None
    from transformers import AutoTokenizer  # loads torch: only when asked

    try:
        return AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as error:
        raise OSError(f"--tokenizer {name}: cannot load a tokenizer ({str(error).strip().splitlines()[0]})") from None


AUDIT = (Command("audit", _add_audit, _run_audit),)
