"""``badpo build`` and ``badpo convert-gguf``: the commands that write a folder to train from (a
corpus, a model converted from GGUF) and train nothing."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from badpo.commands.parsing import Command, add_config_args
from badpo.core.config import load_config
from badpo.corpora.builders import CORPORA, check_outdir, corpus_builder
from badpo.data.gguf import PACKAGED as GGUF_PACKAGED

__all__ = ["BUILD", "CONVERT_GGUF"]


def _add_build(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "build", help="build a corpus into OUTDIR",
        description="Build a corpus (judgments, SFT rows, evaluation prompts, gate statistics).",
        config_classes=[(f"{row.name} keys", lambda row=row: row.load().config_class) for row in CORPORA.values()],
    )
    parser.add_argument("corpus", choices=list(CORPORA), help="which corpus to build")
    parser.add_argument("outdir", help="output directory (created if needed)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the corpus files already in OUTDIR (else refused)")
    parser.set_defaults(label=lambda args: f"build {args.corpus}")
    add_config_args(parser, "n_pairs=2000 (tiny-signed)")
    return parser


def _run_build(args: argparse.Namespace) -> int:
    builder = corpus_builder(args.corpus)
    config = load_config(builder.config_class, args.config, args.overrides)
    check_outdir(args.corpus, args.outdir, args.overwrite)
    print(builder.summary(builder.build(config, args.outdir)))
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


def _run_convert_gguf(args: argparse.Namespace) -> int:
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


BUILD = (Command("build", _add_build, _run_build),)
CONVERT_GGUF = (Command("convert-gguf", _add_convert_gguf, _run_convert_gguf),)
