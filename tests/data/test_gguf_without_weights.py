"""A GGUF that cannot become a model is refused before any model is built (issue 37, item 1).

Before: a vocabulary-only GGUF (llama.cpp's ``ggml-vocab-*.gguf``) made transformers build a
default 7B model in fp32 (about 22 GB, silent for 75 s until the kernel killed it), leaving a
``.partial`` folder; a failed conversion deleted the user's empty output folder, and
``convert-gguf X .`` answered ``[Errno 22] Invalid argument: '.'``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("gguf", reason="the gguf package writes the test files (pip install 'badpo[test]')")

from badpo.core.config import ConfigError  # noqa: E402
from badpo.data import gguf as data_gguf  # noqa: E402
from badpo.data.gguf import SOURCE_FILE, check_weights, convert_gguf, gguf_folder  # noqa: E402
from fixtures.gguf import vocabulary  # noqa: E402
from fixtures.signals import deliver  # noqa: E402


def write_gguf(path, tensors: dict | None = None):
    """A GGUF with the tiny vocabulary and only ``tensors`` (name -> float32 array): none makes a
    vocabulary-only file, like llama.cpp's ``ggml-vocab-*.gguf``."""
    import gguf

    tokens, types = vocabulary()
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    for name, values in (tensors or {}).items():
        writer.add_tensor(name, values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def no_model_built(monkeypatch):
    """Fail the test if anything would build a model from the file."""
    def build(*args, **kwargs):
        raise AssertionError("a model was built")

    monkeypatch.setattr(data_gguf, "_load", build)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BADPO_GGUF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(data_gguf, "_ANNOUNCED", set())
    return tmp_path / "cache"


def test_a_vocabulary_only_gguf_is_refused_before_any_model_is_built(tmp_path, cli_error, no_model_built):
    vocab = write_gguf(tmp_path / "ggml-vocab-llama.gguf")
    line = cli_error(["convert-gguf", str(vocab), str(tmp_path / "out")])
    assert line.startswith("badpo convert-gguf: ") and str(vocab) in line and "holds no weights" in line, line
    assert sorted(os.listdir(tmp_path)) == ["ggml-vocab-llama.gguf"]  # no output, no .partial


def test_a_stage_naming_a_vocabulary_only_gguf_leaves_nothing_in_the_cache(tmp_path, cache, no_model_built):
    vocab = write_gguf(tmp_path / "vocab.gguf")
    with pytest.raises(ConfigError, match="^model.name_or_path: .*vocab.gguf' holds no weights"):
        gguf_folder(str(vocab))
    assert not cache.exists() or not os.listdir(cache)


def test_a_gguf_without_the_model_s_embedding_is_refused(tmp_path, no_model_built):
    import numpy as np

    odd = write_gguf(tmp_path / "odd.gguf", {"blk.0.attn_norm.weight": np.ones(4, np.float32)})
    with pytest.raises(ConfigError, match=r"holds 1 tensor.*\(no token_embd\.weight\)"):
        convert_gguf(odd, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_gguf_larger_than_the_memory_available_is_refused_with_the_figure(tmp_path, write_tiny_gguf,
                                                                            monkeypatch, no_model_built):
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf")
    size = check_weights(tiny)
    assert size > 4 * 264 * 32  # at least the embedding, in fp32
    monkeypatch.setattr(data_gguf, "_available_memory", lambda: size // 2)
    with pytest.raises(ConfigError, match=r"dequantizes to 0\.0 GiB of fp32 weights and converting it holds "
                                          r"them twice \(0\.0 GiB\), more than the 0\.0 GiB"):
        convert_gguf(tiny, tmp_path / "out")
    assert sorted(os.listdir(tmp_path)) == ["tiny.gguf"]


def test_a_gguf_whose_weights_fit_once_but_not_twice_is_refused(tmp_path, write_tiny_gguf, monkeypatch,
                                                               no_model_built):
    """A conversion peaks at twice the fp32 weights (the dequantized tensors and the model built
    from them: a 253 MB fp32 file peaked 494 MB above the imports); checking them once let a file of
    half to all of the available memory through, into the kernel's out-of-memory kill."""
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf")
    size = check_weights(tiny)
    monkeypatch.setattr(data_gguf, "_available_memory", lambda: size * 3 // 2)
    with pytest.raises(ConfigError, match="holds them twice"):
        convert_gguf(tiny, tmp_path / "out")
    assert sorted(os.listdir(tmp_path)) == ["tiny.gguf"]


def test_a_failed_conversion_keeps_the_user_s_empty_folder(tmp_path, write_tiny_gguf, cli_error):
    bad = write_tiny_gguf(tmp_path / "odd.gguf", architecture="rwkv6")  # transformers cannot read it
    (tmp_path / "mine").mkdir()
    assert "transformers cannot convert" in cli_error(["convert-gguf", str(bad), str(tmp_path / "mine")])
    assert (tmp_path / "mine").is_dir() and os.listdir(tmp_path / "mine") == []


def test_convert_gguf_into_the_working_directory_fills_it(tmp_path, write_tiny_gguf, monkeypatch, capsys):
    from badpo.cli import main

    tiny = write_tiny_gguf(tmp_path / "tiny.gguf")
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    assert main(["convert-gguf", str(tiny), "."]) == 0, capsys.readouterr().err
    names = os.listdir(tmp_path / "here")
    assert SOURCE_FILE in names and "model.safetensors" in names and not any(".partial" in n for n in names)
    assert "exists and is not an empty folder" in capsys.readouterr().out + _refused(main, tiny, capsys)


def _refused(main, tiny, capsys) -> str:
    """The second conversion into the now full working directory: refused in one line."""
    assert main(["convert-gguf", str(tiny), "."]) == 2
    return capsys.readouterr().err


def test_a_staging_folder_left_by_a_killed_conversion_is_cleared(tmp_path, write_tiny_gguf):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()  # a pid whose process has ended
    left = tmp_path / f".out.{data_gguf.socket.gethostname()}.{dead}.0123abcd.partial"
    left.mkdir()
    (left / "model.safetensors").write_bytes(b"half")
    other = tmp_path / ".out.elsewhere.1.0123abcd.partial"  # another machine's: not ours to judge
    other.mkdir()
    convert_gguf(write_tiny_gguf(tmp_path / "tiny.gguf"), tmp_path / "out")
    assert not left.exists() and other.exists() and (tmp_path / "out" / SOURCE_FILE).is_file()


def test_a_staging_folder_of_an_output_given_up_is_cleared_by_a_conversion_beside_it(tmp_path, write_tiny_gguf):
    """A user whose conversion into ``first`` was killed and who converts into ``second`` instead
    never converts into ``first`` again: its staging folder (up to the fp32 model's size) goes too."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    given_up = tmp_path / f".first.{data_gguf.socket.gethostname()}.{dead}.0123abcd.partial"
    given_up.mkdir()
    mine = tmp_path / f".mine.{data_gguf.socket.gethostname()}.{os.getpid()}.0123abcd.partial"  # alive: kept
    mine.mkdir()
    convert_gguf(write_tiny_gguf(tmp_path / "tiny.gguf"), tmp_path / "second")
    assert not given_up.exists() and mine.exists() and (tmp_path / "second" / SOURCE_FILE).is_file()


def test_an_empty_folder_holding_only_a_killed_conversion_s_staging_is_filled(tmp_path, write_tiny_gguf):
    """A conversion into the user's empty folder stages inside it; killed, it left only that hidden
    staging folder, and every retry was refused as "not an empty folder". It is cleared first."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    (tmp_path / "mine").mkdir()
    left = tmp_path / "mine" / f".convert.{data_gguf.socket.gethostname()}.{dead}.0123abcd.partial"
    left.mkdir()
    convert_gguf(write_tiny_gguf(tmp_path / "tiny.gguf"), tmp_path / "mine")
    assert not left.exists() and (tmp_path / "mine" / SOURCE_FILE).is_file()


@pytest.mark.parametrize("into_existing", [False, True])
def test_sigterm_during_a_conversion_removes_its_staging_folder(tmp_path, write_tiny_gguf, monkeypatch,
                                                                into_existing):
    """``kill`` (SIGTERM) stops a conversion as Ctrl-C does: the staging folder goes on the way out,
    and the handler before it is back."""
    import signal

    def killed(path, staging, key):
        (staging / "model.safetensors").write_bytes(b"half")
        deliver(signal.SIGTERM)

    monkeypatch.setattr(data_gguf, "_write", killed)
    before = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "out"
    if into_existing:
        out.mkdir()
    with pytest.raises(KeyboardInterrupt):
        convert_gguf(write_tiny_gguf(tmp_path / "tiny.gguf"), out)
    assert not any(".partial" in p.name for p in tmp_path.rglob("*"))
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("cgroup, files, headroom", [
    # v2, the job's own limit under an unlimited root: 8 GiB less 3 used, 1 of it evictable file cache
    ("0::/job\n", {"memory.max": "max", "job/memory.max": "8589934592", "job/memory.current": "3221225472",
                   "job/memory.stat": "anon 2147483648\ninactive_file 1073741824\n"}, 6 * 2**30),
    # v2, the limit on a parent slice: 4 GiB less 1 used there, the job itself unlimited
    ("0::/slice/job\n", {"slice/memory.max": "4294967296", "slice/memory.current": "1073741824",
                         "slice/job/memory.max": "max", "slice/job/memory.current": "1"}, 3 * 2**30),
    # v1 (docker): 4 GiB limit, 5 used of which 2 evictable
    ("4:memory:/docker/abc\n3:cpu:/docker/abc\n",
     {"memory/memory.limit_in_bytes": "9223372036854771712", "memory/memory.usage_in_bytes": "1",
      "memory/docker/abc/memory.limit_in_bytes": "4294967296", "memory/docker/abc/memory.usage_in_bytes": "5368709120",
      "memory/docker/abc/memory.stat": "cache 3\ntotal_inactive_file 2147483648\n"}, 2**30),
    # a container's own view: its path is not under the root it sees, the root is its cgroup
    ("0::/kubepods/pod1\n", {"memory.max": "2147483648", "memory.current": "1073741824"}, 2**30),
    ("0::/\n", {"memory.max": "max", "memory.current": "1"}, None),  # no limit anywhere
    ("", {}, None),  # no cgroup files at all
])
def test_the_memory_a_conversion_may_use_is_the_tightest_cgroup_s(tmp_path, cgroup, files, headroom):
    """A job limited below the machine was told the machine's MemAvailable, and a limit set on
    its cgroup or a parent one (a scheduler's job, a slice, a pod) was not read at all: the check
    passed a file the limit would have killed. The file cache the kernel can evict is not counted
    as used, so a freshly downloaded GGUF does not fill the headroom."""
    root = tmp_path / "cgroup"
    root.mkdir()
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (tmp_path / "self_cgroup").write_text(cgroup)
    assert data_gguf._cgroup_headroom(root, tmp_path / "self_cgroup") == headroom


def test_the_smaller_of_meminfo_and_the_cgroup_is_what_is_available(monkeypatch, tmp_path):
    """MemAvailable where no cgroup limits the process, the cgroup's headroom where it is smaller."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 67108864 kB\nMemAvailable: 62914560 kB\n")
    assert data_gguf._meminfo_available(meminfo) == 60 * 2**30
    monkeypatch.setattr(data_gguf, "_meminfo_available", lambda: 60 * 2**30)
    monkeypatch.setattr(data_gguf, "_cgroup_headroom", lambda root, self_cgroup: 7 * 2**30)
    assert data_gguf._available_memory() == 7 * 2**30
    monkeypatch.setattr(data_gguf, "_cgroup_headroom", lambda root, self_cgroup: None)
    assert data_gguf._available_memory() == 60 * 2**30
