"""Fixtures shared by every test file, and the ``slow`` marking.

A test is marked ``slow`` here, never by hand, when it is listed in ``tests/slow_tests.txt`` (the
fast tests measured slowest, :mod:`fixtures.fast_loop`) or when it requests (directly or through
another fixture) one of the model builders of ``MODEL_BUILDERS``: a test that trains, loads or runs a tiny
model first builds it with one of them. ``pytest -m "not slow"`` is then the fast loop, and a plain
``pytest`` still runs everything. The builders are fixtures so that the marking follows from what
a test uses: request them, do not import them (tests/house/test_test_modules.py checks that).
"""

from __future__ import annotations

import os

import pytest

from badpo.cli import main
from fixtures.fast_loop import FastLoopClock, listed_slow

# One thread for torch and BLAS unless the caller asks for more (set before any test imports torch).
# Every engine run already trains on one (runtime.num_threads: 1, which stays set for the rest of the
# session), so the other tests no longer run on one or two threads depending on which test ran first;
# and on a shared two-core machine tiny matrices run faster on one thread than on two.
os.environ.setdefault("OMP_NUM_THREADS", "1")

MODEL_BUILDERS = frozenset({
    "build_model", "save_model_dir", "build_judge",  # fixtures.engine
    "build_tiny_model", "build_tiny_world", "build_tiny_multipref",  # badpo.corpora's tiny worlds
    "engine_backend",  # an experiment's real backend: corpus (tiny world), training, readouts
    "cli_training",  # badpo's command line, for a test that builds or trains a model through it
    "write_tiny_gguf",  # fixtures.gguf: a tiny llama GGUF, loaded and converted by transformers
    "chromium",  # fixtures.browser: a real headless browser (not a model, but as slow to start)
})


def pytest_addoption(parser) -> None:
    parser.addoption("--record-slow", action="store_true",
                     help="after a fast-loop run, list its slowest tests in tests/slow_tests.txt (fixtures.fast_loop)")


def pytest_configure(config) -> None:
    fast_loop = (config.getoption("markexpr") or "").strip() == "not slow"
    config.pluginmanager.register(FastLoopClock(config.getoption("--record-slow"), fast_loop), "badpo_fast_loop_clock")


@pytest.hookimpl(tryfirst=True)  # before the fast loop's clock reads the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    measured = listed_slow()
    for item in items:
        if MODEL_BUILDERS.intersection(getattr(item, "fixturenames", ())) or item.nodeid in measured:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def build_model():
    """``fixtures.engine.build_model``: a 2-layer causal LM over the engine tests' word vocabulary."""
    from fixtures.engine import build_model

    return build_model


@pytest.fixture(scope="session")
def save_model_dir():
    """``fixtures.engine.save_model_dir``: that model and its tokenizer saved in HF format."""
    from fixtures.engine import save_model_dir

    return save_model_dir


@pytest.fixture(scope="session")
def build_judge():
    """``fixtures.engine.build_judge``: a 1-layer GPT-2 sequence classifier (a judge, a reward model)."""
    from fixtures.engine import build_judge

    return build_judge


@pytest.fixture(scope="session")
def build_tiny_model():
    """``badpo.corpora.tiny.build_model``: the tiny world's GPT-2."""
    from badpo.corpora.tiny import build_model

    return build_model


@pytest.fixture(scope="session")
def build_tiny_world():
    """``badpo.corpora.tiny.build_tiny_world``: the tiny signed world, its model included."""
    from badpo.corpora.tiny import build_tiny_world

    return build_tiny_world


@pytest.fixture(scope="session")
def build_tiny_multipref():
    """``badpo.corpora.tiny_multipref.build_tiny_multipref``: the tiny MultiPref world, its model included."""
    from badpo.corpora.tiny_multipref import build_tiny_multipref

    return build_tiny_multipref


@pytest.fixture(scope="session")
def engine_backend():
    """``badpo.experiment.backend.engine_backend``, for a test that runs it. A test that only plans
    an experiment with it (resolves its settings) imports the function and stays fast."""
    from badpo.experiment.backend import engine_backend

    return engine_backend


@pytest.fixture
def cli_error(capsys):
    """Run ``badpo ARGV`` (or another ``program`` through badpo's front door: ``python -m
    experiments``) expecting a user error: exit status 2 and exactly one line on stderr (warnings
    aside), no traceback. Returns that line."""

    def run(argv: list[str], program=main) -> str:
        code = program(argv)
        err = capsys.readouterr().err
        assert code == 2, err
        lines = [line for line in err.splitlines() if not line.startswith("badpo: warning:")]
        assert len(lines) == 1 and "Traceback" not in err, err
        return lines[0]

    return run


@pytest.fixture(scope="session")
def cli_training():
    """``badpo.cli.main``, requested (instead of imported) by a test whose command builds, trains or
    runs a model (``badpo experiment``, ``badpo build``, ``badpo train``), so that it is marked slow."""
    return main


@pytest.fixture(scope="session")
def write_tiny_gguf():
    """``fixtures.gguf.write_tiny_gguf``: a tiny llama checkpoint as a GGUF file."""
    from fixtures.gguf import write_tiny_gguf

    return write_tiny_gguf


@pytest.fixture(scope="session")
def chromium():
    """``fixtures.browser``: a headless chromium's path (installed by apt where absent and allowed;
    the test is skipped with the reason where not)."""
    from fixtures.browser import find_or_install_chromium

    return find_or_install_chromium()
