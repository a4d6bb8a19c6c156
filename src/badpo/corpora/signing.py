"""The Signed-UltraFeedback protocol (Datasets appendix, "The names corpus"), as pure functions.

Shared by the built-in tiny world (:mod:`badpo.corpora.tiny`) and the real Signed-UltraFeedback
builder: both hand :func:`sign_corpus` a list of :class:`BasePair` (two real responses to one
prompt with their quality scores, response 1 the originally chosen one) and a
:class:`SigningConfig`, and get back the planted annotators, the signed pairs, the judgments
split by prompt id, and the SFT rows. The protocol:

- **Pair types** (drawn per pair, 40/20/40 by default). *quality*: the two real responses, half
  of them unsigned and half both signed with one name; *swap*: one of the two responses
  (either, at random) duplicated and signed with two names from cells that differ on exactly
  one attribute, so the true margin is q = 0; *mixed*: the two real responses signed from two
  different cells. A cell is drawn uniformly from the four, a first name uniformly within its
  cell, and one surname (uniform over ``SigningConfig.surnames``) is shared by both sides.
- **Annotators**: ``annotators_per_class`` per class, ``theta_k = mu_c + sigma * N(0, I)``.
- **Labels**: each judgment draws an annotator uniformly (with replacement) and prefers
  response 1 with probability ``sigmoid(q + theta_k . (g_1 - g_2))``, ``q = kappa (s_1 - s_2)``,
  where ``g = (woman_coded, black_coded)`` of the signing first name.
- **Split**: ``heldout_share`` of the distinct prompt ids (rounded) go to the held-out side.
- **SFT rows**: for each training pair the majority-chosen response (a tie goes to response 1,
  the originally chosen one), its signature stripped and replaced by a name from a uniformly
  drawn cell, so the reference starts balanced on both attributes.

Randomness: one ``numpy.random.Generator`` per part of the protocol, seeded ``[seed, its stream
number]``, so the same inputs and config give the same output on every run, and changing one
part's parameters (say the number of judgments) leaves the draws of the earlier parts alone.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from badpo.auditing.estimates import BiasIdentifiabilityWarning, audit
from badpo.core.attributes import resolve_attributes
from badpo.core.config import ConfigError
from badpo.core.constraints import AT_LEAST_ONE, FINITE_NON_NEGATIVE, FRACTION, NON_NEGATIVE, Range, check_fields
from badpo.core.judgments import Judgment
from badpo.core.names import (
    CELL_NAMES,
    CELLS,
    NAME_ATTRIBUTES,
    NAME_POOL,
    SIGNATURE_RE,
    read_signature,
    sign,
    strip_signature,
)

__all__ = [
    "PAIR_TYPES", "SURNAMES", "BasePair", "PlantedAnnotator", "SignedPair",
    "SignedCorpus", "SigningConfig", "draw_annotators", "sign_pairs", "draw_judgments",
    "heldout_prompt_ids", "sft_rows", "sign_corpus", "implied_log_odds", "gate_statistics",
    "format_gate", "planted_to_dict",
]

PAIR_TYPES: tuple[str, str, str] = ("quality", "swap", "mixed")
# Common English occupational / place surnames, chosen to carry no gender or race coding.
SURNAMES: tuple[str, ...] = (
    "Miller", "Baker", "Carter", "Parker", "Hayes", "Morgan", "Reed", "Bell", "Cooper",
    "Foster", "Gray", "Hughes", "Hunt", "Murphy", "Price", "Russell", "Sanders", "Fisher",
    "Turner", "Wood", "Porter", "Ellis", "Webb", "Spencer",
)
# The (woman_coded, black_coded) values of each cell, read from the pool itself.
CELL_VALUES: dict[str, tuple[int, int]] = {cell: NAME_POOL[CELLS[cell][0]] for cell in CELL_NAMES}
_CELL_BY_VALUES = {values: cell for cell, values in CELL_VALUES.items()}
_STREAMS = {"annotators": 1, "pair_types": 2, "signing": 3, "labels": 4, "split": 5, "sft": 6}


def _default_class_means() -> dict[str, list[float]]:
    return {"A": [1.2, 2.5], "B": [0.8, -0.5], "C": [1.0, 1.0]}


@dataclass(frozen=True)
class SigningConfig:
    """Every parameter of the protocol; the defaults are the paper's configuration. It is the
    ``signing`` section of every signed world's config, so its messages name ``signing.<field>``."""

    constraints: ClassVar[Mapping] = {
        **dict.fromkeys(("quality_share", "swap_share", "mixed_share", "unsigned_quality_share"), Range(0, 1)),
        **dict.fromkeys(("annotators_per_class", "judgments_per_pair"), AT_LEAST_ONE),
        "sigma": FINITE_NON_NEGATIVE, "heldout_share": FRACTION, "seed": NON_NEGATIVE}

    quality_share: float = 0.4  # share of quality pairs (two real responses, one or no name)
    swap_share: float = 0.2  # share of swap pairs (one response under two names, q = 0)
    mixed_share: float = 0.4  # share of mixed pairs (two real responses, two different cells)
    unsigned_quality_share: float = 0.5  # share of quality pairs left unsigned
    class_means: dict[str, list[float]] = field(default_factory=_default_class_means)  # mu_c
    annotators_per_class: int = 20  # annotators in each class
    sigma: float = 0.8  # within-class standard deviation of theta_k (each coordinate)
    judgments_per_pair: int = 4  # judgments per pair, each by a uniformly drawn annotator
    kappa: float = 0.5  # quality scale: q = kappa * (score_1 - score_2)
    heldout_share: float = 0.1  # share of prompt ids held out (judgments and SFT exclude them)
    surnames: list[str] = field(default_factory=lambda: list(SURNAMES))  # neutral surname pool
    seed: int = 0  # data seed: every draw of the protocol derives from it

    def __post_init__(self) -> None:
        check_fields(self, "signing.")  # the prefix an enclosing config's walk gives this section too
        shares = (self.quality_share, self.swap_share, self.mixed_share)
        if not math.isclose(sum(shares), 1.0, abs_tol=1e-9):
            raise ConfigError(f"signing: quality_share + swap_share + mixed_share must be 1, got {sum(shares)}")
        if not self.class_means:
            raise ConfigError("signing.class_means: give at least one class")
        for label, mean in self.class_means.items():
            if not label or len(mean) != len(NAME_ATTRIBUTES) or not all(map(math.isfinite, mean)):
                raise ConfigError(f"signing.class_means.{label}: expected a non-empty class name and "
                                  f"{len(NAME_ATTRIBUTES)} finite numbers {NAME_ATTRIBUTES}, got {mean}")
        if not math.isfinite(self.kappa):  # no scalar "finite" constraint exists (FINITE reads a list)
            raise ConfigError(f"signing.kappa: must be finite, got {self.kappa}")
        if not self.surnames or len(set(self.surnames)) != len(self.surnames):
            raise ConfigError("signing.surnames: give at least one surname, no duplicates")
        for surname in self.surnames:
            if not SIGNATURE_RE.fullmatch(f"--- Emily {surname}"):
                raise ConfigError(f"signing.surnames: {surname!r} is not a name (letters, "
                                  "optionally joined by ' or -)")

    def rng(self, part: str) -> np.random.Generator:
        """The random stream of one part of the protocol (see the module docstring)."""
        return np.random.default_rng([self.seed, _STREAMS[part]])


@dataclass(frozen=True)
class BasePair:
    """Two real responses to one prompt; response 1 is the originally chosen one."""

    prompt_id: str
    prompt: str
    response_1: str
    response_2: str
    score_1: float  # quality score of response 1 (GPT-4 score in [1, 10] on UltraFeedback)
    score_2: float


@dataclass(frozen=True)
class PlantedAnnotator:
    annotator: str
    annotator_class: str
    theta: tuple[float, ...]  # [q], in NAME_ATTRIBUTES order


@dataclass(frozen=True)
class SignedPair:
    """A pair as the annotators see it; ``g_1``/``g_2`` are read back from the signatures."""

    pair_id: str
    prompt_id: str
    prompt: str
    pair_type: str  # quality / swap / mixed
    response_1: str
    response_2: str
    g_1: tuple[float, float]
    g_2: tuple[float, float]
    quality_margin: float  # q = kappa (s_1 - s_2); 0 on swap pairs


@dataclass(frozen=True)
class SignedCorpus:
    annotators: tuple[PlantedAnnotator, ...]
    pairs: tuple[SignedPair, ...]
    heldout_prompt_ids: frozenset[str]
    train: tuple[Judgment, ...]  # judgments on training prompts, in pair order
    heldout: tuple[Judgment, ...]  # judgments on held-out prompts
    sft: tuple[dict[str, str], ...]  # {"prompt", "response"} per training pair


def _signature_values(response: str) -> tuple[float, float]:
    signature = read_signature(response)
    if signature is None:
        return (0.0, 0.0)
    woman, black = NAME_POOL[signature[0]]
    return (float(woman), float(black))


def _check_base_pairs(pairs: Sequence[BasePair]) -> None:
    """A clear error naming the row for input the protocol cannot sign."""
    if not pairs:
        raise ValueError("sign_corpus: no base pairs")
    for i, pair in enumerate(pairs):
        where = f"base pair {i} (prompt_id {pair.prompt_id!r})"
        for name in ("prompt_id", "prompt", "response_1", "response_2"):
            value = getattr(pair, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{where}: {name} must be a non-empty string, got {value!r}")
        for name in ("score_1", "score_2"):
            if not math.isfinite(getattr(pair, name)):
                raise ValueError(f"{where}: {name} must be finite, got {getattr(pair, name)}")
        if pair.response_1.rstrip() == pair.response_2.rstrip():
            raise ValueError(f"{where}: response_1 and response_2 are identical; a quality pair "
                             "would compare a response with itself")
        for name in ("response_1", "response_2"):
            if read_signature(getattr(pair, name)) is not None:
                raise ValueError(f"{where}: {name} already ends with a signature line "
                                 f"{read_signature(getattr(pair, name))}")


def draw_annotators(config: SigningConfig) -> tuple[PlantedAnnotator, ...]:
    """theta_k = mu_c + sigma * eps_k, ids ``<class><index:02d>`` in class order."""
    rng = config.rng("annotators")
    annotators = []
    for label, mean in config.class_means.items():
        for i in range(config.annotators_per_class):
            theta = np.asarray(mean, dtype=np.float64) + config.sigma * rng.standard_normal(len(mean))
            annotators.append(PlantedAnnotator(f"{label}{i:02d}", label, tuple(theta.tolist())))
    return tuple(annotators)


def _draw_name(rng: np.random.Generator, cell: str) -> str:
    names = CELLS[cell]
    return names[int(rng.integers(len(names)))]


def _flip(cell: str, attribute: int) -> str:
    values = list(CELL_VALUES[cell])
    values[attribute] = 1 - values[attribute]
    return _CELL_BY_VALUES[tuple(values)]


def _sign_one(base: BasePair, pair_type: str, signed: bool, rng: np.random.Generator,
              surnames: Sequence[str]) -> tuple[str, str, float, float]:
    """(response_1, response_2, score_1, score_2) of one signed pair."""
    surname = surnames[int(rng.integers(len(surnames)))]
    if pair_type == "quality":
        if not signed:
            return base.response_1, base.response_2, base.score_1, base.score_2
        first = _draw_name(rng, CELL_NAMES[int(rng.integers(4))])
        return (sign(base.response_1, first, surname), sign(base.response_2, first, surname),
                base.score_1, base.score_2)
    if pair_type == "swap":
        keep_first = rng.integers(2) == 0
        body, score = (base.response_1, base.score_1) if keep_first else (base.response_2, base.score_2)
        cell_1 = CELL_NAMES[int(rng.integers(4))]
        cell_2 = _flip(cell_1, int(rng.integers(len(NAME_ATTRIBUTES))))
        return (sign(body, _draw_name(rng, cell_1), surname),
                sign(body, _draw_name(rng, cell_2), surname), score, score)
    index_1 = int(rng.integers(4))
    index_2 = int(rng.integers(3))
    index_2 += index_2 >= index_1  # uniform over the three other cells
    return (sign(base.response_1, _draw_name(rng, CELL_NAMES[index_1]), surname),
            sign(base.response_2, _draw_name(rng, CELL_NAMES[index_2]), surname),
            base.score_1, base.score_2)


def sign_pairs(base_pairs: Sequence[BasePair], config: SigningConfig) -> tuple[SignedPair, ...]:
    """Draw each pair's type, then sign it; pair ids are ``pair<index:05d>`` in input order."""
    _check_base_pairs(base_pairs)
    n = len(base_pairs)
    type_rng = config.rng("pair_types")
    shares = np.array([config.quality_share, config.swap_share, config.mixed_share])
    types = type_rng.choice(len(PAIR_TYPES), size=n, p=shares / shares.sum())
    signed = type_rng.random(n) >= config.unsigned_quality_share
    rng = config.rng("signing")
    pairs = []
    for i, base in enumerate(base_pairs):
        pair_type = PAIR_TYPES[int(types[i])]
        r1, r2, s1, s2 = _sign_one(base, pair_type, bool(signed[i]), rng, config.surnames)
        pairs.append(SignedPair(
            pair_id=f"pair{i:05d}", prompt_id=base.prompt_id, prompt=base.prompt,
            pair_type=pair_type, response_1=r1, response_2=r2,
            g_1=_signature_values(r1), g_2=_signature_values(r2),
            quality_margin=config.kappa * (s1 - s2)))
    return tuple(pairs)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def draw_judgments(pairs: Sequence[SignedPair], annotators: Sequence[PlantedAnnotator],
                   config: SigningConfig) -> tuple[Judgment, ...]:
    """``judgments_per_pair`` labels per pair, pair by pair: response 1 wins with probability
    sigmoid(q + theta_k . (g_1 - g_2)), annotator k uniform over all annotators."""
    rng = config.rng("labels")
    shape = (len(pairs), config.judgments_per_pair)
    who = rng.integers(len(annotators), size=shape)
    draws = rng.random(shape)
    theta = np.array([a.theta for a in annotators])  # [m, q]
    g_diff = np.array([np.subtract(p.g_1, p.g_2) for p in pairs])  # [n, q]
    margin = np.array([p.quality_margin for p in pairs])  # [n]
    logits = margin[:, None] + np.einsum("njq,nq->nj", theta[who], g_diff)
    first_wins = draws < _sigmoid(logits)
    judgments = []
    for i, pair in enumerate(pairs):
        for j in range(config.judgments_per_pair):
            annotator = annotators[int(who[i, j])]
            chosen, rejected = ((pair.response_1, pair.response_2) if first_wins[i, j]
                                else (pair.response_2, pair.response_1))
            judgments.append(Judgment(
                prompt=pair.prompt, chosen=chosen, rejected=rejected,
                annotator=annotator.annotator, annotator_class=annotator.annotator_class,
                prompt_id=pair.prompt_id, pair_id=pair.pair_id, pair_type=pair.pair_type))
    return tuple(judgments)


def heldout_prompt_ids(prompt_ids: Sequence[str], config: SigningConfig) -> frozenset[str]:
    """round(heldout_share * distinct ids) prompt ids, drawn without replacement."""
    distinct = sorted(set(prompt_ids))
    count = int(math.floor(config.heldout_share * len(distinct) + 0.5))
    order = config.rng("split").permutation(len(distinct))
    return frozenset(distinct[int(i)] for i in order[:count])


def sft_rows(pairs: Sequence[SignedPair], judgments: Sequence[Judgment],
             config: SigningConfig) -> tuple[dict[str, str], ...]:
    """The majority-chosen response of each given pair, re-signed from a uniform cell."""
    first_wins: dict[str, int] = {}
    totals: dict[str, int] = {}
    responses_1 = {p.pair_id: p.response_1 for p in pairs}
    for j in judgments:
        totals[j.pair_id] = totals.get(j.pair_id, 0) + 1
        first_wins[j.pair_id] = first_wins.get(j.pair_id, 0) + (j.chosen == responses_1[j.pair_id])
    rng = config.rng("sft")
    rows = []
    for pair in pairs:
        if pair.pair_id not in totals:
            raise ValueError(f"sft_rows: pair {pair.pair_id!r} has no judgment")
        majority_first = 2 * first_wins[pair.pair_id] >= totals[pair.pair_id]
        body = strip_signature(pair.response_1 if majority_first else pair.response_2)
        first = _draw_name(rng, CELL_NAMES[int(rng.integers(4))])
        surname = config.surnames[int(rng.integers(len(config.surnames)))]
        rows.append({"prompt": pair.prompt, "response": sign(body, first, surname)})
    return tuple(rows)


def sign_corpus(base_pairs: Sequence[BasePair], config: SigningConfig) -> SignedCorpus:
    """The whole protocol: annotators, signed pairs, judgments, split, SFT rows."""
    annotators = draw_annotators(config)
    pairs = sign_pairs(base_pairs, config)
    judgments = draw_judgments(pairs, annotators, config)
    heldout = heldout_prompt_ids([p.prompt_id for p in pairs], config)
    train_pairs = [p for p in pairs if p.prompt_id not in heldout]
    return SignedCorpus(
        annotators=annotators, pairs=pairs, heldout_prompt_ids=heldout,
        train=tuple(j for j in judgments if j.prompt_id not in heldout),
        heldout=tuple(j for j in judgments if j.prompt_id in heldout),
        sft=sft_rows(train_pairs, [j for j in judgments if j.prompt_id not in heldout], config))


# ------------------------------------------------------------------ what the planted theta imply
def _logit_of_mean(probabilities: Sequence[float]) -> float | None:
    mean = float(np.mean(probabilities))
    return math.log(mean / (1.0 - mean)) if 0.0 < mean < 1.0 else None


def implied_log_odds(corpus: SignedCorpus, judgments: Sequence[Judgment],
                     pair_types: Sequence[str] = ("swap",)) -> dict[str, dict[str, float | None]]:
    """attribute -> slice ("all", then each class) -> logit(mean p), p the planted probability
    that the attribute-carrying side wins each cross-group judgment of the given pair types.

    p = sigmoid(+-(q + theta_k . (g_1 - g_2))), the sign choosing the carrying side; on swap
    pairs q = 0 and g_1 - g_2 = +-e_attribute, so p = sigmoid(theta_k[attribute]). This is
    what the audit's offline log-odds of the same slice estimate, given who judged which pair.
    """
    theta = {a.annotator: np.asarray(a.theta) for a in corpus.annotators}
    pairs = {p.pair_id: p for p in corpus.pairs}
    probabilities: dict[str, dict[str, list[float]]] = {name: {"all": []} for name in NAME_ATTRIBUTES}
    for j in judgments:
        pair = pairs[j.pair_id]
        if pair.pair_type not in pair_types:
            continue
        diff = np.subtract(pair.g_1, pair.g_2)
        first_wins = float(_sigmoid(pair.quality_margin + theta[j.annotator] @ diff))
        for i, name in enumerate(NAME_ATTRIBUTES):
            if diff[i] != 0:
                p = first_wins if diff[i] > 0 else 1.0 - first_wins
                probabilities[name]["all"].append(p)
                probabilities[name].setdefault(j.annotator_class, []).append(p)
    return {name: {key: _logit_of_mean(by[key]) if by[key] else None
                   for key in ["all", *sorted(k for k in by if k != "all")]}
            for name, by in probabilities.items()}


def gate_statistics(corpus: SignedCorpus, judgments: Sequence[Judgment] | None = None) -> dict:
    """The paper's gate, read from the labels (the training judgments by default) with
    :func:`badpo.auditing.estimates.audit`: cross-group shares, offline log-odds on swap pairs and on
    all cross-group rows, overall and by class, each beside the value the planted theta imply."""
    judgments = list(corpus.train if judgments is None else judgments)
    with warnings.catch_warnings():  # recorded in the result's "warnings" instead
        warnings.simplefilter("ignore", BiasIdentifiabilityWarning)
        result = audit(judgments, resolve_attributes(["names"]))
    implied = {"swap": implied_log_odds(corpus, judgments, ("swap",)),
               "cross_group": implied_log_odds(corpus, judgments, PAIR_TYPES)}

    def table(counts, implied_by_slice) -> dict:
        out = {}
        for key, value in counts.items():
            row = value.to_dict()
            out[key] = {"cross": row["cross"], "wins": row["wins"], "log_odds": row["log_odds"],
                        "se": row["se"], "implied": implied_by_slice.get(key)}
        return out

    coordinates = {c.name: c for c in result.coordinates}
    pair_counts = {t: sum(p.pair_type == t for p in corpus.pairs) for t in PAIR_TYPES}
    pair_counts["quality_unsigned"] = sum(p.pair_type == "quality" and read_signature(p.response_1)
                                          is None for p in corpus.pairs)
    return {
        "judgments": len(judgments),
        "pairs": pair_counts,
        "share_cross": {**{n: coordinates[n].overall.share_cross for n in NAME_ATTRIBUTES},
                        "any": result.cross_any / result.n_judgments},
        "swap": {n: table({"all": coordinates[n].by_pair_type.get("swap"),
                           **coordinates[n].by_pair_type_class.get("swap", {})},
                          implied["swap"][n]) for n in NAME_ATTRIBUTES
                 if "swap" in coordinates[n].by_pair_type},
        "cross_group": {n: table({"all": coordinates[n].overall, **coordinates[n].by_class},
                                 implied["cross_group"][n]) for n in NAME_ATTRIBUTES},
        "warnings": list(result.warnings),
    }


def format_gate(gate: Mapping) -> str:
    """The gate as a few lines for the terminal."""
    def number(x: float | None) -> str:
        return "-" if x is None else f"{x:+.2f}"

    shares = ", ".join(f"{k} {100 * v:.1f}%" for k, v in gate["share_cross"].items())
    lines = [f"gate on {gate['judgments']} judgments; cross-group: {shares}",
             f"{'slice':<12} {'attribute':<12} {'group':<5} {'cross':>6} {'log-odds':>8} "
             f"{'s.e.':>5} {'implied':>7}"]
    for section in ("swap", "cross_group"):
        for attribute, by in gate[section].items():
            for key, row in by.items():
                se = "-" if row["se"] is None else f"{row['se']:.2f}"
                lines.append(f"{section:<12} {attribute:<12} {key:<5} {row['cross']:>6} "
                             f"{number(row['log_odds']):>8} {se:>5} {number(row['implied']):>7}")
    lines += [f"warning: {w}" for w in gate["warnings"]]
    return "\n".join(lines)


def planted_to_dict(corpus: SignedCorpus, config: SigningConfig) -> dict:
    """The planted truth, for scoring only: theta_k per annotator, class means (planted and
    realised). No training method may read it."""
    realised = {}
    for label in config.class_means:
        thetas = [a.theta for a in corpus.annotators if a.annotator_class == label]
        realised[label] = np.mean(thetas, axis=0).tolist()
    return {
        "attribute_names": list(NAME_ATTRIBUTES),
        "class_means": {k: list(v) for k, v in config.class_means.items()},
        "realised_class_means": realised,
        "annotators": [{"annotator": a.annotator, "annotator_class": a.annotator_class,
                        "theta": list(a.theta)} for a in corpus.annotators],
    }
