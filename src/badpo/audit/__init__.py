"""What the labels say before any training: per-annotator estimates, the annotator graph, flags,
and the report with its plots."""
