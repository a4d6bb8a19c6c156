"""The readouts of one policy: what a readout is (``reading``: a row) and the table of rows
(``table``: :data:`~badpo.readouts.table.READOUTS`, one module a row under ``rows/``), how a row is
compared across runs (``compared``), the metrics as pure functions (``metrics``,
``mixture_metrics``), the numbers a model gives them (``model``, ``names_scoring``), the names
analyses (``names_analyses``), the loop over the table (``evaluate_policy``) and EM-DPO's type
policies read through it (``mixture_reading``, the one adapter). Opening a trained
run is :mod:`badpo.evaluation`; comparing runs is :mod:`badpo.comparing`."""
