"""The commands of ``badpo``, a group to a module, each module a tuple of :class:`~badpo.commands.
parsing.Command` rows that :mod:`badpo.cli` puts in one table.

A command module is the command line's layer (with ``cli.py`` and ``api.py``): it turns argv
into one library call, and only ``paper.py`` here reaches the paper's experiments. A module that
loads torch is imported inside the function that runs the command, so that ``badpo --help`` (and
the help of every command) loads no torch.
"""
