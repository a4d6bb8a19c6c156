"""The corpus builders by name, for the command line and the experiment runner: :data:`CORPORA`,
one :class:`CorpusBuilder` row per name.

Every builder is ``build(config, outdir) -> statistics`` with a frozen config dataclass and a
``summary(statistics) -> text``. A row's ``load`` imports its module when first called (the real
builders pull in ``datasets``), so that naming a corpus, or ``badpo --help``, imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from badpo.core.config import ConfigError, from_dict


@dataclass(frozen=True)
class Builder:
    """What one corpus module offers: its config class, how it builds and describes a corpus, the
    files it writes into OUTDIR, and (for a builder that reads the user's files) their content
    fingerprints, so that a corpus built before they changed is not reused."""

    config_class: type
    build: Callable[[Any, Path], dict]
    summary: Callable[[dict], str]
    output_files: tuple[str, ...]
    source_fingerprints: Callable[[Any], dict] | None = None


@dataclass(frozen=True)
class CorpusBuilder:
    """One row of :data:`CORPORA`: a name and the function that imports its builder."""

    name: str
    load: Callable[[], Builder]


def _tiny_signed() -> Builder:
    from badpo.corpora import tiny

    return Builder(tiny.TinyWorldConfig, tiny.build_tiny_world, tiny.summary_text, tuple(tiny.OUTPUT_FILES),
                   tiny.source_fingerprints)


def _tiny_multipref() -> Builder:
    from badpo.corpora import tiny_multipref as world

    return Builder(world.TinyMultiPrefConfig, world.build_tiny_multipref, world.summary_text,
                   tuple(world.OUTPUT_FILES))


def _signed_ultrafeedback() -> Builder:
    from badpo.corpora import signed_ultrafeedback as world

    return Builder(world.SignedUltraFeedbackConfig, world.build_signed_ultrafeedback, world.summary_text,
                   tuple(world.OUTPUT_FILES))


def _multipref() -> Builder:
    from badpo.corpora import multipref

    files = ("train.jsonl", "heldout.jsonl", "sft.jsonl", "eval_prompts.jsonl", "stats.json", "audit.json",
             "config.yaml")
    return Builder(multipref.MultiPrefConfig, multipref.build_multipref, multipref.summary_text, files)


def _smol_signed() -> Builder:
    from badpo.corpora import smol_signed as world

    return Builder(world.SmolSignedConfig, world.build_smol_signed, world.summary_text, tuple(world.OUTPUT_FILES))


def _smol_multipref() -> Builder:
    from badpo.corpora import smol_multipref as world

    return Builder(world.SmolMultiPrefConfig, world.build_smol_multipref, world.summary_text,
                   tuple(world.OUTPUT_FILES))


def _own_data() -> Builder:
    from badpo.corpora import own_data

    return Builder(own_data.OwnDataConfig, own_data.build_own_data, own_data.summary_text,
                   tuple(own_data.OUTPUT_FILES), own_data.source_fingerprints)


def _helpsteer3() -> Builder:
    from badpo.corpora import helpsteer3

    return Builder(helpsteer3.HelpSteer3Config, helpsteer3.build_helpsteer3, helpsteer3.summary_text,
                   helpsteer3.OUTPUT_FILES)


def _prism() -> Builder:
    from badpo.corpora import prism

    return Builder(prism.PrismConfig, prism.build_prism, prism.summary_text, prism.OUTPUT_FILES)


def _example_csv() -> Builder:
    from badpo.corpora import example

    return Builder(example.ExampleCsvConfig, example.build_example_csv, example.summary_text,
                   tuple(example.OUTPUT_FILES))


CORPORA: dict[str, CorpusBuilder] = {row.name: row for row in (
    CorpusBuilder("tiny-signed", _tiny_signed),
    CorpusBuilder("tiny-multipref", _tiny_multipref),
    CorpusBuilder("signed-ultrafeedback", _signed_ultrafeedback),
    CorpusBuilder("multipref", _multipref),
    CorpusBuilder("smol-signed", _smol_signed),
    CorpusBuilder("smol-multipref", _smol_multipref),
    CorpusBuilder("helpsteer3", _helpsteer3),  # HelpSteer3's individual preferences: ties, strengths
    CorpusBuilder("prism", _prism),  # PRISM's rated opening turns, by participant id
    CorpusBuilder("own-data", _own_data),  # your judgments, split
    CorpusBuilder("example-csv", _example_csv),  # a CSV as users have one
)}


def corpus_builder(name: str) -> Builder:
    """The builder of the named corpus; an unknown name is a one-line error listing the known ones."""
    if name not in CORPORA:
        raise ConfigError(f"unknown corpus {name!r}; choose one of {sorted(CORPORA)}")
    return CORPORA[name].load()


def check_outdir(name: str, outdir: str | Path, overwrite: bool = False) -> None:
    """Before a build: ``outdir`` is a folder (or will be), and holds none of the files the named
    corpus writes unless ``overwrite`` (the user's ``--overwrite``): a rebuild into the folder of
    a trained run's data would replace that data without a word."""
    out = Path(outdir)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"OUTDIR {outdir}: is a file, not a folder")
    names = [n.rstrip("/") for n in corpus_builder(name).output_files]
    found = [n for n in names if (out / n).exists()]
    if found and not overwrite:
        raise FileExistsError(f"OUTDIR {outdir}: holds {', '.join(found[:4])}{' ...' if len(found) > 4 else ''}, "
                              f"which building {name} replaces; give --overwrite to replace them, or "
                              "another folder")


def build_corpus(name: str, config: Mapping[str, Any], outdir: str | Path) -> dict:
    """Build the named corpus from a plain config mapping (keys checked) into ``outdir``."""
    builder = corpus_builder(name)
    return builder.build(from_dict(builder.config_class, config, prefix="corpus.config"), Path(outdir))


def build_and_describe(name: str, config: Mapping[str, Any], outdir: str | Path) -> str:
    """:func:`build_corpus`, then the text ``badpo build`` prints about it (the experiment runner
    logs it, so that what a builder chose, such as a held-out split, is said where it runs)."""
    return corpus_builder(name).summary(build_corpus(name, config, outdir))


def check_corpus_config(name: str, config: Mapping[str, Any]) -> None:
    """The named builder exists and ``config`` holds only its keys, with values of their types
    (checked when an experiment is planned, beside its other sections, not only at the build)."""
    builder = corpus_builder(name)
    from_dict(builder.config_class, config, prefix="corpus.config")


def corpus_sources(name: str, config: Mapping[str, Any]) -> dict | None:
    """The content fingerprints of the user's files a corpus is built from (a builder module's
    ``source_fingerprints``), so that a corpus built before they changed is not reused; None for a
    builder that reads no user file."""
    builder = corpus_builder(name)
    if builder.source_fingerprints is None:
        return None
    return builder.source_fingerprints(from_dict(builder.config_class, config, prefix="corpus.config"))
