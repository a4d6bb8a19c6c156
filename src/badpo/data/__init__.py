"""Reading users' judgments from any source ``datasets`` reads (``sources``: files, Hub ids,
Datasets, with a column mapping; ``hub``: loading a split). The row itself is
:mod:`badpo.core.judgments`."""
