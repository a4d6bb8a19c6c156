"""Labels in badpo's plots are data: an annotator id with ``$...$`` is drawn as the text it is, where
matplotlib alone reads it as a formula (and a malformed one fails the drawing)."""

from __future__ import annotations

import pytest

from badpo.auditing.forest import LABEL_CHARS, labels_as_text, plot_label


def draw(path, label: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(2, 1))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.set_yticks([0], [label])
    figure.savefig(path)


@pytest.mark.parametrize("label", [r"ann $\bogus$", "paid $5 then $6"])
def test_a_label_is_text_not_mathtext(tmp_path, label):
    labels_as_text(draw)(tmp_path / "ok.png", label)
    assert (tmp_path / "ok.png").stat().st_size > 0
    if "bogus" in label:  # the same drawing without the guard fails on the id
        with pytest.raises(ValueError):
            draw(tmp_path / "bad.png", label)


def test_a_long_label_is_cut_in_its_middle_saying_how_long_it_is():
    assert plot_label("annotator-7") == "annotator-7"
    assert plot_label("x" * LABEL_CHARS) == "x" * LABEL_CHARS
    long = "a" * 90 + "b" * 65_446 + "zz-42"
    assert plot_label(long) == "a" * 80 + "..." + "b" * 25 + "zz-42" + " (65,541 chars)"
    runs = [f"ba_dpo_shared_mean [runs/sweep/seed_{s}/ba_dpo_shared_mean/readouts.json]" for s in (42, 43)]
    assert [plot_label(r) for r in runs] == runs  # compare's labels, told apart by their paths, stay apart


def test_a_64_kb_annotator_id_costs_the_forest_plot_no_more_than_a_short_one(tmp_path, monkeypatch):
    """matplotlib lays out every glyph of a tick label: with 64 KB ids one audit --report took 5
    minutes (issue 76); the plot draws the cut label, the CSV and JSON keep the whole id."""
    from badpo.auditing.forest import plot_forest

    row = {"class": "all", "low": -1.0, "high": 1.0, "estimate": 0.0, "outlying": False, "divergent": None,
           "marginal_estimate": None, "learned_theta": None}
    ids = [f"{'q' * 65_536}-{i}" for i in range(20)]
    report = {"name": "length", "annotators": [{**row, "annotator": i, "estimate": k / 10} for k, i in enumerate(ids)],
              "pool_level": {"estimate": 0.0}, "pooled_marginal": {"cross": 0}, "classes": {},
              "counts": {"outlying": 0, "divergent": 0, "unidentified": 0}}
    drawn = []
    import matplotlib.axes

    real = matplotlib.axes.Axes.set_yticklabels

    def spy(self, labels, *args, **kwargs):
        drawn.extend(labels)
        return real(self, labels, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "set_yticklabels", spy)
    plot_forest(report, tmp_path / "forest.png")
    assert len(drawn) == 20 and all(len(label) <= LABEL_CHARS + 20 for label in drawn)
    assert (tmp_path / "forest.png").stat().st_size > 0
