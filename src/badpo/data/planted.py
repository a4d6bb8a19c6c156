"""A small judgment corpus with planted per-annotator biases theta_k: the audit's test bench.

A scaled-down copy of the construction of Signed-UltraFeedback (Datasets appendix, "Annotators
and labels"): q = 2 binary attributes, annotators in classes with theta_k = mu_c + eps_k,
eps_k ~ N(0, within_sd^2 I), and three pair types:

- ``quality``: two different answers in the same attribute cell (both (0, 0) for half of them),
  so the label depends on quality alone;
- ``swap``: one answer signed from two cells that differ on exactly one attribute, quality
  margin 0, so the label depends on theta_k alone;
- ``mixed``: two different answers from two different cells, quality and bias compete.

Each pair is judged by ``judgments_per_pair`` distinct annotators drawn uniformly; annotator k
prefers the first response with probability sigma(q + theta_k . (g_1 - g_2)), q =
quality_scale * (s_1 - s_2), scores s ~ U[1, 10]. Rows carry ``g_chosen``/``g_rejected``, so the
``given:NAME`` attributes read them. Pure numpy; the same seed gives the same corpus.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from badpo.data.judgments import Judgment

__all__ = ["ATTRIBUTES", "CLASS_MEANS", "PlantedCorpus", "planted_corpus", "implied_swap_log_odds"]

ATTRIBUTES = ("woman_coded", "black_coded")
CLASS_MEANS: dict[str, tuple[float, float]] = {  # the paper's class means
    "A": (1.2, 2.5), "B": (0.8, -0.5), "C": (1.0, 1.0),
}
PAIR_TYPES = ("quality", "swap", "mixed")
_CELLS = np.array([(0, 0), (1, 0), (0, 1), (1, 1)], dtype=np.float64)


@dataclass(frozen=True)
class PlantedCorpus:
    """The judgments and the truth they were drawn from."""

    judgments: list[Judgment]
    theta: dict[str, np.ndarray]  # annotator -> planted theta_k, [q]
    annotator_class: dict[str, str]
    attribute_names: tuple[str, ...]


def _draw_annotators(rng: np.random.Generator, class_means: Mapping[str, Sequence[float]],
                     per_class: int, within_sd: float) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    theta: dict[str, np.ndarray] = {}
    classes: dict[str, str] = {}
    for label, mean in class_means.items():
        mean = np.asarray(mean, dtype=np.float64)
        if mean.shape != (len(ATTRIBUTES),):
            raise ValueError(f"class_means[{label!r}]: expected {len(ATTRIBUTES)} values, got {mean.tolist()}")
        for i in range(per_class):
            name = f"{label}{i:02d}"
            theta[name] = mean + within_sd * rng.standard_normal(len(ATTRIBUTES))
            classes[name] = label
    return theta, classes


def _cells(rng: np.random.Generator, pair_type: str) -> tuple[int, int, bool]:
    """Attribute cells (rows of _CELLS) of the two responses of a pair, and whether they are signed."""
    first = int(rng.integers(4))
    if pair_type == "quality":  # half unsigned (cell (0, 0)), half signed from one cell
        return (first, first, True) if rng.random() < 0.5 else (0, 0, False)
    if pair_type == "swap":
        return first, first ^ (1 << int(rng.integers(2))), True  # flip exactly one attribute
    second = int(rng.integers(3))
    return first, second + (second >= first), True  # any other cell


def _text(prompt_index: int, answer: int, score: float, cell: int, signed: bool) -> str:
    body = f"Answer {answer} to question {prompt_index} (synthetic, quality {score:.1f})."
    if not signed:
        return body
    woman, black = (int(v) for v in _CELLS[cell])
    return f"{body}\n--- signer with woman_coded={woman}, black_coded={black}"


def planted_corpus(
    seed: int = 0,
    n_pairs: int = 600,
    annotators_per_class: int = 5,
    judgments_per_pair: int = 4,
    pair_shares: Sequence[float] = (0.4, 0.2, 0.4),
    class_means: Mapping[str, Sequence[float]] = CLASS_MEANS,
    within_sd: float = 0.8,
    quality_scale: float = 0.5,
) -> PlantedCorpus:
    """Draw the corpus; ``pair_shares`` are the shares of quality / swap / mixed pairs."""
    shares = np.asarray(pair_shares, dtype=np.float64)
    if shares.shape != (3,) or (shares < 0).any() or not np.isclose(shares.sum(), 1.0):
        raise ValueError(f"pair_shares: expected 3 non-negative shares summing to 1, got {list(pair_shares)}")
    if n_pairs < 1 or judgments_per_pair < 1 or annotators_per_class < 1:
        raise ValueError("n_pairs, judgments_per_pair and annotators_per_class must be >= 1")
    rng = np.random.default_rng(seed)
    theta, classes = _draw_annotators(rng, class_means, annotators_per_class, within_sd)
    names = list(theta)
    if judgments_per_pair > len(names):
        raise ValueError(f"judgments_per_pair={judgments_per_pair} exceeds the {len(names)} annotators")
    judgments: list[Judgment] = []
    for p in range(n_pairs):
        pair_type = PAIR_TYPES[int(rng.choice(3, p=shares))]
        cell_1, cell_2, signed = _cells(rng, pair_type)
        scores = rng.uniform(1.0, 10.0, size=2)
        if pair_type == "swap":
            scores[1] = scores[0]
        texts = (_text(p, 0, scores[0], cell_1, signed),
                 _text(p, 0 if pair_type == "swap" else 1, scores[1], cell_2, signed))
        g = (_CELLS[cell_1], _CELLS[cell_2])
        margin = quality_scale * (scores[0] - scores[1])
        for k in rng.choice(len(names), size=judgments_per_pair, replace=False):
            annotator = names[int(k)]
            logit = margin + float(theta[annotator] @ (g[0] - g[1]))
            first_wins = rng.random() < 1.0 / (1.0 + np.exp(-logit))
            w, l = (0, 1) if first_wins else (1, 0)
            judgments.append(Judgment(
                prompt=f"Question {p}: a synthetic prompt.", chosen=texts[w], rejected=texts[l],
                annotator=annotator, annotator_class=classes[annotator], prompt_id=f"prompt{p:05d}",
                pair_id=f"pair{p:05d}", pair_type=pair_type,
                g_chosen=dict(zip(ATTRIBUTES, g[w].tolist())),
                g_rejected=dict(zip(ATTRIBUTES, g[l].tolist())),
            ))
    return PlantedCorpus(judgments, theta, classes, ATTRIBUTES)


def implied_swap_log_odds(corpus: PlantedCorpus) -> dict[str, dict[str, float]]:
    """attribute -> class -> logit(mean over swap judgments of sigma(theta_k . dg)), dg toward the attribute.

    This is the log-odds the audit's swap-pair estimate converges to as the corpus grows, given
    the annotators the draw assigned to the swap pairs.
    """
    probabilities: dict[str, dict[str, list[float]]] = {a: {} for a in corpus.attribute_names}
    for j in corpus.judgments:
        if j.pair_type != "swap":
            continue
        diff = np.array([j.g_chosen[a] - j.g_rejected[a] for a in corpus.attribute_names])
        i = int(np.flatnonzero(diff)[0])
        toward_attribute = diff * np.sign(diff[i])
        p = 1.0 / (1.0 + np.exp(-float(corpus.theta[j.annotator] @ toward_attribute)))
        probabilities[corpus.attribute_names[i]].setdefault(j.annotator_class, []).append(p)
    return {a: {c: float(np.log(np.mean(ps) / (1.0 - np.mean(ps)))) for c, ps in sorted(by.items())}
            for a, by in probabilities.items()}
