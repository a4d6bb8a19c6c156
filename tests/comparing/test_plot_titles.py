"""compare.png's title says what its points are: "95% intervals" only when every rate has one (a
run read on 8 prompts has none, drawn hollow), so the title never promises intervals the plot lacks."""

from __future__ import annotations

from badpo.comparing.plots import _interval_phrase


def comparison(*lows) -> dict:
    runs = [{"generated": {"signed": {"rate": {"value": 0.5, "low": low, "high": None if low is None else 0.6}}}}
            for low in lows]
    return {"level": 0.95, "readouts": [{"key": "generated"}], "generated": {"signed": {}}, "runs": runs}


def test_the_title_promises_intervals_only_where_there_are_some():
    assert _interval_phrase(comparison(0.4, 0.3)) == "with 95% intervals over prompts"
    assert "where there are enough (hollow: too few for one)" in _interval_phrase(comparison(0.4, None))
    assert _interval_phrase(comparison(None, None)) == "without intervals (too few prompts for one)"
