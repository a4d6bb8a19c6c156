"""What a trained run did: metrics as pure functions (``metrics``, ``mixture``), model-facing
readouts (``model``), the evaluation of a run (``evaluate``, ``run``) and the cure's maths
(``anchoring``)."""
