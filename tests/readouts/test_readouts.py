"""Tests for badpo.readouts.metrics: hand-worked values, a second path for every formula, clear errors.

Worked values used below.
- Three candidates with log-probs log 0.2, log 0.3, log 0.1 hold 0.6 of the mass; renormalised
  they are 1/3, 1/2, 1/6. With labels (woman, black) = (1,0), (0,1), (1,1): woman 1/3 + 1/6 = 1/2,
  black 1/2 + 1/6 = 2/3.
- Removal: reference 0.5, DPO 0.9 / 0.7, arm 0.6 / 0.5 -> per seed 0.75 and 1.0, mean 0.875; the
  removal of the means is 0.25 / 0.3 = 0.8333.
- Student t at 95%: df 1 -> tan(0.475 pi) = 12.7062; df 2 -> 0.95 / sqrt(2 * 0.975 * 0.025) =
  4.30265. Values 1, 2, 3: mean 2, sd 1, half width 4.30265 / sqrt 3 = 2.48414.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from badpo.comparing.over_seeds import mean_ci, removal, removal_per_seed, student_t_quantile
from badpo.readouts.metrics import (
    attribute_logodds,
    attribute_probabilities,
    attribute_rate,
    candidate_probabilities,
    heldout_accuracy,
    kl_per_token,
    mean_attribute_rate,
    mean_whole_signature_rate,
    reweighted_rate,
    sampled_signature_rates,
    theta_recovery,
    vote_prediction,
    whole_signature_rate,
)
from badpo.readouts.mixture_metrics import mixture_vote_logits, type_class_agreement, weighted_mean_readouts

NAMES = ("woman_coded", "black_coded")
LABELS = [[1, 0], [0, 1], [1, 1]]
LOGPS = [math.log(0.2), math.log(0.3), math.log(0.1)]


# ------------------------------------------------------------------------------------ rates
def test_renormalised_probabilities_hand_worked():
    probabilities = candidate_probabilities(LOGPS)
    assert probabilities.dtype == torch.float64
    torch.testing.assert_close(probabilities, torch.tensor([1 / 3, 1 / 2, 1 / 6], dtype=torch.float64),
                               rtol=0, atol=1e-15)


def test_attribute_rate_hand_worked_and_dtype_independent():
    rates = attribute_rate(LOGPS, LABELS, NAMES)
    assert rates == pytest.approx({"woman_coded": 0.5, "black_coded": 2 / 3}, abs=1e-15)
    # float32 log-probs from a model give the same numbers to float32 precision
    from_float32 = attribute_rate(torch.tensor(LOGPS, dtype=torch.float32), LABELS, NAMES)
    assert from_float32 == pytest.approx(rates, abs=1e-7)


def test_multi_token_candidate_is_scored_by_its_full_sequence():
    """"Ann" is one token at p 0.2; "La"+"toya" is 0.3 * 0.5 = 0.15: rates 0.2/0.35 and 0.15/0.35.

    A readout that kept only the first token would give 0.2/0.5 = 0.4 for "Ann" instead of 0.5714.
    """
    token_logps = [[math.log(0.2)], [math.log(0.3), math.log(0.5)]]
    sequence_logps = [sum(tokens) for tokens in token_logps]
    rates = attribute_rate(sequence_logps, [[0, 0], [1, 1]], NAMES)
    assert rates["woman_coded"] == pytest.approx(0.15 / 0.35, abs=1e-15)


def test_mean_attribute_rate_averages_per_prompt_rates():
    """Prompt 1 as above (woman 1/2); prompt 2 puts 0.9 of the set on the (0,1) candidate,
    0.05 on each other: woman 0.1, black 0.95. Means: woman 0.3, black (2/3 + 0.95)/2."""
    second = [math.log(0.05), math.log(0.9), math.log(0.05)]
    rates = mean_attribute_rate([LOGPS, second], LABELS, NAMES)
    assert rates == pytest.approx({"woman_coded": 0.3, "black_coded": (2 / 3 + 0.95) / 2}, abs=1e-14)


def test_logodds_match_logit_of_the_rate_and_keep_digits_near_one():
    logps = torch.tensor([LOGPS, [0.0, -40.0, -45.0]], dtype=torch.float64)
    rates = attribute_probabilities(logps, LABELS, NAMES)
    logodds = attribute_logodds(logps, LABELS, NAMES)
    torch.testing.assert_close(logodds[0], torch.log(rates[0] / (1 - rates[0])), rtol=0, atol=1e-13)
    # black at prompt 2: logit = logsumexp(-40, -45) - 0, beyond what 1 - p can resolve
    assert logodds[1, 1].item() == pytest.approx(math.log(math.exp(-40.0) + math.exp(-45.0)),
                                                 abs=1e-12)
    assert torch.isinf(attribute_logodds([0.0, 1.0], [[1, 0], [1, 0]], NAMES)).tolist() == [True, True]


def test_whole_signature_rate_marginalises_surnames_before_renormalising():
    """p(first, surname, end): Emily 0.1/0.3, Lamar 0.05/0.05 -> marginals 0.4 and 0.1 -> 0.8 woman.

    Renormalising per surname and averaging would give (0.1/0.15 + 0.3/0.35)/2 = 0.7619 instead.
    """
    signature = np.log([[0.1, 0.3], [0.05, 0.05]])
    labels = [[1, 0], [0, 1]]
    assert whole_signature_rate(signature, labels, NAMES) == pytest.approx(
        {"woman_coded": 0.8, "black_coded": 0.2}, abs=1e-15)
    two_prompts = np.stack([signature, np.log([[0.1, 0.1], [0.3, 0.5]])])
    assert mean_whole_signature_rate(two_prompts, labels, NAMES)["woman_coded"] == pytest.approx(
        (0.8 + 0.2) / 2, abs=1e-15)


def test_rate_inputs_are_checked():
    with pytest.raises(ValueError, match=r"candidate_logprobs\[1\] is nan"):
        attribute_rate([0.0, math.nan, -1.0], LABELS, NAMES)
    with pytest.raises(ValueError, match=r"labels\[2, 0\] is 2.0"):
        attribute_rate(LOGPS, [[1, 0], [0, 1], [2, 1]], NAMES)
    with pytest.raises(ValueError, match="labels must have shape"):
        attribute_rate(LOGPS, [[1, 0], [0, 1]], NAMES)
    with pytest.raises(ValueError, match="every candidate has log-prob -inf"):
        attribute_rate([-math.inf] * 3, LABELS, NAMES)
    with pytest.raises(ValueError, match="use mean_attribute_rate"):
        attribute_rate([LOGPS], LABELS, NAMES)
    # a candidate at -inf simply has probability 0
    assert attribute_rate([0.0, -math.inf, 0.0], LABELS, NAMES)["woman_coded"] == 1.0


# -------------------------------------------------------------------- removal and intervals
def test_removal_hand_worked():
    assert removal(0.96, 0.55, 0.50) == pytest.approx(0.41 / 0.46, abs=1e-15)
    assert removal(0.96, 0.96, 0.50) == 0.0
    assert removal(0.96, 0.50, 0.50) == 1.0
    with pytest.raises(ValueError, match="DPO moved nothing"):
        removal(0.5, 0.4, 0.5)


def test_removal_per_seed_is_not_the_removal_of_the_means():
    result = removal_per_seed({1: 0.9, 2: 0.7}, {1: 0.6, 2: 0.5}, 0.5)
    assert result["per_seed"] == pytest.approx({1: 0.75, 2: 1.0}, abs=1e-15)
    assert result["mean"] == pytest.approx(0.875, abs=1e-15)
    assert removal(0.8, 0.55, 0.5) == pytest.approx(0.25 / 0.3)  # the pooled figure, 0.8333
    # per-seed references, and a seed without DPO is an error naming it
    assert removal_per_seed({1: 0.9}, {1: 0.6}, {1: 0.3})["per_seed"][1] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="seed 3"):
        removal_per_seed({1: 0.9}, {1: 0.6, 3: 0.5}, 0.5)


def test_student_t_quantile_closed_forms():
    assert student_t_quantile(0.95, 1) == pytest.approx(math.tan(0.475 * math.pi), rel=1e-13)
    p = 0.975
    assert student_t_quantile(0.95, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-13)
    with pytest.raises(ValueError, match="level"):
        student_t_quantile(1.0, 3)


def test_student_t_quantile_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 3, 4, 5, 9, 29, 100):
        for level in (0.8, 0.9, 0.95, 0.99):
            assert student_t_quantile(level, df) == pytest.approx(
                stats.t.ppf((1 + level) / 2, df), rel=1e-11), (df, level)


def test_mean_ci_hand_worked_and_against_scipy():
    result = mean_ci([1.0, 2.0, 3.0])
    assert result["mean"] == 2.0 and result["sd"] == 1.0 and result["n"] == 3
    t_2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # the df = 2 closed form, 4.30265
    assert result["half_width"] == pytest.approx(t_2 / math.sqrt(3), rel=1e-12)
    stats = pytest.importorskip("scipy.stats")
    values = np.array([0.542, 0.531, 0.553, 0.549])
    low, high = stats.t.interval(0.95, len(values) - 1, loc=values.mean(), scale=stats.sem(values))
    result = mean_ci(values)
    assert (result["low"], result["high"]) == pytest.approx((low, high), rel=1e-12)
    single = mean_ci([0.7])
    assert single["mean"] == 0.7 and math.isnan(single["half_width"])
    with pytest.raises(ValueError, match="no values"):
        mean_ci([])


# ---------------------------------------------------------------------- held-out judgments
def test_heldout_accuracy_hand_worked():
    """Rows (u, g_w, g_l): same-group u = 1, -1, 0 -> (1 + 0 + 0.5)/3 = 0.5;
    cross-group (differ on the second attribute) u = 2, 3, -1, 4 -> 3/4. Gap 0.25."""
    margins = [1.0, -1.0, 0.0, 2.0, 3.0, -1.0, 4.0]
    g_w = [[0, 0], [1, 1], [1, 0], [0, 1], [1, 1], [0, 1], [0, 0]]
    g_l = [[0, 0], [1, 1], [1, 0], [0, 0], [1, 0], [0, 0], [0, 1]]
    result = heldout_accuracy(margins, g_w, g_l)
    assert result == pytest.approx({"same_accuracy": 0.5, "cross_accuracy": 0.75, "gap": 0.25,
                                    "n_same": 3, "n_cross": 4})
    # one attribute at a time: on the first column nothing is cross-group
    only_first = heldout_accuracy(margins, np.array(g_w)[:, 0], np.array(g_l)[:, 0])
    assert only_first["n_cross"] == 0 and math.isnan(only_first["cross_accuracy"])
    with pytest.raises(ValueError, match="g_l must have shape"):
        heldout_accuracy(margins, g_w, g_l[:-1])


def test_vote_prediction_overall_and_per_class():
    """Cross rows 0-3: u + b = 0.5 - 1 < 0 (wrong), -0.5 + 1 > 0, 0 + 0 (half), 1 + 1 > 0 ->
    2.5 / 4. Class A holds rows 0 and 1 (0.5), class B rows 2 and 3 (0.75). Row 4 is same-group."""
    result = vote_prediction([0.5, -0.5, 0.0, 1.0, -9.0], [-1.0, 1.0, 0.0, 1.0, 0.0],
                             np.array([True, True, True, True, False]), ["A", "A", "B", "B", "A"])
    assert result["accuracy"] == pytest.approx(0.625) and result["n"] == 4
    assert result["per_class"] == {"A": {"accuracy": 0.5, "n": 2}, "B": {"accuracy": 0.75, "n": 2}}
    # a voter without a class (a corpus with no annotator_class) counts overall only, never as "null"
    unclassed = vote_prediction([0.5, -0.5, 0.0, 1.0, -9.0], [-1.0, 1.0, 0.0, 1.0, 0.0],
                                np.array([True, True, True, True, False]), [None, "A", None, "B", "A"])
    assert unclassed["accuracy"] == pytest.approx(0.625) and unclassed["n"] == 4
    assert unclassed["per_class"] == {"A": {"accuracy": 1.0, "n": 1}, "B": {"accuracy": 1.0, "n": 1}}
    with pytest.raises(ValueError, match="cross_mask must be a boolean"):
        vote_prediction([0.5], [0.0], [1])


def test_theta_recovery():
    planted = {"a1": [1.0, 2.0], "a2": [2.0, -1.0], "a3": [0.0, 0.5], "a4": [3.0, 1.0]}
    classes = {"a1": "A", "a2": "A", "a3": "B", "a4": "B"}
    learned = {k: [2 * v[0] + 1, -v[1]] for k, v in planted.items()}  # affine: r = +1; negated: -1
    result = theta_recovery(learned, planted, classes, NAMES)
    assert result["pearson"] == pytest.approx({"woman_coded": 1.0, "black_coded": -1.0}, abs=1e-15)
    assert result["planted_class_means"] == {"A": {"woman_coded": 1.5, "black_coded": 0.5},
                                             "B": {"woman_coded": 1.5, "black_coded": 0.75}}
    assert result["learned_class_means"]["A"] == {"woman_coded": 4.0, "black_coded": -0.5}
    # a second path for r: numpy's corrcoef on a non-degenerate case
    noisy = {k: [v[0] + (i % 2) * 0.7, v[1] * i] for i, (k, v) in enumerate(planted.items())}
    planted_matrix = np.array([planted[k] for k in sorted(planted)])
    noisy_matrix = np.array([noisy[k] for k in sorted(planted)])
    expected = np.corrcoef(planted_matrix[:, 0], noisy_matrix[:, 0])[0, 1]
    assert theta_recovery(noisy, planted, classes, NAMES)["pearson"]["woman_coded"] == pytest.approx(
        expected, abs=1e-14)
    pooled = {k: [0.6, 0.6] for k in planted}  # one theta for everyone: r is undefined
    assert math.isnan(theta_recovery(pooled, planted, classes, NAMES)["pearson"]["woman_coded"])
    with pytest.raises(ValueError, match="only learned \\['a5'\\]"):
        theta_recovery({**learned, "a5": [0.0, 0.0]}, planted, classes, NAMES)


# ----------------------------------------------------------------------------- generations
def test_kl_per_token_hand_worked_with_mask():
    """Tokens 1-3 of row 0 and token 1 of row 1 count: differences 0.5, -0.25, 1.0, 0.75 -> 0.5."""
    policy = [[-1.0, -2.0, -0.5, -9.0], [-1.25, 0.0, 0.0, 0.0]]
    reference = [[-1.5, -1.75, -1.5, -1.0], [-2.0, -7.0, -7.0, -7.0]]
    mask = [[1, 1, 1, 0], [1, 0, 0, 0]]
    assert kl_per_token(policy, reference, mask) == 0.5
    with pytest.raises(ValueError, match="mask selects no token"):
        kl_per_token(policy, reference, [[0] * 4, [0] * 4])


def test_kl_per_token_monte_carlo_matches_closed_form():
    """Categorical p = (0.7, 0.2, 0.1) against q = (0.4, 0.4, 0.2):
    KL = 0.7 ln(7/4) + 0.2 ln(1/2) + 0.1 ln(1/2) = 0.391731 - 0.138629 - 0.069315 = 0.183787.
    200,000 tokens drawn from p: the estimator's standard error is about 0.0012."""
    p = torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64)
    q = torch.tensor([0.4, 0.4, 0.2], dtype=torch.float64)
    closed_form = float((p * (p / q).log()).sum())
    assert closed_form == pytest.approx(0.183787, abs=1e-6)
    tokens = torch.multinomial(p, 200_000, replacement=True, generator=torch.Generator().manual_seed(0))
    tokens = tokens.reshape(400, 500)
    estimate = kl_per_token(p.log()[tokens], q.log()[tokens], torch.ones_like(tokens))
    standard_error = float((p.log() - q.log())[tokens].std()) / math.sqrt(tokens.numel())
    assert abs(estimate - closed_form) < 4 * standard_error


def test_reweighted_rate_hand_worked():
    """Reference counts 10, 20, ..., 100: quintile edges 10, 28, 46, 64, 82, 100, two counts and a
    weight of 0.2 per bin. Policy counts (flags): 12 (0), 14 (0), 35 (1), 55 (1), 75 (1), 95 (1),
    96 (0) -> bin rates 0, 1, 1, 1, 1/2 -> 0.2 * 3.5 = 0.7, against the raw 4/7.
    Without the 75 the fourth bin is empty: it is dropped and the four others reweighted,
    (0 + 1 + 1 + 1/2) / 4 = 0.625, with dropped mass 0.2."""
    reference = list(range(10, 101, 10))
    counts, flags = [12, 14, 35, 55, 75, 95, 96], [0, 0, 1, 1, 1, 1, 0]
    result = reweighted_rate(flags, counts, reference)
    assert result["bin_edges"] == pytest.approx([10, 28, 46, 64, 82, 100])
    assert result["reference_share"] == pytest.approx([0.2] * 5)
    assert result["rate"] == pytest.approx(0.7, abs=1e-15) and result["raw_rate"] == pytest.approx(4 / 7)
    assert result["empty_bins"] == 0 and result["dropped_mass"] == 0.0
    dropped = reweighted_rate(flags[:4] + flags[5:], counts[:4] + counts[5:], reference)
    assert dropped["rate"] == pytest.approx(0.625, abs=1e-15)
    assert dropped["empty_bins"] == 1 and dropped["dropped_mass"] == pytest.approx(0.2)
    # counts outside the reference range go to the end bins
    assert reweighted_rate([1, 0], [1, 500], reference)["bin_count"] == [1, 0, 0, 0, 1]
    with pytest.raises(ValueError, match="do not overlap"):  # all reference mass in the last bin
        reweighted_rate([1], [30], [50] * 10)


def test_reweighting_undoes_a_pure_length_shift():
    """Markdown depends on length only (flag iff count >= 50). The reference's counts are uniform on
    10..99; the policy's are the shorter of two such draws, with the same rule. Raw, the policy's
    rate is P(min >= 50) = (50/90)^2 = 0.309 against the reference's 0.556; reweighted on 90 bins
    (about one count each) it reads the reference's rate."""
    rng = np.random.default_rng(0)
    reference = rng.integers(10, 100, size=20_000)
    shorter = np.minimum(rng.integers(10, 100, size=20_000), rng.integers(10, 100, size=20_000))
    reference_rate = float((reference >= 50).mean())
    result = reweighted_rate((shorter >= 50).astype(float), shorter, reference, bins=90)
    assert result["raw_rate"] == pytest.approx((50 / 90) ** 2, abs=0.01)
    assert result["empty_bins"] == 0
    assert result["rate"] == pytest.approx(reference_rate, abs=0.005)


def test_sampled_signature_rates_hand_worked():
    texts = ["a\n\n--- Emily Reed", "b", "c\n\n--- Zed Ray", "d\n\n--- Latoya Reed"]
    result = sampled_signature_rates(texts, token_counts=[10, 20, 30, 40])
    assert result == {"n": 4, "signed": 3, "signing_rate": 0.75, "signed_pool": 2,
                      "woman_share": 1.0, "black_share": 0.5, "mean_tokens": 25.0}
    assert math.isnan(sampled_signature_rates(["no signature"])["woman_share"])
    with pytest.raises(ValueError, match="not a single string"):
        sampled_signature_rates("a\n\n--- Emily Reed")


# -------------------------------------------------------------------- a mixture of type policies
def test_weighted_mean_readouts_by_hand():
    """w = (0.25, 0.75): a = 0.25*1 + 0.75*3 = 2.5, b.c = 0.25*0.5 + 0.75*1.0 = 0.875; a string the
    two share is kept, one they do not is left out, as is a key only one has; null stays null."""
    first = {"a": 1, "b": {"c": 0.5}, "label": "x", "other": "p", "only": 1.0, "none": None}
    second = {"a": 3, "b": {"c": 1.0}, "label": "x", "other": "q", "none": 2.0}
    assert weighted_mean_readouts([first, second], [0.25, 0.75]) == {
        "a": 2.5, "b": {"c": 0.875}, "label": "x", "none": None}
    assert math.isnan(weighted_mean_readouts([{"a": math.nan}, {"a": 1.0}], [0.5, 0.5])["a"])
    with pytest.raises(ValueError, match="sum to 1"):
        weighted_mean_readouts([first, second], [0.5, 0.6])
    with pytest.raises(ValueError, match="K = 2"):
        weighted_mean_readouts([first, second], [1.0])


def test_mixture_vote_logits_by_hand_and_for_one_type():
    """u = (2, -1), gamma = (1/2, 1/2): p = (sigmoid 2 + sigmoid -1) / 2 = (0.880797 + 0.268941) / 2
    = 0.5748692, logit ln(0.5748692 / 0.4251308) = 0.3017459. A voter certain of one type gets that
    type's own u back; huge margins do not overflow."""
    logits = mixture_vote_logits([[2.0, 2.0, 40.0], [-1.0, -1.0, -40.0]],
                                 [[0.5, 0.5], [0.0, 1.0], [0.5, 0.5]])
    assert logits[0].item() == pytest.approx(0.3017459, abs=1e-6)
    assert logits[1].item() == pytest.approx(-1.0, abs=1e-12)
    # p = (sigmoid 40 + sigmoid -40) / 2 = 1/2 exactly: logit 0
    assert abs(logits[2].item()) < 1e-12
    independent = [math.log(p / (1 - p)) for p in
                   [0.3 / (1 + math.exp(-0.4)) + 0.7 / (1 + math.exp(1.3))]]
    assert mixture_vote_logits([[0.4], [-1.3]], [[0.3, 0.7]])[0].item() == pytest.approx(independent[0], abs=1e-12)
    with pytest.raises(ValueError, match="sum to 1"):
        mixture_vote_logits([[1.0], [2.0]], [[0.5, 0.6]])


def test_type_class_agreement_by_hand():
    """types (0, 0, 1, 1) against classes (A, A, B, A): purity (2 + 1) / 4; pairs together in both:
    1 (the two type-0 A's); by type 1 + 1 = 2, by class 3 + 0 = 3, of 6 pairs: expected 2*3/6 = 1,
    max (2 + 3) / 2 = 2.5, ARI (1 - 1) / (2.5 - 1) = 0. The same partition under other labels is 1."""
    gamma = {"a": [0.9, 0.1], "b": [0.6, 0.4], "c": [0.2, 0.8], "d": [0.4, 0.6]}
    assert type_class_agreement(gamma, {"a": "A", "b": "A", "c": "B", "d": "A"}) == {
        "n": 4, "purity": 0.75, "adjusted_rand": 0.0, "type_sizes": {"0": 2, "1": 2},
        "by_class": {"A": {"0": 2, "1": 1}, "B": {"0": 0, "1": 1}}}
    same = type_class_agreement(gamma, {"a": "B", "b": "B", "c": "A", "d": "A", "e": "C"})
    assert same == {"n": 4, "purity": 1.0, "adjusted_rand": 1.0, "type_sizes": {"0": 2, "1": 2},
                    "by_class": {"A": {"0": 0, "1": 2}, "B": {"0": 2, "1": 0}}}
    # a type no annotator falls in is counted as 0, not left out
    empty = type_class_agreement({"a": [0.9, 0.1, 0.0], "b": [0.2, 0.0, 0.8]}, {"a": "A", "b": "B"})
    assert empty["type_sizes"] == {"0": 1, "1": 0, "2": 1}
    assert empty["by_class"] == {"A": {"0": 1, "1": 0, "2": 0}, "B": {"0": 0, "1": 0, "2": 1}}
