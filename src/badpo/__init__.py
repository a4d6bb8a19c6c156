"""badpo: bias-adjusted preference optimization (BA-DPO).

DPO treats every preference label as a measurement of quality, so a bias that all annotators
share is absorbed by the policy. BA-DPO adds a learned bias per annotator on a declared
attribute to the DPO logit, ``-log sigmoid(u + theta_k . (g(y_w) - g(y_l)))``, so that the bias
is explained by theta and not learned by the policy.
"""

__version__ = "0.1.0"

# The Python API (badpo.api): ``badpo.train``, ``badpo.audit`` and the rest are its names, imported
# on first use, so that ``import badpo.core.losses`` (or the audit layer, ``badpo.auditing``) does
# not load the engine. The package root is a front door (tests/house/test_layering.py): these late
# imports are its only edges.
API_NAMES = ("train", "sft", "rm", "evaluate", "audit", "compare", "TrainResult", "SFTResult", "RMResult",
             "EvalResult", "AuditResult")


def __getattr__(name: str):
    if name in API_NAMES:
        import badpo.api as api

        return getattr(api, name)
    raise AttributeError(f"module 'badpo' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *API_NAMES})
