"""The training engine: one loop (``loop``) and the stages that plug into it (``preference``,
``reward``, ``mixture``, ``sft``), with batches, tokenization, chunked log-probs, the reference
cache, checkpoints and run folders.

Import the stage functions from their modules (``badpo.engine.train.train``,
``badpo.engine.sft.sft``); this package imports nothing heavy on its own.
"""
