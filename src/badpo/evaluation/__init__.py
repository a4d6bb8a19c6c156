"""Opening a trained run: ``badpo evaluate RUN_DIR``. The user's evaluation data (``eval_data``), and
the run opened (its files read through :mod:`badpo.run_folder`), its models loaded and every readout of
:data:`badpo.readouts.table.READOUTS` read into ``readouts.json`` (``trained_run``)."""
