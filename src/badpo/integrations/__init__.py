"""Adapters that put badpo's bias channel inside other trainers (an edge layer, like the CLI).

``badpo.integrations.trl``: :class:`~badpo.integrations.trl.BADPOTrainer`, TRL's ``DPOTrainer``
with the BA-DPO bias logit (``pip install -e '.[trl]'`` in badpo's clone). Nothing in badpo imports this package.
"""
