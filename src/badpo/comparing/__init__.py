"""Comparing runs: ``badpo compare`` and the tables over seeds. The bootstrap intervals and the one
removal function (``intervals``, ``over_seeds``), the floor under a verdict (``floor``), the
comparison and its verdict (``comparison``), what compare refuses (``refusals``), its plots
(``plots``) and the command's body (``compare_runs``)."""
