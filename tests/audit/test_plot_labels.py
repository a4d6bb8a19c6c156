"""Labels in badpo's plots are data: an annotator id with ``$...$`` is drawn as the text it is, where
matplotlib alone reads it as a formula (and a malformed one fails the drawing)."""

from __future__ import annotations

import pytest

from badpo.auditing.forest import labels_as_text


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
