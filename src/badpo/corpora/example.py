"""The audit's built-in example (``badpo audit --example``): a corpus with planted biases.

The tiny world's prompts (:mod:`badpo.corpora.tiny`) signed by the Signed-UltraFeedback protocol
(:mod:`badpo.corpora.signing`), audited by :func:`badpo.audit.estimates.audit`, and the audit set
beside the values its planted theta_k imply. It lives in the data layer because it builds a
corpus; the audit itself (the core) knows nothing of corpora.
"""

from __future__ import annotations

import numpy as np

from badpo.audit.estimates import Audit, LogOdds, audit, format_audit, format_estimate
from badpo.core.attributes import resolve_attributes
from badpo.corpora.signing import SigningConfig, implied_log_odds, sign_corpus
from badpo.corpora.tiny import TinyWorldConfig, tiny_base_pairs

__all__ = ["example_report"]


def example_report(seed: int = 0, n_pairs: int = 3000) -> tuple[Audit, str]:
    """Audit a built-in corpus with planted biases; the table is followed by what its theta_k imply.

    The corpus: ``n_pairs`` base pairs of the tiny world signed by the Signed-UltraFeedback
    protocol with its default configuration (60 annotators, 40/20/40 pair types, 4 judgments
    per pair), data seed ``seed``, every prompt kept (no held-out split); attributes ``names``.
    The implied value of a slice is logit(mean over its swap judgments of sigma(theta_k . dg)),
    dg oriented toward the attribute side (``signing.implied_log_odds``): what the audit
    estimates up to sampling error. It is not the class mean of theta_k (a logit of a mean of
    sigmoids is pulled toward 0), which is shown beside it.
    """
    world = TinyWorldConfig(n_pairs=n_pairs, signing=SigningConfig(seed=seed, heldout_share=0.0))
    corpus = sign_corpus(tiny_base_pairs(world)[0], world.signing)
    result = audit(corpus.train, resolve_attributes(["names"]))
    implied = implied_log_odds(corpus, corpus.train, ("swap",))
    lines = ["", f"planted corpus (seed {seed}, {n_pairs} pairs, tiny-world prompts signed as in "
             "Signed-UltraFeedback): swap pairs, audit vs planted theta_k",
             f"{'attribute':<12}  {'slice':<6}  {'cross':>6}  {'audit':>7}  {'s.e.':>6}  "
             f"{'implied':>7}  {'mean theta_k':>12}"]
    empty = LogOdds(0, 0, 0)
    for i, c in enumerate(result.coordinates):
        for key, value in implied[c.name].items():
            counts = (c.by_pair_type.get("swap", empty) if key == "all"
                      else c.by_pair_type_class.get("swap", {}).get(key, empty))
            estimate, se = format_estimate(counts)
            members = [a.theta[i] for a in corpus.annotators if key in ("all", a.annotator_class)]
            shown = "-" if value is None else f"{value:+.3f}"
            lines.append(f"{c.name:<12}  {key:<6}  {counts.cross:>6}  {estimate:>7}  {se:>6}  "
                         f"{shown:>7}  {float(np.mean(members)):>+12.3f}")
    return result, format_audit(result) + "\n".join(lines) + "\n"
