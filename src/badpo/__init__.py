"""badpo: bias-adjusted preference optimization (BA-DPO).

DPO treats every preference label as a measurement of quality, so a bias that all annotators
share is absorbed by the policy. BA-DPO adds a learned bias per annotator on a declared
attribute to the DPO logit, ``-log sigmoid(u + theta_k . (g(y_w) - g(y_l)))``, so that the bias
is explained by theta and not learned by the policy.
"""

import types

import badpo.audit as _audit_package

__version__ = "0.1.0"


class _CallableAudit(types.ModuleType):
    """The package ``badpo.audit``, callable as :func:`badpo.api.audit`: set here, at the front
    door, so that the audit layer imports nothing above it, whatever is imported first."""

    def __call__(self, *args, **kwargs):
        import badpo.api as api  # the front door's own names, imported on first use

        return api.audit(*args, **kwargs)


_audit_package.__class__ = _CallableAudit

# The Python API (badpo.api): ``badpo.train`` and the rest are its names, imported on first use, so
# that ``import badpo.core.losses`` (or the audit) does not run the front door. The package root is
# a front door too (tests/house/test_layering.py): its edges are these late imports and the light
# audit package above, which it makes callable.
API_NAMES = ("train", "sft", "rm", "evaluate", "compare", "TrainResult", "SFTResult", "RMResult",
             "EvalResult", "AuditResult")


def __getattr__(name: str):
    if name in API_NAMES:
        import badpo.api as api

        return getattr(api, name)
    raise AttributeError(f"module 'badpo' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *API_NAMES, "audit"})
