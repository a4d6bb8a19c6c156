"""What a user installs is the library alone (issue 71 item 3): the wheel built from this checkout
holds the package ``badpo`` and its data files, and none of the paper's experiments, the research
record, the configs, the records under ``results/`` or the tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _wheel_files(tmp_path: Path) -> list[str]:
    """Built from a copy of the checkout's code beside the library (experiments/, configs/, benchmarks/,
    tests/ with their packages), so that only the packaging's own rules keep them out; results/ and
    docs/ are left behind for speed (no package in them), and a build/ folder an earlier build left in
    the checkout would add its stale modules."""
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("*.egg-info", "__pycache__", "build", "runs")
    for folder in ("src", "experiments", "configs", "benchmarks", "tests"):
        shutil.copytree(ROOT / folder, source / folder, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q", "-w", str(tmp_path)],
                   check=True, capture_output=True, text=True)
    (wheel,) = tmp_path.glob("badpo-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_wheel_holds_the_library_and_nothing_of_the_experiments(tmp_path):
    files = _wheel_files(tmp_path)
    tops = {name.split("/")[0] for name in files}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"badpo"}, sorted(tops)
    assert not [f for f in files if f.startswith(("badpo/paper/", "experiments/"))]
    # the library's own data: the demo's experiment and the name pool the names readouts code
    assert {"badpo/experiment/tiny.yaml", "badpo/core/name_pool.tsv"} <= set(files)
    assert "badpo/cli.py" in files and "badpo/experiment/runner.py" in files
    packaged = {f for f in files if f.startswith("badpo/") and f.endswith(".py")}
    shipped = {p.relative_to(ROOT / "src").as_posix() for p in (ROOT / "src" / "badpo").rglob("*.py")}
    assert packaged == shipped  # every module of src/badpo, and nothing else
