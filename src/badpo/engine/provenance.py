"""What made a measurement: the code's commit, the packages, the device and the threads.

Every run record of an experiment carries :func:`provenance` (``provenance`` beside its
readouts), so that a figure in the docs can be traced to the commit, versions and machine that
produced it, and a CPU record is told apart from a GPU record of the same run.
"""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import torch

__all__ = ["PACKAGES", "provenance", "source_commit"]

PACKAGES = ("badpo", "torch", "transformers", "peft", "accelerate", "numpy")


def source_commit(where: Path | None = None) -> dict[str, object] | None:
    """{"commit", "dirty"} of the git checkout holding ``where`` (badpo's own source by default);
    None when it is not a checkout (an installed wheel) or git is missing."""
    folder = where or Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=folder,
                                capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(status.strip())}


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def provenance() -> dict[str, object]:
    """The commit (None outside a checkout), the versions of :data:`PACKAGES` and Python, the
    device (the GPU's name, or ``cpu`` with the processor), the CPU cores and torch's threads."""
    if torch.cuda.is_available():
        device = {"kind": "cuda", "name": torch.cuda.get_device_name(0), "count": torch.cuda.device_count()}
    else:
        device = {"kind": "cpu", "name": platform.processor() or platform.machine()}
    return {"source": source_commit(), "python": platform.python_version(),
            "packages": {name: _version(name) for name in PACKAGES}, "device": device,
            "cpu_cores": os.cpu_count(), "torch_threads": torch.get_num_threads()}
