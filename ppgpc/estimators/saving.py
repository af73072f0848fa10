"""``save`` and ``load``: a fitted estimator or ``FitResult`` to a folder and back, without
pickle (netCDF arrays plus JSON; the format is ``ppgpc.io.persistence``'s).

Example:
    >>> import numpy as np, tempfile
    >>> import ppgpc
    >>> X = np.random.default_rng(0).normal(size=(30, 2)); y = (X[:, 0] > 0).astype(int)
    >>> result = ppgpc.fit("ilr_gp", X, y)
    >>> path = ppgpc.save(result, tempfile.mkdtemp() + "/fit")
    >>> bool(np.array_equal(ppgpc.load(path).predict_proba(X), result.predict_proba(X)))
    True
"""

from __future__ import annotations

from pathlib import Path

from ppgpc.estimators import ESTIMATORS
from ppgpc.infer.results import FitResult
from ppgpc.io import persistence

__all__ = ["save", "load"]


def save(fitted, path) -> Path:
    """Save a fitted ppgpc estimator or a ``FitResult`` to the folder ``path`` (created if
    new; an earlier ppgpc save there is replaced, while a file or a folder of other files
    is refused). The save is atomic: interrupted at any moment, or racing another save to
    ``path``, it leaves the earlier save or the new one (``ppgpc.io.persistence``).
    ``estimator.save(path)`` does the same for an estimator.

    Returns:
        The folder written.

    Raises:
        ValueError: ``fitted`` is neither a ``FitResult`` nor one of ppgpc's estimators, or
            holds something that cannot be stored without pickle.
        sklearn.exceptions.NotFittedError: an estimator that is not fitted.
    """
    if isinstance(fitted, FitResult):
        return persistence.save_result(fitted, path)
    return persistence.save_estimator(fitted, path, ESTIMATORS)


def load(path):
    """Load whatever ppgpc saved at ``path``: an estimator or a ``FitResult``; it predicts
    bit for bit what the saved one did.

    Raises:
        FileNotFoundError: no save at ``path``. ValueError: a damaged save, its entry named.
    """
    return persistence.load(path, ESTIMATORS)
