"""The run folder: the contract between training and reading, in one layer below the engine.

``layout`` holds the name of every file a run folder holds and what they say (a run, a finished
run, a model); ``identity`` what makes a folder this run's; ``ownership`` the lock, the claim and
what ``overwrite`` may delete; ``final_commit`` the final outputs put in place as one unit;
``external`` the record of a run BADPOTrainer saved; ``saved`` a run folder read as files (no
model loaded); ``paths`` its paths checked before a model loads. Training (the engine, the TRL
trainer) writes through it; ``badpo evaluate``, ``compare`` and the paper read through it."""
