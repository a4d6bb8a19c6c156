"""Opening a trained run: ``badpo evaluate RUN_DIR``. A run folder's saved files read as files
(``saved_run``), its paths checked before a model loads (``run_paths``), the user's evaluation data
(``eval_data``), and the run opened, its models loaded and every readout of
:data:`badpo.readouts.table.READOUTS` read into ``readouts.json`` (``trained_run``)."""
