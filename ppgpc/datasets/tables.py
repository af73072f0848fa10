"""A user's own table of data: a CSV file with a column of class labels and numeric feature
columns, read into what the estimators take (``read_table``), with one-line errors that name
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
    """A training table: features X (a pandas DataFrame, n x D, float64, named columns)
    and labels y (n,), as they are in the file (strings, or numbers when every label is a
    number)."""

    X: object
    y: np.ndarray


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
            what = "is missing" if pd.isna(value) else f"is {str(value)!r}, not a number"
            raise ValueError(f"{path}: feature column {column!r} must be numeric: row "
                             f"{row + 2} {what} ({bad.size} such row(s))")
    return X


def read_table(path, target: str) -> Table:
    """Read a training table: the column ``target`` holds the class labels, every other
    column is a numeric feature.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: not a CSV table; no column ``target`` (the columns are listed); a
            feature column with a non-numeric or missing value (column, row, value); a
            missing label; fewer than two classes, or a class with fewer than
            ``MIN_ROWS_PER_CLASS`` rows; no feature column.
    """
    frame = _read_csv(path)
    if target not in frame.columns:
        raise ValueError(f"{path} has no column {target!r} for the labels; its columns: "
                         f"{[str(c) for c in frame.columns]}")
    features = [c for c in frame.columns if c != target]
    if not features:
        raise ValueError(f"{path} has no feature column besides {target!r}")
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
    return Table(X, y)


def read_features(path, columns) -> object:
    """Read the feature columns ``columns`` (the names a model was fitted on) of a table to
    predict on, in that order; other columns (a label column, say) are ignored.

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
    return _numeric(frame, path, columns)
