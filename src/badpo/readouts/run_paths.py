"""What ``badpo evaluate`` checks of a run folder's paths before it loads a model: no pickle in the
policy folder, and the relative paths of its config.yaml read from where the run was made."""

from __future__ import annotations

from pathlib import Path

__all__ = ["PICKLE_SUFFIXES", "made_from", "refuse_pickles", "resolved_from"]

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")  # formats torch.load unpickles


def refuse_pickles(policy: Path) -> None:
    """A run's policy folder holds safetensors (badpo and TRL's save_model write no pickle); a
    pickle there would run code when loaded, or fail deep in transformers: one line naming it."""
    found = sorted(p for p in policy.iterdir() if p.suffix in PICKLE_SUFFIXES) if policy.is_dir() else []
    if found:
        raise ValueError(f"{found[0]}: a pickle in the run's policy folder, which badpo never writes and "
                         "which could run code if loaded; refusing the run (delete it if you trust the folder)")


def made_from(run_dir: Path, output_dir: str) -> Path | None:
    """The folder ``badpo train`` ran in: ``run_dir`` less its relative ``output_dir`` (None when
    ``output_dir`` was absolute, or the folder was renamed since)."""
    relative = Path(output_dir)
    if relative.is_absolute() or not relative.parts or ".." in relative.parts:
        return None
    here = run_dir.resolve()
    if here.parts[-len(relative.parts):] != relative.parts:
        return None
    return Path(*here.parts[:-len(relative.parts)])


def resolved_from(origin: Path | None, path: str | None) -> str | None:
    """``path`` as the run saw it: relative to ``origin`` when it names nothing from here but does
    from there (a Hub id, or a path that exists here, is left as it is)."""
    if origin is None or not path or Path(path).is_absolute() or Path(path).expanduser().exists():
        return path
    there = origin / path
    return str(there) if there.exists() else path
