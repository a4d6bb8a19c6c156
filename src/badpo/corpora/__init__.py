"""Building worlds: the tiny signed and length-and-format worlds, Signed-UltraFeedback and
MultiPref, on one signing and annotator protocol (``signing``); ``builders`` names them."""
