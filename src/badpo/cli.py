"""``badpo <command>``: argv -> config -> one library call. Nothing else lives here.

Each command is a pair ``_add_<name>(subparsers)`` / ``_cmd_<name>(args)`` registered in
``COMMANDS``; the training stages (``sft``, ``train``, ``rm``) share one pair, driven by ``STAGES``.
Modules that load torch (:mod:`badpo.readouts.evaluate`, the experiment pipeline, its stages and the
sweep) are imported inside their command, so that ``badpo --help`` does not load torch (the
training stages are named by string in ``STAGES``). This is the top layer, so nothing imports
this module and a late import here cannot hide a cycle; ``tests/house/test_layering.py`` reads them too.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from badpo.audit.discover_report import add_discover_option, discover_command
from badpo.audit.estimates import BiasIdentifiabilityWarning
from badpo.audit.report import audit_with_report
from badpo.audit.stream_file import follow_stream, run_stream
from badpo.core.arguments import Once, column_overrides, column_pairs, hint, overrides_once, overrides_put_back
from badpo.core.config import ConfigError, from_dict, load_config, read_settings
from badpo.core.jsonio import atomic_write_text, dumps
from badpo.core.outputs import check_output_file
from badpo.corpora.builders import CORPORA, check_outdir, corpus_builder
from badpo.corpora.example import example_report
from badpo.data.gguf import PACKAGED as GGUF_PACKAGED
from badpo.data.sources import ColumnMap
from badpo.experiment.config import ExperimentConfig, experiment_config_path
from badpo.readouts.compare_cli import add_compare, cmd_compare


class _CommandParser(argparse.ArgumentParser):
    """A command's parser. ``any_order``: options and positionals in any order (``RUN --heldout F
    max_prompts=2``; plain argparse fills every positional at the first one it meets, so an
    override after an option is refused). ``config_classes``: (title, "module:Class") whose keys
    ``--help`` lists with their defaults and meanings (:mod:`badpo.core.config_help`, read from the
    classes themselves), imported only when the help is shown."""

    def __init__(self, *args, any_order: bool = True, config_classes: Sequence[tuple[str, str]] = (),
                 **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.any_order, self.config_classes = any_order, tuple(config_classes)
        self._intermixing = False

    def parse_known_args(self, args=None, namespace=None):
        if not self.any_order or self._intermixing:  # parse_known_intermixed_args calls back in here
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            namespace, extras = self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False
        positionals = [a.dest for a in self._actions if not a.option_strings and a.nargs in (None, "?")]
        overrides_put_back(namespace, positionals)  # KEY=VALUE before a positional
        try:
            overrides_once(getattr(namespace, "overrides", None) or ())
        except ValueError as error:
            self.error(str(error))
        return namespace, extras

    argv: Sequence[str] = ()  # the command line being parsed (main sets it), for the hint of error()

    def error(self, message: str):
        super().error(hint(self.prog.split()[-1], message, self.argv))

    def format_help(self) -> str:
        from badpo.core.config_help import format_keys

        listings = [format_keys(_import(spec), title) for title, spec in self.config_classes]
        return "\n".join([super().format_help(), *listings])


def _add_config_args(parser: argparse.ArgumentParser, example: str) -> None:
    parser.add_argument("--config", "-c", default=None, action=Once, help="YAML config file (once)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help=f"dotted overrides of this command's config keys (listed below), e.g. {example}")


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


def _cmd_audit_stream(args: argparse.Namespace) -> int:
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
    if args.json:
        check_output_file(args.json, "--json", args.overwrite)
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


def _cmd_audit(args: argparse.Namespace) -> int:
    if args.discover:
        return discover_command(args, _columns(args.column))
    if args.stream:
        return _cmd_audit_stream(args)
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
    key = (args.pseudonym_key or os.environ.get("BADPO_PSEUDONYM_KEY")) if args.pseudonymise else None
    if args.pseudonym_key and not args.pseudonymise:
        raise ConfigError("--pseudonym-key is the key of --pseudonymise; give both")
    if args.pseudonymise and not key:
        raise ConfigError("--pseudonymise needs a secret key: --pseudonym-key KEY or $BADPO_PSEUDONYM_KEY "
                          "(an unkeyed hash of a short id is reversed by hashing every candidate id)")
    if args.json:  # before the data is read
        check_output_file(args.json, "--json", args.overwrite)
    with warnings.catch_warnings():  # the table lists them; do not print them twice
        warnings.simplefilter("ignore", BiasIdentifiabilityWarning)
        if args.example:
            result, text = example_report(args.seed)
        else:
            result, text, _ = audit_with_report(args.data, args.attribute, args.report, args.run_dir, key,
                                                data_split=args.split, columns=_columns(args.column),
                                                overwrite=args.overwrite, tokenizer=_audit_tokenizer(args),
                                                duplicates=args.duplicates)
    print(text, end="")
    if args.json:
        atomic_write_text(args.json, result.to_json())
    return 0


def _audit_tokenizer(args: argparse.Namespace):
    """The tokenizer whose coverage of the text the audit reports: ``--tokenizer``, else the one a
    ``--run`` folder saved beside its model; None without either."""
    name = args.tokenizer
    for folder in ("policy", "reward_model") if name is None and args.run_dir else ():
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


def _columns(items: Sequence[str]) -> ColumnMap:
    """``--column FIELD=COLUMN`` options as the ``columns`` section of a config."""
    return from_dict(ColumnMap, column_pairs(items), prefix="columns")


def _add_build(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "build", help="build a corpus into OUTDIR",
        description="Build a corpus (judgments, SFT rows, evaluation prompts, gate statistics).",
        config_classes=[(f"{name} keys", ":".join(spec[:2])) for name, spec in CORPORA.items()],
    )
    parser.add_argument("corpus", choices=list(CORPORA), help="which corpus to build")
    parser.add_argument("outdir", help="output directory (created if needed)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the corpus files already in OUTDIR (else refused)")
    parser.set_defaults(label=lambda args: f"build {args.corpus}")
    _add_config_args(parser, "n_pairs=2000 (tiny-signed)")
    return parser


def _cmd_build(args: argparse.Namespace) -> int:
    config_class, build, summary = corpus_builder(args.corpus)
    config = load_config(config_class, args.config, args.overrides)
    check_outdir(args.corpus, args.outdir, args.overwrite)
    print(summary(build(config, args.outdir)))
    return 0


def _add_experiment(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "experiment", help="run a table: one reference, every (arm, seed) once, tables and plots",
        description="Run what CONFIG lists that is not logged yet under its output_dir, then "
                    "render table.md / table.csv / rates.png / theta.png from the logged runs.",
        config_classes=[("experiment keys", "badpo.experiment.config:ExperimentConfig")],
    )
    parser.add_argument("config", help="experiment YAML, or 'tiny' for the built-in tiny-world table")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="dotted overrides, e.g. seeds=[42] output_dir=runs/try")
    parser.add_argument("--render-only", action="store_true",
                        help="run nothing: render the tables from the logged runs (all must exist)")
    return parser


def _run_experiment(name_or_path: str, overrides, render_only: bool = False) -> dict:
    """Load an experiment (a YAML path or a built-in name) with overrides and run it."""
    from badpo.experiment.pipeline import run_experiment  # loads torch and the engine

    config = load_config(ExperimentConfig, experiment_config_path(name_or_path), overrides)
    return run_experiment(config, render_only=render_only)


def _cmd_experiment(args: argparse.Namespace) -> int:
    from badpo.experiment.cure.analysis import is_cure_config, load_cure_config

    path = experiment_config_path(args.config)
    if is_cure_config(path):  # kind: fixed_offset_cure, the table of the fixed-offset cure
        from badpo.experiment.cure.stages import run_cure_config

        run_cure_config(load_cure_config(path, args.overrides), render_only=args.render_only)
        return 0
    _run_experiment(args.config, args.overrides, render_only=args.render_only)
    return 0


def _add_demo(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "demo", help="the whole effect on a laptop: DPO absorbs a planted bias, BA-DPO removes it",
        description="Build the tiny signed world, train the reference, run DPO, BA-DPO pooled and "
                    "BA-DPO theta_bar+eps_k at three seeds, evaluate, and print the table "
                    "(the built-in experiment 'tiny'; about 2.5 minutes on two CPU cores, 4 with the install). "
                    "The keys below are an experiment's; their defaults are the class's, which the "
                    "tiny experiment (src/badpo/experiment/tiny.yaml) sets otherwise.",
        config_classes=[("experiment keys", "badpo.experiment.config:ExperimentConfig")],
    )
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="dotted overrides of the tiny experiment, e.g. output_dir=runs/mine")
    return parser


def _cmd_demo(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    result = _run_experiment("tiny", args.overrides)
    print(f"files: {', '.join(str(f) for f in result['files'])}")  # the runner printed the table
    print(f"demo wall time: {time.perf_counter() - start:.0f} s")
    return 0


def _add_reproduce(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "reproduce", help="every table of a sweep in one resumable command, into one report folder",
        description="Run each experiment a sweep config lists (what is logged is skipped, so an "
                    "interrupted sweep resumes), then gather every table.md / table.csv / plot into "
                    "the report folder with a README.md holding each table beside the paper's. One "
                    "progress view over the whole sweep: runs done / to run, elapsed, time left. "
                    "configs/reproduce_tiny.yaml is every tiny table (run from the repository root).",
        config_classes=[("sweep keys", "badpo.experiment.reproduce:ReproduceConfig")],
    )
    parser.add_argument("config", help="sweep YAML (badpo.experiment.reproduce.ReproduceConfig keys)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="dotted overrides of the sweep, e.g. output_dir=runs/my_report")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--render-only", action="store_true",
                      help="train nothing: rebuild the report from the logged runs (all must exist)")
    mode.add_argument("--plan", action="store_true",
                      help="run and build nothing: per table, the runs logged and to run (keyed as the "
                           "sweep keys them), an estimated wall time and what it rests on, where the "
                           "report lands")
    return parser


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from badpo.experiment.cure.stages import cure_stages  # loads torch and the engine
    from badpo.experiment.reproduce import ReproduceConfig, run_reproduce
    from badpo.experiment.reproduce_plan import plan_sweep
    from badpo.experiment.stages import engine_stages

    config = load_config(ReproduceConfig, args.config, args.overrides)
    if args.plan:
        print(plan_sweep(config, engine_stages(), cure_stages()).text(), end="")
        return 0
    result = run_reproduce(config, engine_stages(), cure_stages(), render_only=args.render_only)
    print(f"report: {result['report']} (sweep wall time {result['wall_s']:.0f} s)")
    return 0


def _add_convert_gguf(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "convert-gguf", help="convert a GGUF checkpoint once into a plain Hugging Face model folder",
        description="Dequantize a .gguf into a folder every stage can load (fp32 safetensors, config, "
                    "tokenizer with its chat template); see docs/models.md. Naming the .gguf as "
                    "model.name_or_path does the same into the cache on first use.",
    )
    parser.add_argument("gguf", metavar="FILE",
                        help="a .gguf file, or a packaged model: " + ", ".join(sorted(GGUF_PACKAGED)))
    parser.add_argument("outdir", nargs="?", metavar="OUTDIR",
                        help="the folder to write (new or empty); default: the cache folder a config "
                             "naming FILE uses ($BADPO_GGUF_CACHE or ~/.cache/badpo/gguf)")
    return parser


def _cmd_convert_gguf(args: argparse.Namespace) -> int:
    from badpo.data.gguf import convert_gguf, gguf_folder

    start = time.perf_counter()
    if args.outdir is None:
        folder = Path(gguf_folder(args.gguf, key=""))
    else:
        folder = convert_gguf(args.gguf, args.outdir)
    size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
    print(f"{folder} ({size / 1e6:.0f} MB, {time.perf_counter() - start:.0f} s): use it as "
          f"model.name_or_path={folder}")
    return 0


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
        config_classes=[("readout settings", "badpo.readouts.settings:EvalConfig")],
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
    _add_config_args(parser, "max_prompts=200 generations=false")
    return parser


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from badpo.core.config import read_settings
    from badpo.readouts.run import EvalData, evaluate_run_dir, readouts_path, summary  # loads torch

    out = readouts_path(args.run_dir, args.out, args.overwrite)  # before any model is loaded
    overrides, mapped = column_overrides(args.overrides)  # columns.FIELD=COLUMN: --column's other spelling
    args.column = [*args.column, *mapped]
    settings = read_settings(args.config, overrides)
    if args.attribute:
        if "attributes" in settings:
            raise ConfigError("attributes: given twice; use -a SPEC or attributes=[...], not both")
        settings["attributes"] = args.attribute
    data = EvalData(prompts=args.prompts, heldout=args.heldout, corpus=args.corpus_dir,
                    columns=_columns(args.column) if args.column else None)
    readouts = evaluate_run_dir(args.run_dir, settings, data, trust_remote_code=args.trust_remote_code)
    atomic_write_text(out, dumps(readouts, indent=1, sort_keys=True) + "\n")  # null, never NaN
    print(summary(readouts, out))
    return 0


# stage command -> (help, description, config class module:name, stage function module:name)
STAGES: dict[str, tuple[str, str, str, str]] = {
    "sft": ("train the SFT reference (one epoch on one response per pair)",
            "Fine-tune the shared reference on the majority-chosen responses; see configs/sft_*.yaml.",
            "badpo.engine.settings:SFTConfig", "badpo.engine.sft:sft"),
    "train": ("one preference run (DPO or a BA-DPO arm) at one seed",
              "Preference stage from the SFT reference; see configs/train_*.yaml and badpo.methods "
              "for the methods.",
              "badpo.engine.settings:TrainConfig", "badpo.engine.train:train"),
    "rm": ("train a Bradley-Terry reward model, plain or bias-adjusted (a bias variant)",
           "Reward model (scalar head on any sequence-classification backbone) on judgments, with "
           "theta_k . dg added to the reward margin; see configs/rm_*.yaml and docs/reward_models.md.",
           "badpo.engine.settings:RMConfig", "badpo.engine.reward:train_reward_model"),
}
OVERRIDE_EXAMPLES = {"sft": "epochs=2 output_dir=runs/my_sft", "train": "steps=200 runtime.seed=7",
                     "rm": "variant=pooled steps=200"}


def _import(spec: str):
    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)


def _add_stage(name: str):
    """The ``_add_<name>`` function of one stage command."""

    def add(subparsers) -> argparse.ArgumentParser:
        help_text, description, config_class, _ = STAGES[name]
        parser = subparsers.add_parser(name, help=help_text, description=description,
                                       config_classes=[("config keys", config_class)])
        _add_config_args(parser, OVERRIDE_EXAMPLES[name])
        parser.add_argument("--column", action="append", default=[], metavar="FIELD=COLUMN",
                            help="the same as the config key columns.FIELD=COLUMN (repeatable)")
        parser.set_defaults(stage=name)
        return parser

    return add


def _cmd_stage(args: argparse.Namespace) -> int:
    from badpo.engine.settings import warn_paper_defaults  # loads torch

    _, _, config_class, function = STAGES[args.stage]
    mapped = [f"columns.{field}={column}" for field, column in column_pairs(args.column).items()]
    overrides_once([*args.overrides, *mapped])  # columns.FIELD=a and --column FIELD=b: one key twice
    settings = read_settings(args.config, [*args.overrides, *mapped])  # --column: columns.FIELD=COLUMN
    config = from_dict(_import(config_class), settings)
    if args.config is None:  # every key not given is the paper's: say so
        warn_paper_defaults(args.stage, settings, config)
    print(_import(function)(config))
    return 0


COMMANDS: tuple = (
    (_add_audit, _cmd_audit), (_add_build, _cmd_build), (_add_experiment, _cmd_experiment),
    (_add_reproduce, _cmd_reproduce), (_add_demo, _cmd_demo),
    (_add_stage("sft"), _cmd_stage), (_add_stage("train"), _cmd_stage), (_add_stage("rm"), _cmd_stage),
    (_add_evaluate, _cmd_evaluate), (add_compare, cmd_compare), (_add_convert_gguf, _cmd_convert_gguf),
)


# What a user can cause (a config key, a data row, a path, a corrupt file, a missing package) and
# what a message can name: shown as one line, exit status 2. Anything else is a bug: a traceback.
USER_ERRORS = (ValueError, OSError, ImportError)


class _TopParser(argparse.ArgumentParser):
    """badpo's own parser: it reports a command's unrecognized arguments, with the same hint."""

    def error(self, message: str):
        command = next((arg for arg in _CommandParser.argv if not arg.startswith("-")), None)
        super().error(hint(command, message, _CommandParser.argv))


def build_parser() -> argparse.ArgumentParser:
    parser = _TopParser(prog="badpo", description="Bias-adjusted preference optimization (BA-DPO).")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an error instead of one line")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=_CommandParser)
    for add, run in COMMANDS:
        command = add(subparsers)
        if command.get_default("label") is None:  # what an error line names: the command
            command.set_defaults(label=lambda args: args.command)
        command.set_defaults(run=run)
    return parser


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    return f"badpo: warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    _CommandParser.argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.debug:
        return args.run(args) or 0
    saved_format = warnings.formatwarning
    warnings.formatwarning = _one_line_warning
    try:
        return args.run(args) or 0
    except USER_ERRORS as error:
        message = str(error).strip() or type(error).__name__
        print(f"badpo {args.label(args)}: {message} (--debug for the traceback)", file=sys.stderr)
        return 2
    finally:
        warnings.formatwarning = saved_format


if __name__ == "__main__":
    sys.exit(main())
