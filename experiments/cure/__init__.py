"""The cure (the paper's anchoring section): its config, its steps (analysis), calibration,
plan and table, and the backend that trains and reads out its runs."""
