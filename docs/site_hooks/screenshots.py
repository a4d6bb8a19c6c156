"""Refresh the docs' screenshots (issue 74 item 5), not a build hook: the site is built with
``mkdocs build --strict`` into a temporary folder and its home page and one results page are shot
in headless Chromium at a desktop width, so what a reader sees is what the committed PNGs show.

    python docs/site_hooks/screenshots.py            # writes docs/examples/site-*.png
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = {"site-home.png": "index.html", "site-demo-results.png": "demo.html"}  # PNG -> the built page
WIDTH, HEIGHT = 1280, 1000


def browser() -> str:
    """The Chromium on this machine; a missing one is one line, not a traceback."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit("screenshots: no chromium, chromium-browser or google-chrome on PATH")


def shoot(chrome: str, page: Path, png: Path) -> None:
    """One page as a PNG of the first screen a reader sees."""
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chrome, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}",
                        f"--screenshot={png}", page.as_uri()], check=True, capture_output=True, timeout=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "examples", help="where the PNGs go")
    args = parser.parse_args(argv)
    chrome = browser()
    with tempfile.TemporaryDirectory() as site:
        subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", site],
                       cwd=ROOT, check=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
        for png, page in PAGES.items():
            shoot(chrome, Path(site) / page, args.out / png)
            print(f"{args.out / png}: {page} at {WIDTH}x{HEIGHT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
