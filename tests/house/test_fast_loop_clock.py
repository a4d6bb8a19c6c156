"""The fast loop's clock (tests/fixtures/fast_loop.py): it fails a run whose fast tests and collection
are over the budget, naming the slowest, says nothing for a run of a few tests, and --record-slow
lists the slowest until the rest are within the target."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fixtures import fast_loop
from fixtures.fast_loop import FastLoopClock


def clock(seconds: dict[str, float], record: bool = False, collection: float = 5.0) -> FastLoopClock:
    plugin = FastLoopClock(record)
    plugin.fast = set(seconds)
    plugin.collected_at = plugin.started + collection
    for nodeid, duration in seconds.items():
        plugin.pytest_runtest_logreport(SimpleNamespace(nodeid=nodeid, duration=duration))
    return plugin


def session(lines: list[str]) -> SimpleNamespace:
    reporter = SimpleNamespace(write_line=lambda text, **kw: lines.append(text))
    manager = SimpleNamespace(get_plugin=lambda name: reporter)
    return SimpleNamespace(exitstatus=pytest.ExitCode.OK, config=SimpleNamespace(pluginmanager=manager))


def test_a_run_over_the_budget_fails_and_names_its_slowest_fast_tests():
    lines: list[str] = []
    over = session(lines)
    clock({"a.py::slow_one": 50.0, "a.py::quick": 6.0}).pytest_sessionfinish(over)
    assert over.exitstatus == pytest.ExitCode.TESTS_FAILED
    assert "took 61 s here, over its 60 s budget" in lines[0] and lines[0].index("slow_one") < lines[0].index("quick")
    within = session([])
    clock({"a.py::slow_one": 50.0, "a.py::quick": 4.0}).pytest_sessionfinish(within)
    assert within.exitstatus == pytest.ExitCode.OK


def test_a_run_of_a_few_fast_tests_is_not_the_fast_loop():
    plugin = clock({"a.py::slow_one": 100.0})
    plugin.fast |= {f"b.py::t{i}" for i in range(5)}  # collected, not run (-k, one file)
    quiet = session([])
    plugin.pytest_sessionfinish(quiet)
    assert quiet.exitstatus == pytest.ExitCode.OK


def test_record_slow_lists_the_slowest_until_the_rest_are_within_the_target(tmp_path, monkeypatch):
    monkeypatch.setattr(fast_loop, "SLOW_LIST", tmp_path / "slow_tests.txt")
    monkeypatch.setattr(fast_loop, "RECORD_TARGET_S", 10.0)
    plugin = clock({"a.py::x": 8.0, "a.py::y": 6.0, "a.py::z": 5.0, "a.py::w": 1.0}, record=True)
    plugin.pytest_sessionfinish(session([]))
    assert fast_loop.listed_slow() == {"a.py::x", "a.py::y"}  # 20 -> 12 -> 6 <= 10


def test_a_plain_pytest_is_not_held_to_the_fast_loops_budget():
    plugin = clock({"a.py::slow_one": 100.0})
    plugin.fast_loop = False
    full = session([])
    plugin.pytest_sessionfinish(full)
    assert full.exitstatus == pytest.ExitCode.OK
