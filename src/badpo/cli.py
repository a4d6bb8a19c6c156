"""``badpo <command>``: argv -> config -> one library call. Nothing else lives here.

Each command is a :class:`~badpo.commands.parsing.Command` row (its name, the function that adds
its parser, the function that runs it) in :data:`COMMANDS`; the rows live with their group in
:mod:`badpo.commands` (kept apart so that no file holds every command's options). Modules that
load torch (the engine, :mod:`badpo.evaluation.trained_run`, the experiment pipeline and backend) are imported
inside the function that runs a command or lists its config keys, so ``badpo --help`` does not
load torch. This is the top layer: nothing imports this module, and only it and
:mod:`badpo.commands` reach :mod:`badpo.experiment` (``tests/house/test_layering.py``). The
paper's experiments beside the library (``python -m experiments``) run through :func:`main` with
their own command rows.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import warnings
from collections.abc import Sequence

from badpo.commands.audit import AUDIT
from badpo.commands.build import BUILD, CONVERT_GGUF
from badpo.commands.compare import add_compare, cmd_compare
from badpo.commands.evaluate import EVALUATE
from badpo.commands.experiment import EXPERIMENT
from badpo.commands.parsing import Command, CommandParser, TopParser
from badpo.commands.training import TRAINING

__all__ = ["COMMANDS", "USER_ERRORS", "build_parser", "main"]

# in the order `badpo --help` lists them
COMMANDS: tuple[Command, ...] = (*AUDIT, *BUILD, *EXPERIMENT, *TRAINING, *EVALUATE,
                                 Command("compare", add_compare, cmd_compare), *CONVERT_GGUF)

# What a user can cause (a config key, a data row, a path, a corrupt file, a missing package) and
# what a message can name: shown as one line, exit status 2. Anything else is a bug: a traceback.
USER_ERRORS = (ValueError, OSError, ImportError)
# by name, not imported here: safetensors' own error (not an OSError) for a full disk while a checkpoint
# or a model is written (issue 76's re-trial: a traceback ending "No space left on device (os error 28)")
USER_ERROR_NAMES = ("SafetensorError",)


DESCRIPTION = "Bias-adjusted preference optimization (BA-DPO)."


def build_parser(commands: Sequence[Command] | None = None, prog: str = "badpo",
                 description: str = DESCRIPTION) -> argparse.ArgumentParser:
    """The parser of ``commands`` (None: badpo's own, :data:`COMMANDS`) under the program ``prog``."""
    parser = TopParser(prog=prog, description=description)
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an error instead of one line")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    for command in COMMANDS if commands is None else commands:
        added = command.add(subparsers)
        assert added.prog.split()[-1] == command.name, f"{command.name}: its parser is named {added.prog}"
        if added.get_default("label") is None:  # what an error line names: the command
            added.set_defaults(label=lambda args: args.command)
        added.set_defaults(run=command.run)
        # also after the command (`badpo evaluate RUN --debug`), as every error line suggests it
        added.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                           help="show the full traceback of an error instead of one line")
    return parser


MESSAGE_CHARS = 2000  # an error or warning that echoes a value (a 2 MB YAML scalar) is cut to this


def shortened(message: str, limit: int = MESSAGE_CHARS) -> str:
    """``message`` cut in its middle to ``limit`` characters, saying how many were left out."""
    message = str(message)
    if len(message) <= limit:
        return message
    cut = len(message) - limit
    return f"{message[: limit // 2]} ... [{cut:,} characters cut] ... {message[-limit // 2:]}"


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    return f"badpo: warning: {shortened(message)}\n"


# What a stopped command leaves, said in its one line. A conversion removes its staging folder on
# the way out: "what it had written stays" told a user who stopped one that a half model was kept.
STOPPED = {None: "what it had written stays (a training run resumes from its last checkpoint with "
                 "resume_from=latest)",
           "convert-gguf": "nothing was converted (its staging folder is removed; run it again to convert)",
           "evaluate": "no readouts were written (readouts.json is written whole at the end); run it again",
           "demo": "the runs it finished stay; run it again to go on from there",
           "experiment": "the runs it finished stay; run it again to go on (a stopped training resumes from its "
                         "last checkpoint)",
           "audit": "the report files written so far stay, each whole; run it again with --overwrite",
           "compare": "the files written so far stay, each whole; run it again with --overwrite"}


def wait_passively_when_busy() -> bool:
    """On a machine already busy (a 1-minute load of at least its cores), torch's OpenMP threads that
    spin while they wait for a core cost far more than the machine's share: beside two busy
    processes on two cores the demo's SFT reference took 166 s against 8 s quiet, 19 s when its
    threads wait passively (results/bench/busy_machine.json). Passive waiting costs a quiet machine
    time (the demo 203 s against 115 s), so it is set only when the machine is busy as a command
    starts (before torch loads), and never over the user's own OMP_WAIT_POLICY. True when set."""
    if "OMP_WAIT_POLICY" in os.environ or not hasattr(os, "getloadavg"):
        return False
    if os.getloadavg()[0] < (os.cpu_count() or 1):
        return False
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return True


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a scheduler's stop), raised where the command is, as Ctrl-C is: every
    ``finally`` on the way out runs (locks, staging folders) and the command ends in one line."""


def _terminate(signum, frame):
    raise Terminated


def main(argv: Sequence[str] | None = None, commands: Sequence[Command] | None = None, prog: str = "badpo",
         description: str = DESCRIPTION) -> int:
    """Run one command of ``commands`` (badpo's own; another table for a program built on badpo,
    such as ``python -m experiments``) with badpo's error lines, warnings and signal handling."""
    CommandParser.argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(commands, prog, description).parse_args(argv)
    wait_passively_when_busy()  # before a command loads torch
    if args.debug:
        return args.run(args) or 0
    saved_format, saved_term = warnings.formatwarning, None
    warnings.formatwarning = _one_line_warning
    if threading.current_thread() is threading.main_thread():
        saved_term = signal.signal(signal.SIGTERM, _terminate)
    try:
        return args.run(args) or 0
    except Exception as error:  # what a user can cause is one line; anything else is a bug: a traceback
        if not isinstance(error, USER_ERRORS) and type(error).__name__ not in USER_ERROR_NAMES:
            raise
        message = shortened(str(error).strip() or type(error).__name__)
        print(f"{prog} {args.label(args)}: {message} (--debug for the traceback)", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: what was written stays; no traceback
        how = "terminated (SIGTERM)" if isinstance(stop, Terminated) else "interrupted"
        print(f"\n{prog} {args.label(args)}: {how}; {STOPPED.get(args.command, STOPPED[None])}", file=sys.stderr)
        return 143 if isinstance(stop, Terminated) else 130
    finally:
        warnings.formatwarning = saved_format
        if saved_term is not None:
            signal.signal(signal.SIGTERM, saved_term)


if __name__ == "__main__":
    sys.exit(main())
