"""What a trained run did: metrics as pure functions (``metrics``, ``mixture``), the analyses of
the names readouts (``names_analyses``: the relabelling null, names removed, cell shares),
model-facing readouts (``model``), the evaluation of a run (``evaluate``, ``run``) and the cure's
maths (``anchoring``)."""
