"""badpo: bias-adjusted preference optimization (BA-DPO).

DPO treats every preference label as a measurement of quality, so a bias that all annotators
share is absorbed by the policy. BA-DPO adds a learned bias per annotator on a declared
attribute to the DPO logit, ``-log sigmoid(u + theta_k . (g(y_w) - g(y_l)))``, so that the bias
is explained by theta and not learned by the policy.
"""

__version__ = "0.1.0"

# The Python API (badpo.api) loads torch, transformers and accelerate: it is imported on first use
# of one of these names, so that ``import badpo.core.losses`` (or the audit) stays light.
_API = ("train", "sft", "rm", "evaluate", "compare", "TrainResult", "SFTResult", "RMResult",
        "EvalResult", "AuditResult")


def __getattr__(name: str):
    import importlib

    if name == "audit":  # the subpackage badpo.audit, callable as badpo.api.audit (see its docstring)
        return importlib.import_module("badpo.audit")
    if name in _API:
        return getattr(importlib.import_module("badpo.api"), name)
    raise AttributeError(f"module 'badpo' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API, "audit"})
