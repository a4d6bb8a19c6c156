"""The columns a source must have, checked before any row is read: a column mapped to a field
(``columns.FIELD=COLUMN``, ``--column FIELD=COLUMN``) exists, and every required field has a column,
each error naming the source, its columns and how to map one."""

from __future__ import annotations

from badpo.core.config import ConfigError

__all__ = ["check_mapped_columns", "check_required_columns"]


def check_mapped_columns(renames: dict[str, str], present: list | None, origin: str) -> None:
    """Every mapped column ({column: field}) is one of the source's (``present``; None: unknown)."""
    if present is None:
        return
    for column, name in renames.items():
        if column not in present:
            raise ConfigError(f"columns.{name}: {origin} has no column {column!r}; it has {present}")


def check_required_columns(renames: dict[str, str], required: tuple[str, ...], present: list | None,
                           origin: str) -> None:
    """A field that no column holds is named with the columns the source has, and how to map one:
    not blamed on its first row. A source without any column (an empty file) is left to say so."""
    if not present:
        return
    mapped = {field: column for column, field in renames.items()}
    for field in required:
        if mapped.get(field, field) not in present:
            raise ConfigError(f"{origin}: no column holds the field {field!r}; its columns are {present}; "
                              f"name the one that does with --column {field}=COLUMN (badpo audit, badpo "
                              f"evaluate) or columns.{field}=COLUMN (badpo train, a config)")
