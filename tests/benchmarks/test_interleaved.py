"""benchmarks/bench_vs_trl.py's rotating rounds, shared by the trainer bench and the settings bench,
driven with stand-in workers (no process, no model)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from fixtures.benchmarks import BENCHMARKS, load_benchmark


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))  # bench_vs_trl imports its worker module by name
    try:
        yield load_benchmark("bench_vs_trl")
    finally:
        sys.path.remove(str(BENCHMARKS))


class _Worker:
    """Records what it was built with and asked; blocks report the steps they were asked for."""

    def __init__(self, made, config, settings, env):
        self.config, self.settings, self.closed = config, settings, False
        self.ready = {"config": config}
        made.append(self)

    def ask(self, do, **options):
        if do == "memory":
            return {"peak_rss_mib": len(self.settings["badpo_set"])}
        return {"seconds": float(options["steps"]), "judgments": 0}

    def close(self):
        self.closed = True


@pytest.fixture
def made(bench, monkeypatch):
    """The stand-in workers built during one test, in order."""
    workers = []
    monkeypatch.setattr(bench, "Worker", lambda *spec: _Worker(workers, *spec))
    return workers


def test_each_setup_gets_its_own_settings_and_every_place_in_the_order(bench, made):
    """Three setups of one configuration, three rounds: the order rotates (a b c, b c a, c a b),
    each worker is built with its own settings, and warm-up, memory and ready come back per label."""
    setups = {name: ("badpo/pair_grouped", {"badpo_set": ["x"] * n}, {}) for n, name in enumerate("abc", 1)}
    order = []
    args = SimpleNamespace(warmup=2, rounds=3)
    ready, memory = bench._interleaved(args, setups, lambda label, worker: order.append(label))
    assert order == list("abcbcacab")
    assert [w.settings["badpo_set"] for w in made] == [["x"], ["x", "x"], ["x", "x", "x"]]
    assert memory == {"a": {"peak_rss_mib": 1}, "b": {"peak_rss_mib": 2}, "c": {"peak_rss_mib": 3}}
    assert ready["b"] == {"config": "badpo/pair_grouped", "warmup_s": 2.0}
    assert all(w.closed for w in made)


def test_workers_are_closed_when_a_block_fails(bench, made):
    """A worker that dies mid-round leaves no process behind: every worker built is closed."""

    def failing(label, worker):
        raise RuntimeError(f"worker {label} died")

    setups = {name: ("badpo/per_judgment", {"badpo_set": []}, {}) for name in "ab"}
    with pytest.raises(RuntimeError, match="worker a died"):
        bench._interleaved(SimpleNamespace(warmup=1, rounds=2), setups, failing)
    assert len(made) == 2 and all(w.closed for w in made)
