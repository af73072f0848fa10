"""A user's own table of data: a CSV file with a column of class labels, numeric feature
columns and, optionally, a column of row identifiers and columns to leave out, read into
what the estimators take (``read_table``, ``read_features``), with one-line errors that name
the column, the row and the value at fault.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = ["Table", "read_table", "read_features", "MIN_ROWS_PER_CLASS"]

MIN_ROWS_PER_CLASS = 2
"""Fewest rows a class needs in a training table (one to fit, one to hold out)."""


class Table(NamedTuple):
    """A table read from a CSV file."""

    X: object
    """(n, D) features: a pandas DataFrame of float64 with the file's column names."""
    y: np.ndarray | None
    """(n,) labels as they are in the file (strings, or numbers when every label is a
    number); None for a table to predict on (``read_features``)."""
    ids: object = None
    """(n,) the row identifiers (a pandas Series named after their column, values as in
    the file), or None without an id column."""


def _read_csv(path):
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not a CSV table: {' '.join(str(err).split())}") from None
    if frame.shape[0] == 0:
        raise ValueError(f"{path} has a header and no rows")
    return frame


def _check_columns(frame, path, names, what: str) -> list[str]:
    """``names`` as a list, each a column of ``frame`` (else a ValueError listing them)."""
    names = [str(n) for n in names]
    absent = [n for n in names if n not in frame.columns]
    if absent:
        raise ValueError(f"{path} has no {what} column(s) {absent}; its columns: "
                         f"{list(frame.columns)}")
    return names


def _split_columns(frame, path, target, id_column, drop) -> list[str]:
    """The feature columns: every column but ``target``, ``id_column`` and ``drop``, each
    of which must be a column, and none of which may be another's."""
    keep_out = [target]
    if id_column is not None:
        (id_column,) = _check_columns(frame, path, [id_column], "id")
        if id_column in keep_out:
            raise ValueError(f"{path}: the id column {id_column!r} is the label column")
        keep_out.append(id_column)
    if isinstance(drop, str):
        drop = [drop]
    dropped = _check_columns(frame, path, drop or (), "dropped")
    clash = [c for c in dropped if c in keep_out]
    if clash:
        raise ValueError(f"{path}: column {clash[0]!r} is dropped and is also the "
                         f"{'label' if clash[0] == target else 'id'} column")
    return [c for c in frame.columns if c not in keep_out and c not in dropped]


def _ids(frame, id_column):
    return None if id_column is None else frame[str(id_column)].copy()


def _numeric(frame, path, columns) -> object:
    """``frame[columns]`` as float64, or a ValueError naming the first non-numeric or missing
    cell (its column, row and value; rows counted as in the file, the header being row 1)."""
    import pandas as pd

    X = frame[columns].apply(pd.to_numeric, errors="coerce").astype(np.float64)
    for column in columns:
        bad = np.flatnonzero(~np.isfinite(X[column].to_numpy()))
        if bad.size:
            row = int(bad[0])
            value = frame[column].iloc[row]
            if pd.isna(value):
                raise ValueError(f"{path}: feature column {column!r} must be numeric: row "
                                 f"{row + 2} is missing ({bad.size} such row(s))")
            raise ValueError(f"{path}: feature column {column!r} must be numeric: row "
                             f"{row + 2} is {str(value)!r}, not a number ({bad.size} such "
                             f"row(s)); leave the column out (ppgpc: --drop {column}) or "
                             "encode it as numbers, e.g. one 0/1 column per category")
    return X


def read_table(path, target: str, *, id_column: str | None = None, drop=()) -> Table:
    """Read a training table: the column ``target`` holds the class labels, the column
    ``id_column`` (if given) identifies the rows, the columns ``drop`` are left out, and
    every other column is a numeric feature.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: not a CSV table; no column ``target``, ``id_column`` or one of ``drop``
            (the columns are listed); the id or a dropped column is the label column; a
            feature column with a non-numeric or missing value (column, row, value, and
            how to leave it out); a missing label; fewer than two classes, or a class with
            fewer than ``MIN_ROWS_PER_CLASS`` rows; no feature column.
    """
    frame = _read_csv(path)
    frame.columns = [str(c) for c in frame.columns]
    target = str(target)
    if target not in frame.columns:
        raise ValueError(f"{path} has no column {target!r} for the labels; its columns: "
                         f"{list(frame.columns)}")
    features = _split_columns(frame, path, target, id_column, drop)
    if not features:
        raise ValueError(f"{path} has no feature column besides {target!r} and the "
                         "columns left out")
    labels = frame[target]
    missing = np.flatnonzero(labels.isna().to_numpy())
    if missing.size:
        raise ValueError(f"{path}: label column {target!r} is empty in row {missing[0] + 2} "
                         f"({missing.size} such row(s))")
    X = _numeric(frame, path, features)
    y = labels.to_numpy()
    values, counts = np.unique(y.astype(str), return_counts=True)
    if values.size < 2:
        raise ValueError(f"{path}: column {target!r} holds one class ({str(values[0])!r}); a "
                         "classifier needs at least two")
    few = [(str(v), int(c)) for v, c in zip(values, counts) if c < MIN_ROWS_PER_CLASS]
    if few:
        raise ValueError(f"{path}: every class needs at least {MIN_ROWS_PER_CLASS} rows; "
                         + ", ".join(f"{v!r} has {c}" for v, c in few))
    return Table(X, y, _ids(frame, id_column))


def read_features(path, columns, *, id_column: str | None = None) -> Table:
    """Read the feature columns ``columns`` (the names a model was fitted on) of a table to
    predict on, in that order, and its id column ``id_column`` if given; other columns (a
    label column, say) are ignored.

    Returns:
        A ``Table`` with ``y`` None.

    Raises:
        FileNotFoundError: no file at ``path``. ValueError: a column is missing (named), or
            holds a non-numeric or missing value (column, row, value).
    """
    frame = _read_csv(path)
    columns = [str(c) for c in columns]
    frame.columns = [str(c) for c in frame.columns]
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        raise ValueError(f"{path} lacks the feature column(s) {absent} that the model was "
                         f"fitted on; its columns: {list(frame.columns)}")
    if id_column is not None:
        _check_columns(frame, path, [id_column], "id")
    return Table(_numeric(frame, path, columns), None, _ids(frame, id_column))
