"""The rows read on held-out judgments and on the learned theta: held-out accuracy on same- and
cross-group judgments and the gap (per attribute, and on any attribute), vote prediction with the
run's own theta_k and with the planted ones (the ceiling), the learned level and theta recovery;
and a reward model's tilt on counterfactual pairs. Each row says how it reads a reward model too
(``read_reward_model``, :func:`badpo.readouts.evaluate_policy.evaluate_reward_model`): held-out accuracy
of its score differences (no vote prediction), its theta, and its tilt, which only a reward model has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from badpo.core.attributes import AttributeSet
from badpo.core.bias import BiasChannel
from badpo.core.judgments import Judgment
from badpo.readouts.compared import Beside, RunRecord
from badpo.readouts.metrics import heldout_accuracy, reward_tilt, theta_recovery, vote_prediction
from badpo.readouts.model import heldout_margins
from badpo.readouts.reading import Corpus, Need, Reading, Readout, shown
from badpo.readouts.tilt import counterfactual_pairs

__all__ = ["HELDOUT", "THETA", "TILT", "TYPES", "heldout_accuracies", "heldout_readouts", "planted_annotators",
           "theta_readouts", "vote_readouts"]


def planted_annotators(planted: dict) -> tuple[dict[str, list[float]], dict[str, str]]:
    theta = {a["annotator"]: a["theta"] for a in planted["annotators"]}
    classes = {a["annotator"]: a["annotator_class"] for a in planted["annotators"]}
    return theta, classes


def own_bias_logits(bias: BiasChannel, heldout: Sequence[Judgment], diff: torch.Tensor,
                     names: Sequence[str]) -> tuple[torch.Tensor, int]:
    """b = (theta_k + offset) . dg of each held-out judgment with the run's own theta, [N], and the
    number of judgments whose annotator the run never saw (they get theta_bar: pooled and DPO give
    every annotator the same theta anyway)."""
    columns = diff[:, [list(names).index(name) for name in bias.attribute_names]]
    with torch.no_grad():
        mean = bias.mean().double()
        position = {a: i for i, a in enumerate(bias.annotators)} if bias.facts.per_annotator else {}
        theta = bias.theta().double() if position else None
        rows = [theta[position[j.annotator]] if j.annotator in position else mean for j in heldout]
        per_judgment = torch.stack(rows) + bias.fixed_offset.double()
    unseen = sum(1 for j in heldout if position and j.annotator not in position)
    return (per_judgment * columns).sum(dim=1), unseen


def vote_readouts(margins: torch.Tensor, heldout: Sequence[Judgment], g_w: np.ndarray, g_l: np.ndarray,
                   names: Sequence[str], bias: BiasChannel | None, planted: dict | None) -> dict:
    """Vote prediction by the sign of u + theta_k . (g_w - g_l) on the held-out judgments that are
    cross-group on each attribute in turn: with the run's own theta_k, and with the planted ones
    (the ceiling). DPO (no bias channel) predicts with u alone."""
    diff = torch.tensor(g_w - g_l, dtype=torch.float64)
    classes = [j.annotator_class for j in heldout]
    own, unseen = torch.zeros(len(heldout), dtype=torch.float64), 0
    if bias is not None:
        own, unseen = own_bias_logits(bias, heldout, diff, names)
    ceiling = None
    if planted is not None:
        theta, _ = planted_annotators(planted)
        planted_names = planted["attribute_names"]
        # an attribute the labels were not drawn with has a planted theta of 0
        planted_theta = torch.tensor(
            [[theta[j.annotator][planted_names.index(n)] if n in planted_names else 0.0 for n in names]
             for j in heldout], dtype=torch.float64)
        ceiling = (planted_theta * diff).sum(dim=1)
    result: dict = {"votes_unseen_annotator_judgments": unseen}
    for a, name in enumerate(names):
        cross = diff[:, a] != 0
        result[f"votes/{name}"] = vote_prediction(margins, own, cross, classes)
        if ceiling is not None:
            result[f"votes_ceiling/{name}"] = vote_prediction(margins, ceiling, cross, classes)
    return result


def theta_readouts(bias: BiasChannel, planted: dict | None) -> dict:
    """The learned level per attribute and, against planted values, the recovery of every theta_k.

    ``theta_mean`` is the mean of the theta_k (Corollary "Reward-bias degeneracy"); ``theta_shared``
    the raw shared parameter, the theta_bar the paper's text quotes (pooled: its one theta, equal to
    the mean; theta_bar + eps_k: theta_bar, which differs from the mean by mean_k eps_k, not held at
    0 in training). A variant without a shared parameter (per_annotator) writes no ``theta_shared``.
    """
    names = list(bias.attribute_names)
    result = {"theta_mean": dict(zip(names, bias.mean().tolist()))}
    if bias.facts.shared_parameter is not None:
        result["theta_shared"] = dict(zip(names, bias.shared_parameter().tolist()))
    if planted is not None and bias.facts.per_annotator:
        theta, classes = planted_annotators(planted)
        # over the planted attributes, and the annotators the run learned (one absent from
        # training has no theta to recover)
        shared = [(i, planted["attribute_names"].index(n)) for i, n in enumerate(names)
                  if n in planted["attribute_names"]]
        learned = {a: [row[i] for i, _ in shared] for a, row in zip(bias.annotators, bias.theta().tolist())}
        planted_values = {a: [theta[a][c] for _, c in shared] for a in learned if a in theta}
        result["theta_recovery"] = theta_recovery(learned, planted_values, classes,
                                                  [names[i] for i, _ in shared])
    return result


def attribute_values(heldout: Sequence[Judgment], attributes: AttributeSet) -> tuple[np.ndarray, np.ndarray]:
    """g(y_w) and g(y_l) of every held-out judgment on the declared attributes, [N, A] each."""
    values = [attributes.judgment_values(j) for j in heldout]
    return np.array([v[0] for v in values]), np.array([v[1] for v in values])


def heldout_accuracies(margins: torch.Tensor, heldout: Sequence[Judgment],
                       attributes: AttributeSet) -> tuple[dict, np.ndarray, np.ndarray]:
    """``heldout`` (accuracy of the margins [N] on same- and cross-group judgments and the gap, per
    attribute) and ``heldout_any`` (a pair cross-group on any attribute), with g(y_w), g(y_l) [N, A]:
    a policy's margins and a reward model's score differences read alike."""
    g_w, g_l = attribute_values(heldout, attributes)
    result = {"heldout": {name: heldout_accuracy(margins, g_w[:, [a]], g_l[:, [a]])
                          for a, name in enumerate(attributes.names)},
              "heldout_any": heldout_accuracy(margins, g_w, g_l)}
    return result, g_w, g_l


def heldout_readouts(margins: torch.Tensor, corpus: Corpus, attributes: AttributeSet,
                     vote_bias: BiasChannel | None, skipped: dict) -> dict:
    """Held-out accuracy (per attribute and on any) and vote prediction with ``vote_bias``, the
    theta the policy was trained against; why votes are not read goes into ``skipped``."""
    result, g_w, g_l = heldout_accuracies(margins, corpus.heldout, attributes)
    theta_names = vote_bias.attribute_names if vote_bias is not None else ()
    undeclared = [name for name in theta_names if name not in attributes.names]
    if undeclared:  # u + theta_k . dg needs dg on every attribute the run's theta is on
        skipped["votes"] = (f"the run's theta is on {undeclared}, which evaluation.attributes does not "
                            "declare; declare them too for vote prediction")
    else:
        result.update(vote_readouts(margins, corpus.heldout, g_w, g_l, attributes.names, vote_bias,
                                    corpus.planted))
    return result


HELDOUT_JUDGMENTS = Need("held-out judgments", lambda r: bool(r.corpus.heldout), skip="no held-out judgments")
LEARNED_THETA = Need("a learned theta", lambda r: r.bias is not None and r.bias.facts.learns_theta)


def _read_heldout(reading: Reading) -> dict:
    if reading.margins is None:
        reading.margins = heldout_margins(reading.policy, reading.reference, reading.tokenizer, reading.corpus.heldout,
                                          reading.beta, reading.tokenization, reading.config.batch_size,
                                          reading.cache_dir)
    vote_bias = reading.bias if reading.vote_bias is None else reading.vote_bias
    return heldout_readouts(reading.margins, reading.corpus, reading.attributes, vote_bias, reading.skipped)


def _read_reward_heldout(reading: Reading) -> dict:
    """A reward model's held-out accuracy: r(y_w) - r(y_l) read as a policy's margins are."""
    heldout = reading.corpus.heldout
    prompts = [j.prompt for j in heldout]
    margins = torch.tensor(reading.scores(prompts, [j.chosen for j in heldout])
                           - reading.scores(prompts, [j.rejected for j in heldout]))
    return heldout_accuracies(margins, heldout, reading.attributes)[0]


def _read_theta(reading: Reading) -> dict:
    return theta_readouts(reading.bias, reading.corpus.planted)


def _read_tilt(reading: Reading) -> dict:
    """:func:`badpo.readouts.metrics.reward_tilt` per declared attribute on counterfactual pairs of the
    held-out responses (:func:`badpo.readouts.tilt.counterfactual_pairs`: names swapped in the
    signature, or the attribute removed by its edit; the first ``max_prompts`` responses), with
    ``edit`` saying how the pair differs; an attribute without pairs goes under ``skipped``."""
    config = reading.config
    pairs, skipped = counterfactual_pairs(reading.attributes, reading.corpus.heldout, reading.corpus.surnames,
                                          config.max_prompts, config.seed)
    reading.skipped.update(skipped)
    if not pairs:
        return {}
    return {"tilt": {name: {**reward_tilt(reading.scores(p.prompts, p.with_attribute),
                                          reading.scores(p.prompts, p.counterpart)), "edit": p.edit}
                     for name, p in pairs.items()}}


def _heldout_lines(record: Mapping) -> list[str]:
    lines = []
    heldout = dict(record.get("heldout", {}))
    if len(heldout) > 1 and "heldout_any" in record:  # a pair cross-group on any of them
        heldout["any attribute"] = record["heldout_any"]
    if heldout:
        lines.append(f"{'held-out accuracy':<28}{'same':>9}{'cross':>8}{'gap':>8}   n same / cross")
        for name, entry in heldout.items():
            lines.append(f"  {name:<26}{shown(entry['same_accuracy']):>9}{shown(entry['cross_accuracy']):>8}"
                         f"{shown(entry['gap']):>8}   {entry['n_same']} / {entry['n_cross']}")
    votes = {key.split("/", 1)[1]: value for key, value in record.items() if key.startswith("votes/")}
    if votes:
        lines.append("vote prediction with the run's theta_k (cross-group votes): " + ", ".join(
            f"{name} {shown(entry['accuracy'])} (n {entry['n']})" for name, entry in votes.items()))
    return lines


def _tilt_lines(record: Mapping) -> list[str]:
    if "tilt" not in record:
        return []
    return ["reward tilt on counterfactual pairs (share where the attribute side scores higher): " + ", ".join(
        f"{name} {shown(entry['share_higher'])} (n {entry['n']}, {entry.get('edit', 'first name swapped')})"
        for name, entry in record["tilt"].items())]


def _heldout_of(run: RunRecord) -> dict:
    """Held-out accuracy on same- and cross-group judgments and the gap, per attribute read."""
    keys = ("same_accuracy", "cross_accuracy", "gap", "n_same", "n_cross")
    heldout = run.readouts.get("heldout", {})
    if not isinstance(heldout, Mapping):
        raise ValueError(f"{run.source}: heldout is not an object")
    return {name: {key: entry.get(key) for key in keys}
            for name, entry in heldout.items() if isinstance(entry, Mapping)}


def _heldout_columns(values: Sequence[Mapping]) -> list[tuple[str, list[str]]]:
    def cell(entry: Mapping) -> str:
        same, cross, gap = (entry.get(k) for k in ("same_accuracy", "cross_accuracy", "gap"))
        return "-" if None in (same, cross, gap) else f"{same:.3f} / {cross:.3f} ({gap:+.3f})"

    names = dict.fromkeys(name for value in values for name in value)
    return [(f"{name} held-out s / c (gap)", [cell(value.get(name, {})) for value in values]) for name in names]


def _theta_of(run: RunRecord) -> dict | None:
    """theta_bar per attribute beside the audit's offline estimate (the log-odds that the attribute's
    side wins a cross-group judgment) and whether it had settled; theta_k per annotator where they
    differ. None for a run that learns no theta."""
    theta = run.theta
    if not theta or theta.get("variant") == "none" or not isinstance(theta.get("theta_bar"), Mapping):
        return None
    offline = {c.get("name"): c for c in (run.offline or {}).get("coordinates", []) if isinstance(c, Mapping)}
    moving = (run.convergence or {}).get("attributes", {})
    result = {}
    for name in theta["theta_bar"]:
        coordinate = offline.get(name, {})
        by_annotator = {a: e.get("theta", {}).get(name) for a, e in theta.get("annotators", {}).items()}
        result[name] = {
            "theta_bar": theta["theta_bar"][name],
            "offline": coordinate.get("overall", {}).get("log_odds"),
            "converged": (not moving[name]["moving"]) if name in moving else None,
            "theta_k": by_annotator if len(set(by_annotator.values())) > 1 else {},
            "offline_k": {a: e.get("log_odds") for a, e in coordinate.get("by_annotator", {}).items()},
        }
    return result


def _theta_columns(values: Sequence[Mapping | None]) -> list[tuple[str, list[str]]]:
    def cell(entry: Mapping | None) -> str:
        if not entry:
            return "-"
        offline = (f"offline {entry['offline']:+.3f}" if entry.get("offline") is not None else "no offline estimate")
        moving = ", moving" if entry.get("converged") is False else ""
        return f"{entry['theta_bar']:+.3f} ({offline}{moving})"

    names = dict.fromkeys(name for value in values for name in value or {})
    return [(f"{name} theta_bar", [cell((value or {}).get(name)) for value in values]) for name in names]


def _theta_notes(value: Mapping | None) -> list[str]:
    return [f"theta_bar {name} was still moving at the end of training (run.json theta_convergence): it has not "
            "converged, and the bias it explains may be under-removed"
            for name, entry in (value or {}).items() if entry["converged"] is False]


# held-out accuracy same/cross and the gap, per attribute and on any; vote prediction by
# u + theta_k . dg with the run's theta (and the planted ceiling)
HELDOUT = Readout("held-out judgments", ("heldout", "heldout_any", "votes_unseen_annotator_judgments", "votes",
                                         "votes_ceiling"), (HELDOUT_JUDGMENTS,), _read_heldout,
                  read_reward_model=_read_reward_heldout,
                  per_attribute=("heldout", "votes", "votes_ceiling"), skipped_as=("heldout", "votes"),
                  relative_to_reference=("heldout", "heldout_any", "votes", "votes_ceiling"),
                  summary=_heldout_lines, shown_order=2,
                  beside=Beside("heldout", _heldout_of, _heldout_columns,
                                "held-out accuracy on same- / cross-group judgments (gap)", order=1))
# the learned level (theta_mean, theta_shared) and, against planted values, theta recovery
THETA = Readout("theta", ("theta_mean", "theta_shared", "theta_recovery"), (LEARNED_THETA,), _read_theta,
                read_reward_model=_read_theta,
                beside=Beside("theta", _theta_of, _theta_columns,
                              "theta_bar beside the offline estimate of the run's audit (moving: not converged)",
                              notes=_theta_notes, order=2))
# EM-DPO's types against the planted annotator classes: written by badpo.readouts.mixture_reading only
TYPES = Readout("types of a mixture", ("type_recovery",), (), None)
# a reward model's tilt toward each declared attribute on counterfactual pairs (a policy has none)
TILT = Readout("reward tilt", ("tilt",), (), None, read_reward_model=_read_tilt, summary=_tilt_lines, shown_order=3)
