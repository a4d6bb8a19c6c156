"""The docs' screenshots (issue 74 item 5): docs/site_hooks/screenshots.py shoots pages that exist,
and the committed PNGs are the pages it names, at the size it shoots (a renamed page or a deleted
shot fails here; refresh them with ``python docs/site_hooks/screenshots.py``)."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("screenshots", ROOT / "docs" / "site_hooks" / "screenshots.py")
screenshots = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(screenshots)


def _png_size(path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def test_every_shot_is_a_page_of_the_docs_and_a_committed_png_of_its_size():
    for png, page in screenshots.PAGES.items():
        assert (ROOT / "docs" / page.replace(".html", ".md")).is_file(), page
        assert _png_size(ROOT / "docs" / "examples" / png) == (screenshots.WIDTH, screenshots.HEIGHT), png
