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
    """Built from a copy of what the build reads (a build/ folder left in the checkout by an earlier
    build would otherwise add its stale modules)."""
    source = tmp_path / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
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
