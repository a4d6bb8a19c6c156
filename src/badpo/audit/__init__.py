"""What the labels say before any training: per-annotator estimates, the annotator graph, flags,
and the report with its plots.

The package is also the Python API's audit: ``badpo.audit(data, attributes, ...)`` calls
:func:`badpo.api.audit` (see there), so that the audit reads as ``badpo.train`` and
``badpo.evaluate`` do although its name is this package's. The API is imported on the first call
only (by name: it sits in the front-door layer above this one), so ``badpo.audit.estimates`` stays
light.
"""

from __future__ import annotations

import importlib
import sys
import types


class _CallablePackage(types.ModuleType):
    """This package, callable as :func:`badpo.api.audit`."""

    def __call__(self, *args, **kwargs):
        return importlib.import_module("badpo.api").audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
