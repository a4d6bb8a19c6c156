"""What the labels say before any training: per-annotator estimates, the annotator graph, flags,
and the report with its plots. The Python API's ``badpo.audit(data, attributes, ...)``
(:func:`badpo.api.audit`) and ``badpo audit`` run it; this layer imports nothing above it."""
