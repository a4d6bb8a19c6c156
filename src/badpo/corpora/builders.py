"""The corpus builders by name, for the command line and the experiment runner.

Every builder is ``build(config, outdir) -> statistics`` with a frozen config dataclass, and its
module has ``summary_text(statistics)``. Modules are imported on demand: the real builders pull
in ``datasets``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from badpo.core.config import ConfigError, from_dict

# corpus name -> (module, config class, build function)
CORPORA: dict[str, tuple[str, str, str]] = {
    "tiny-signed": ("badpo.corpora.tiny", "TinyWorldConfig", "build_tiny_world"),
    "tiny-multipref": ("badpo.corpora.tiny_multipref", "TinyMultiPrefConfig", "build_tiny_multipref"),
    "signed-ultrafeedback": (
        "badpo.corpora.signed_ultrafeedback", "SignedUltraFeedbackConfig", "build_signed_ultrafeedback"),
    "multipref": ("badpo.corpora.multipref", "MultiPrefConfig", "build_multipref"),
    "smol-signed": ("badpo.corpora.smol_signed", "SmolSignedConfig", "build_smol_signed"),
    "smol-multipref": ("badpo.corpora.smol_multipref", "SmolMultiPrefConfig", "build_smol_multipref"),
    "own-data": ("badpo.corpora.own_data", "OwnDataConfig", "build_own_data"),  # your judgments, split
    "example-csv": ("badpo.corpora.example", "ExampleCsvConfig", "build_example_csv"),  # a CSV as users have one
}


def corpus_builder(name: str) -> tuple[type, Callable[[Any, Path], dict], Callable[[dict], str]]:
    """(config class, build function, summary function) of the named corpus."""
    if name not in CORPORA:
        raise ConfigError(f"unknown corpus {name!r}; choose one of {sorted(CORPORA)}")
    module_name, config_name, build_name = CORPORA[name]
    module = importlib.import_module(module_name)
    return getattr(module, config_name), getattr(module, build_name), module.summary_text


# what `badpo build multipref` writes (the other builders list theirs in OUTPUT_FILES)
_MULTIPREF_FILES = ("train.jsonl", "heldout.jsonl", "sft.jsonl", "eval_prompts.jsonl", "stats.json",
                    "audit.json", "config.yaml")


def check_outdir(name: str, outdir: str | Path, overwrite: bool = False) -> None:
    """Before a build: ``outdir`` is a folder (or will be), and holds none of the files the named
    corpus writes unless ``overwrite`` (the user's ``--overwrite``): a rebuild into the folder of
    a trained run's data would replace that data without a word."""
    out = Path(outdir)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"OUTDIR {outdir}: is a file, not a folder")
    module = importlib.import_module(CORPORA[name][0]) if name in CORPORA else None
    names = [n.rstrip("/") for n in getattr(module, "OUTPUT_FILES", _MULTIPREF_FILES)]
    found = [n for n in names if (out / n).exists()]
    if found and not overwrite:
        raise FileExistsError(f"OUTDIR {outdir}: holds {', '.join(found[:4])}{' ...' if len(found) > 4 else ''}, "
                              f"which building {name} replaces; give --overwrite to replace them, or "
                              "another folder")


def build_corpus(name: str, config: Mapping[str, Any], outdir: str | Path) -> dict:
    """Build the named corpus from a plain config mapping (keys checked) into ``outdir``."""
    config_class, build, _ = corpus_builder(name)
    return build(from_dict(config_class, config, prefix="corpus.config"), Path(outdir))


def build_and_describe(name: str, config: Mapping[str, Any], outdir: str | Path) -> str:
    """:func:`build_corpus`, then the text ``badpo build`` prints about it (the experiment runner
    logs it, so that what a builder chose, such as a held-out split, is said where it runs)."""
    _, _, summary = corpus_builder(name)
    return summary(build_corpus(name, config, outdir))


def corpus_sources(name: str, config: Mapping[str, Any]) -> dict | None:
    """The content fingerprints of the user's files a corpus is built from (a builder module's
    ``source_fingerprints``), so that a corpus built before they changed is not reused; None for a
    builder that reads no user file."""
    config_class, _, _ = corpus_builder(name)
    module = importlib.import_module(CORPORA[name][0])
    fingerprints = getattr(module, "source_fingerprints", None)
    return fingerprints(from_dict(config_class, config, prefix="corpus.config")) if fingerprints else None
