"""The training engine: tokenization, chunked log-probs, reference cache, SFT and preference stages.

Import the stage functions from their modules (``badpo.engine.train.train``,
``badpo.engine.sft.sft``); this package imports nothing heavy on its own.
"""
