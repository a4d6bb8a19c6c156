"""The cure (the paper's anchoring section): the analysis of a sweep's readouts and its stages."""
