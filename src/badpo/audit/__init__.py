"""What the labels say before any training: per-annotator estimates, the annotator graph, flags,
and the report with its plots.

The package is also the Python API's audit: ``badpo.audit(data, attributes, ...)`` calls
:func:`badpo.api.audit` (see there), so that the audit reads as ``badpo.train`` and
``badpo.evaluate`` do although its name is this package's (a package and a function cannot share
the name ``badpo.audit``). The call imports the API inside it, the one edge from a library layer to
the front door, which ``tests/house/test_layering.py`` names as such; ``badpo.audit.estimates``
stays light.
"""

from __future__ import annotations

import sys
import types


class _CallablePackage(types.ModuleType):
    """This package, callable as :func:`badpo.api.audit`."""

    def __call__(self, *args, **kwargs):
        import badpo.api as api  # the front door, above this layer: only when called

        return api.audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
