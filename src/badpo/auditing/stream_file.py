"""``badpo audit DATA --stream STATE``: read an append-only JSONL file from where the last run
stopped, update the streaming audit (:mod:`badpo.auditing.stream`), save its state, print the flags.

The state file is JSON (never a pickle; nothing in it is imported or run: the attribute specs it
records are only compared with the ones given on the command line). Beside the audit's counts it
holds where the file was read to: the byte offset and line number after the last complete line,
and the SHA-256 of every byte before that offset. A run checks that digest against the file before
reading on, so a state is refused, in one line naming it, when the file is another one, was
truncated or had a consumed line changed; a state of another configuration (attributes, alpha,
pool size) is refused the same way.

Only lines that end with a newline are read: a line still being written is left for the next run.
An invalid row stops the run with one line naming the file, line, row and field; the judgments
before it are kept in the state (lines after the state's offset may be fixed in place, since the
digest covers only what was read).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from badpo.auditing.stream import STATE_FORMAT, StreamAudit
from badpo.core.jsonio import atomic_write_text
from badpo.core.judgments import JudgmentError, parse_jsonl_line, validate_labelled

__all__ = ["FileStream", "follow_stream", "format_flags", "format_stream", "one_reader", "open_stream", "read_on",
           "run_stream"]

_CHUNK = 1 << 20  # bytes read (and hashed) at a time
_BATCH = 5000  # lines validated and taken in at a time
_SHOWN = 20  # flagged annotators listed per attribute in the printed table


class FileStream:
    """A JSONL file read from a byte offset, with the digest of everything before it."""

    def __init__(self, path: str | Path, offset: int = 0, lines: int = 0, rows: int = 0, digest: Any = None):
        self.path, self.offset, self.lines, self.rows = Path(path), offset, lines, rows
        self.digest = digest if digest is not None else hashlib.sha256()

    @classmethod
    def resume(cls, path: str | Path, source: dict[str, Any], state_path: str | Path) -> FileStream:
        """The file ``path`` at the place ``source`` (a state's ``source``) records, once its first
        ``offset`` bytes are checked against the recorded digest."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no judgment file at {str(path)!r}")
        try:
            offset, lines, rows = int(source["offset"]), int(source["lines"]), int(source["rows"])
            expected = str(source["sha256"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{state_path}: its 'source' is not an offset, line and row counts and a sha256") from None
        if min(offset, lines, rows) < 0:
            raise ValueError(f"{state_path}: its 'source' has a negative offset, line or row count "
                             f"({offset}, {lines}, {rows}); the state is damaged: use a new state file")
        size = path.stat().st_size
        if size < offset:
            raise ValueError(f"{state_path}: belongs to another stream: {path} has {size} bytes, fewer than the "
                             f"{offset} it read from {source.get('path')!r} (truncated or replaced?)")
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            left = offset
            while left:
                chunk = handle.read(min(_CHUNK, left))
                digest.update(chunk)
                left -= len(chunk)
        if digest.hexdigest() != expected:
            raise ValueError(f"{state_path}: belongs to another stream: the first {offset} bytes of {path} differ "
                             f"from those it read from {source.get('path')!r}; use a new state file for this one")
        return cls(path, offset, lines, rows, digest)

    def source(self) -> dict[str, Any]:
        return {"path": str(self.path), "offset": self.offset, "lines": self.lines, "rows": self.rows,
                "sha256": self.digest.hexdigest()}

    def batches(self, first_row: int) -> Iterator[list[tuple[bytes, tuple[tuple, Any] | None]]]:
        """Runs of up to _BATCH newline-ended lines after the place: (the line's bytes, its row
        labelled for :func:`badpo.core.judgments.validate_labelled` from row ``first_row``, or None
        for a blank line). A line that is not JSON ends the reading after the lines before it were
        handed out. The place does not move until :meth:`commit`."""
        batch: list[tuple[bytes, tuple[tuple, Any] | None]] = []
        pending, number, index = b"", self.lines, first_row
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            while chunk := handle.read(_CHUNK):
                *complete, pending = (pending + chunk).split(b"\n")
                for raw in complete:
                    number += 1
                    try:
                        row = parse_jsonl_line(raw, self.path, number, index)
                    except JudgmentError:
                        if batch:
                            yield batch
                        raise
                    batch.append((raw + b"\n", None if row is None else ((index, number, str(self.path)), row)))
                    index += row is not None
                    if len(batch) >= _BATCH:
                        yield batch
                        batch = []
        if batch:
            yield batch

    def commit(self, lines: list[tuple[bytes, Any]]) -> None:
        """Move the place past ``lines`` (from :meth:`batches`), which were taken in."""
        for raw, row in lines:
            self.offset += len(raw)
            self.lines += 1
            self.rows += row is not None
            self.digest.update(raw)

    def incomplete(self) -> int:
        """Bytes after the last newline: a line still being written, read by a later run."""
        return self.path.stat().st_size - self.offset


def _load_state(state_path: Path) -> dict[str, Any] | None:
    if not state_path.exists():
        return None
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"{state_path}: not a badpo stream-audit state (not valid JSON: {error})") from None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT or not isinstance(state.get("source"), dict):
        raise ValueError(f"{state_path}: not a badpo stream-audit state (no format {STATE_FORMAT!r} with a source)")
    return state


def _save(audit: StreamAudit, stream: FileStream, state_path: Path) -> None:
    state = audit.to_state() | {"source": stream.source()}
    atomic_write_text(state_path, json.dumps(state, separators=(",", ":"), allow_nan=False) + "\n")


def open_stream(data: str | Path, state_path: str | Path, specs: list[str], alpha: float,
                pool_size: int) -> tuple[StreamAudit, FileStream]:
    """The audit and the file, resumed from ``state_path`` when it exists, else new."""
    state_path = Path(state_path)
    if Path(data).suffix != ".jsonl":
        raise ValueError(f"{data}: --stream reads a .jsonl file (one judgment per line, appended to as labels arrive)")
    audit = StreamAudit(specs, alpha, pool_size)  # a bad spec or level fails before any file is read
    state = _load_state(state_path)
    if state is None:
        if not Path(data).is_file():
            raise FileNotFoundError(f"no judgment file at {str(data)!r}")
        return audit, FileStream(data)
    audit.load_state(state, str(state_path))
    stream = FileStream.resume(data, state["source"], state_path)
    if stream.rows != audit.judgments:
        raise ValueError(f"{state_path}: not a consistent state: {audit.judgments} judgments counted, "
                         f"{stream.rows} rows read")
    return audit, stream


def read_on(audit: StreamAudit, stream: FileStream, state_path: str | Path) -> list[dict[str, Any]]:
    """Take in every complete line the file has after the place, a batch at a time, and save the
    state; an invalid row raises after the rows before it were taken in and saved."""
    raised: list[dict[str, Any]] = []
    try:
        for batch in stream.batches(audit.judgments):
            try:
                raised += _take_in(audit, batch)
            except JudgmentError as error:
                cut = next((i for i, (_, row) in enumerate(batch) if row is not None and row[0][0] == error.row), 0)
                before = batch[:cut]  # the lines before the bad row's (none when the error names no row)
                raised += _take_in(audit, before)
                stream.commit(before)
                raise
            stream.commit(batch)
    finally:
        # the state is written only where the audit has taken in exactly the rows before the place: not
        # for a new stream that read nothing, nor when an interrupt stopped it inside a batch
        if stream.offset and audit.judgments == stream.rows:
            _save(audit, stream, Path(state_path))
    return raised


def _take_in(audit: StreamAudit, lines: list[tuple[bytes, tuple[tuple, Any] | None]]) -> list[dict[str, Any]]:
    labelled = [row for _, row in lines if row is not None]
    judgments = validate_labelled(labelled)  # the whole batch is checked before any of it is counted
    return audit.observe_judgments(judgments, [label for label, _ in labelled])


@contextlib.contextmanager
def one_reader(state_path: str | Path) -> Iterator[None]:
    """Hold ``STATE.lock`` (an ``flock``, released by the kernel if the process dies) while a run
    reads the stream: a second reader of the same state would count the appended lines twice, or
    save over the first's state; it is refused in one line."""
    lock = Path(f"{state_path}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"{state_path}: another badpo audit --stream is reading this state now; "
                             "wait for it (or stop its --follow), one reader at a time") from None
        yield


def run_stream(data: str | Path, state_path: str | Path, specs: list[str], alpha: float = 0.05,
               pool_size: int = 100) -> tuple[StreamAudit, str]:
    """One pass: resume (or start), read what was appended, save the state; returns the audit and
    the text ``badpo audit --stream`` prints. One reader of a state at a time (:func:`one_reader`)."""
    with one_reader(state_path):
        audit, stream = open_stream(data, state_path, specs, alpha, pool_size)
        before = audit.judgments
        raised = read_on(audit, stream, state_path)
    return audit, format_stream(audit, stream, state_path, before, raised)


def follow_stream(data: str | Path, state_path: str | Path, specs: list[str], alpha: float, pool_size: int,
                  every: float, say: Callable[[str], None], polls: int | None = None) -> StreamAudit:
    """Read on every ``every`` seconds (``polls`` times, or until interrupted), saying each new flag
    as it is raised; the state is saved after each read. The state is held for the whole follow."""
    with one_reader(state_path):
        audit, stream = open_stream(data, state_path, specs, alpha, pool_size)
        say(f"following {data} from judgment {audit.judgments + 1} (state {state_path}); Ctrl-C to stop")
        done = 0
        while polls is None or done < polls:
            for flag in read_on(audit, stream, state_path):
                say(format_flags([flag]))
            done += 1
            if polls is None or done < polls:
                time.sleep(every)
    return audit


def format_flags(flags: list[dict[str, Any]]) -> str:
    """One line per flag: who, on which attribute, at which judgment of the stream."""
    return "\n".join(f"flag: {f['annotator']} on {f['attribute']} at judgment {f['judgment']} "
                     f"(after {f['cross']} of their cross-group votes)" for f in flags)


def _interval(low: float | None, high: float | None) -> str:
    shown = ["-inf" if low is None else f"{low:+.2f}", "+inf" if high is None else f"{high:+.2f}"]
    return f"[{shown[0]}, {shown[1]}]"


def format_stream(audit: StreamAudit, stream: FileStream, state_path: str | Path, before: int,
                  raised: list[dict[str, Any]]) -> str:
    """The printed summary: what was read, the test's level, per attribute the pool's level and
    the flagged annotators (the first few), and the flags raised by this run."""
    table = audit.table()
    left = stream.incomplete()
    lines = [f"badpo stream audit of {stream.path}: read judgments {before + 1}..{audit.judgments} now "
             f"({audit.judgments} in all, {audit.cross} cross-group, {audit.duplicates} repeats of a pair "
             f"skipped), {table['annotators']} annotators; state saved to {state_path}"
             if audit.judgments > before else
             f"badpo stream audit of {stream.path}: nothing new after judgment {audit.judgments}; "
             f"{table['annotators']} annotators; state {state_path}"]
    if left:
        lines.append(f"{left} bytes after the last complete line are left for the next run")
    lines.append(f"test: anytime-valid (beta-mixture confidence sequences), any false flag in a pool of up to "
                 f"{audit.pool_size} annotators with probability <= {audit.alpha:g}; each side at level "
                 f"{audit.level:.2e}")
    if table["family_note"]:
        lines.append(f"note: {table['family_note']}")
    for attribute in table["attributes"]:
        pool = attribute["pool"]
        level = "-" if pool["estimate"] is None else f"{pool['estimate']:+.2f}"
        lines += ["", f"{attribute['name']}: pool log-odds {level} over {pool['cross']} cross-group pairs "
                      f"(one vote each); {attribute['flagged']} annotator(s) flagged"]
        flagged = [r for r in attribute["annotators"] if r["flagged"]]
        if flagged:
            lines.append(f"  {'annotator':<16} {'cross':>6} {'log-odds':>8}  {'anytime interval':<17} "
                         f"{'pool (without them)':<19} flagged at judgment")
        for r in flagged[:_SHOWN]:
            estimate = "-" if r["estimate"] is None else f"{r['estimate']:+.2f}"
            lines.append(f"  {r['annotator']:<16} {r['cross']:>6} {estimate:>8}  {_interval(r['low'], r['high']):<17} "
                         f"{_interval(r['pool_low'], r['pool_high']):<19} {r['flagged_at_judgment']} "
                         f"({r['flagged_at_cross']} votes)")
        if len(flagged) > _SHOWN:
            lines.append(f"  ... and {len(flagged) - _SHOWN} more (--json OUT lists them all)")
    lines += ["", f"new flags this run: {len(raised)}" + (":" if raised else "")]
    if raised:
        lines.append(format_flags(raised))
    return "\n".join(lines) + "\n"
