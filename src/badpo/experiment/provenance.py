"""What made a measurement: the code's commit, the packages, the device and the threads.

Every run record of an experiment carries :func:`provenance` (``provenance`` beside its
readouts), so that a figure in the docs can be traced to the commit, versions and machine that
produced it, and a CPU record is told apart from a GPU record of the same run.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import torch

__all__ = ["PACKAGES", "cpu_identity", "device_class", "provenance", "source_commit"]

PACKAGES = ("badpo", "torch", "transformers", "peft", "accelerate", "numpy")


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, timeout=10,
                          check=True).stdout


def source_commit(where: Path | None = None) -> dict[str, object] | None:
    """{"commit", "dirty"} of the git checkout holding ``where`` (badpo's package folder by
    default): dirty when a tracked file differs from the commit, or a file under ``where`` is not
    tracked (a new module the run imports); None outside a checkout (an installed wheel) or
    without git."""
    folder = where or Path(__file__).resolve().parents[1]
    try:
        commit = _git(folder, "rev-parse", "HEAD").strip()
        changed = _git(folder, "status", "--porcelain", "--untracked-files=no")
        untracked = _git(folder, "status", "--porcelain", "--untracked-files=all", "--", ".")
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(changed.strip() or untracked.strip())}


def _forced_cpu() -> bool:
    """``accelerate launch --cpu`` (ACCELERATE_USE_CPU): the process trains on the CPU beside a GPU."""
    return os.environ.get("ACCELERATE_USE_CPU", "").strip().lower() in ("1", "y", "yes", "t", "true", "on")


def device_class() -> str:
    """The kind of device this process trains and reads on, as accelerate picks it: ``cpu`` when
    forced (``--cpu``) or when no accelerator is there, else ``cuda``, ``mps`` or ``xpu``. A run
    key holds it (:func:`badpo.experiment.records.run_key`): the same settings give other numbers
    on another kind of device."""
    if _forced_cpu():
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    backends = (("mps", getattr(torch.backends, "mps", None)), ("xpu", getattr(torch, "xpu", None)))
    return next((kind for kind, backend in backends if backend is not None and backend.is_available()), "cpu")


def cpu_identity(cpuinfo: str | None = None) -> dict[str, str | None]:
    """The processor behind a CPU run: its model name and (vendor, family, model, stepping), read
    from ``/proc/cpuinfo`` (or the text given), and the vector kernels torch picks on it
    (``torch.backends.cpu.get_cpu_capability()``, e.g. ``AVX512``). Two machines that both say
    ``x86_64`` can give a tiny run other digits (issue 49: the demo's DPO read 0.785 on one two-core
    CPU and 0.709 on another); this is what tells them apart. Fields the system does not say are None."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, colon, value = line.partition(":")
        if not colon:
            if fields:  # the first processor's block is enough: the machine has one kind
                break
            continue
        fields.setdefault(key.strip(), value.strip())
    parts = [fields.get(key) for key in ("vendor_id", "cpu family", "model", "stepping")]
    signature = "/".join(parts) if all(parts) else None
    capability = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", lambda: None)()
    return {"model": fields.get("model name") or platform.processor() or None, "signature": signature,
            "capability": capability}


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def provenance() -> dict[str, object]:
    """The commit (None outside a checkout), the versions of :data:`PACKAGES` and Python, the
    device (the GPU's name, or ``cpu`` with the processor and :func:`cpu_identity`), the CPU cores and torch's threads.
    Taken once per process, at its first call (the sweep makes it before its first run), so a
    record names the code the process loaded, not a commit made while it ran."""
    kind = device_class()
    if kind == "cuda":
        device = {"kind": kind, "name": torch.cuda.get_device_name(0), "count": torch.cuda.device_count()}
    else:
        device = {"kind": kind, "name": platform.processor() or platform.machine(), "cpu": cpu_identity()}
    return {"source": source_commit(), "python": platform.python_version(),
            "packages": {name: _version(name) for name in PACKAGES}, "device": device,
            "cpu_cores": os.cpu_count(), "torch_threads": torch.get_num_threads()}
