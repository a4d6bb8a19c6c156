"""What ``badpo evaluate`` checks of a run folder's paths before it loads a model: no pickle in the
policy folder, and the relative paths of its config.yaml read from where the run was made."""

from __future__ import annotations

from pathlib import Path

__all__ = ["PICKLE_SUFFIXES", "made_from", "moved_reference", "refuse_pickles", "resolved_from"]

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


def moved_reference(run_dir: Path, origin: Path | None, model: str, was_folder: bool = False) -> str | None:
    """Why a run's relative ``model`` may fail to load, said only when there is a reason to think it
    was a local folder: it names none here nor where the run was made, and a folder of that name
    (holding a config.json) sits above the run folder, it starts with ./ or ../, or the run's
    run.json says it was a folder when the run was made (``was_folder``: the reference is then
    refused before a load that would try the Hub, retrying for ~25 s offline). None
    otherwise: an absolute path, a folder here, or a Hub id loads or fails by itself."""
    if Path(model).is_absolute() or Path(model).expanduser().exists():
        return None
    if origin is not None and (origin / model).exists():
        return None
    found = next((parent / model for parent in run_dir.resolve().parents
                  if (parent / model / "config.json").is_file()), None)
    if found is None and not was_folder and not model.startswith(("./", "../")):
        return None
    where = f"here or in {origin}, where the run was made" if origin is not None else "here"
    guess = f"; {found} is a folder of that name" if found is not None else ""
    how = "it was a local folder when the run was made," if was_folder else "if the reference was a local folder,"
    return (f"config.yaml's model.name_or_path {model!r} is a relative path that names no folder {where}{guess}: "
            f"{how} write its path there")
