"""What the labels say before any training: per-annotator estimates, the annotator graph, flags,
and the report with its plots.

The package is also callable as the Python API's audit, ``badpo.audit(data, attributes, ...)``
(:func:`badpo.api.audit`), so that the audit reads as ``badpo.train`` and ``badpo.evaluate`` do
although its name is this package's (a package and a function cannot share the name
``badpo.audit``). The package root, a front door, makes it callable when ``badpo`` is imported
(``badpo/__init__.py``): nothing here imports upward, and ``badpo.audit.estimates`` stays light.
"""
