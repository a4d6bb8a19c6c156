"""The TRL page's scripts before and after (docs/trl.md: the swap, LD-DPO, a weight column) run as
written on the tiny model (issue 73 item 5): each half of each block is executed with the page's
names bound to the tiny world (``model``, ``ds``, ``tokenizer``, ``confidence``) and TRL's
``DPOConfig`` given the test's small settings under the page's own, and each trainer trains a step."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="TRL is the optional extra 'trl' (installed by the 'test' extra)")

from fixtures.engine import build_tokenizer  # noqa: E402
from fixtures.trl import N, config, trl_world  # noqa: E402

PAGE = Path(__file__).resolve().parents[2] / "docs" / "trl.md"


def page_scripts() -> dict[str, str]:
    """{the paragraph's bold title: its python block} for each block of the TRL page that shows a
    script before and after."""
    text = PAGE.read_text(encoding="utf-8")
    found = {}
    for match in re.finditer(r"\*\*([^*]+)\.\*\*(?:(?!\*\*).)*?```python\n(.*?)```", text, re.S):
        if match.group(2).startswith("# before:"):
            found[match.group(1)] = match.group(2)
    return found


@pytest.fixture(scope="module")
def world(tmp_path_factory, save_model_dir):
    yield from trl_world(tmp_path_factory.mktemp("trl_page"), save_model_dir)


@pytest.mark.parametrize("title", ["Swap the trainer", "LD-DPO", "A weight column"])
def test_the_pages_script_runs_before_and_after(world, tmp_path, title):
    from trl import DPOTrainer

    path, data = world
    script = page_scripts()[title]
    before, after = script.split("# after:")
    names = {"DPOConfig": lambda **given: config(tmp_path, **{**given, "output_dir": str(tmp_path)}),
             "DPOTrainer": DPOTrainer, "model": str(path / "policy"), "ds": data, "tokenizer": build_tokenizer(),
             "confidence": [0.5 + (i % 3) / 4 for i in range(N)], "args": config(tmp_path)}
    for half, source in (("before", before), ("after", "# after:" + after)):  # one namespace, as the page reads
        exec(compile(source, f"{PAGE.name}: {title}, {half}", "exec"), names)  # noqa: S102 - the page's own code
        trainer = names["trainer"]
        assert type(trainer).__name__ == ("DPOTrainer" if half == "before" else "BADPOTrainer")
        trainer.train()
        assert trainer.state.global_step == 1
    if title == "LD-DPO":  # the after script keeps the before's args: TRL's ld_alpha, now with theta
        assert trainer.method_name == "ld_dpo_ba_shared_mean" and trainer.method_params.alpha == 0.5


def test_the_page_shows_both_scripts():
    assert {"Swap the trainer", "LD-DPO", "A weight column"} <= set(page_scripts())
