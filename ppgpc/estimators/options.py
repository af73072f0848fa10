"""The option objects and checks the estimators share.

* ``Inference`` and its per-estimator members (``ConjugateInference``, ``SVGPInference``,
  ``LogisticSoftmaxInference``): an estimator's ``inference`` setting, parsed once into
  a member that knows its driver method.
* ``Selection``: how ``ILRGPClassifier`` chooses epsilon and ``DirichletGPClassifier``
  chooses alpha_eps (the grid and the validation scheme), one frozen object.
* ``check_minibatch_options``: the ``inference_options`` keys every minibatch method reads
  (SVGP's ``"svi"``, the logistic-softmax GP's stochastic ``"cavi"``), checked in one place.
* ``hold_out``: the stratified validation split of ``validation_fraction``.
"""

from __future__ import annotations

import dataclasses
import enum
import math

import numpy as np

from ppgpc.datasets import train_validation_split
from ppgpc.validation import check_count, check_positive

__all__ = ["Selection", "MINIBATCH_KEYS", "check_minibatch_options", "hold_out",
           "VALIDATIONS", "Inference", "ConjugateInference", "SVGPInference",
           "LogisticSoftmaxInference"]


class Inference(enum.StrEnum):
    """An estimator's ``inference`` setting, parsed once (``GPClassifierBase._inference``).

    Each estimator has its own members (a subclass); a member equals its string, so
    ``ILRGPClassifier(inference="collapsed")`` and ``inference=ConjugateInference.COLLAPSED``
    are the same setting and save the same way.
    """

    @property
    def method(self) -> str:
        """The driver method that runs it (``ppgpc.infer.fit``'s ``method``)."""
        return self.value


class ConjugateInference(Inference):
    """``ILRGPClassifier`` and ``DirichletGPClassifier``: ``"map"`` type-II MAP and the
    closed-form posterior, ``"exact"`` type-II ML, ``"nuts"`` NUTS, ``"collapsed"``
    Titsias's collapsed sparse bound (the model's ``_sparse`` variant) by type-II ML."""

    MAP = "map"
    EXACT = "exact"
    NUTS = "nuts"
    COLLAPSED = "collapsed"

    @property
    def method(self) -> str:
        return "exact" if self is ConjugateInference.COLLAPSED else self.value


class SVGPInference(Inference):
    """``SoftmaxSVGPClassifier``: ``"svi"`` on the sparse model, ``"nuts"`` on the full GP."""

    SVI = "svi"
    NUTS = "nuts"


class LogisticSoftmaxInference(Inference):
    """``LogisticSoftmaxGPClassifier``: ``"nuts"`` on the latent model, ``"gibbs"`` and
    ``"cavi"`` on the Polya-Gamma augmented one."""

    NUTS = "nuts"
    GIBBS = "gibbs"
    CAVI = "cavi"

VALIDATIONS = ("loo", "cv", "holdout")
"""The validation schemes of a smoothing search (``Selection.validation``)."""


@dataclasses.dataclass(frozen=True)
class Selection:
    """How a smoothing level (ILR-GP's epsilon, GPD's alpha_eps) is chosen when the
    estimator's option is ``"auto"``: the candidate values and how each is scored by
    held-out negative log-likelihood.

    Attributes:
        grid: the candidate values (None: the model's grid, ``ppgpc.models.ilr_gp.
            EPSILON_GRID`` or ``ppgpc.models.dirichlet_gp.ALPHA_EPS_GRID``).
        validation: ``"loo"`` (default): one fit on all the data per value (ILR-GP: per
            tau), scored by its closed-form leave-one-out predictive (``ppgpc.infer.loo``);
            a collapsed sparse fit has no closed form and is cross-validated instead.
            ``"cv"``: stratified ``cv_folds``-fold cross-validation, a refit per fold and
            value. ``"holdout"``: one stratified split of ``validation_fraction``.
        cv_folds: folds of ``"cv"`` (>= 2).
        validation_fraction: the held-out share of ``"holdout"``, in (0, 1).

    Example:
        >>> from ppgpc import ILRGPClassifier, Selection
        >>> clf = ILRGPClassifier(selection=Selection(grid=(0.9, 0.99), validation="cv"))
        >>> clf.selection.grid
        (0.9, 0.99)
    """

    grid: tuple | None = None
    validation: str = "loo"
    cv_folds: int = 5
    validation_fraction: float = 0.1

    def __post_init__(self):
        if self.grid is not None:
            try:
                grid = tuple(float(v) for v in self.grid)
            except (TypeError, ValueError):
                raise ValueError(f"Selection.grid must be numbers, got {self.grid!r}") from None
            if not grid:
                raise ValueError("Selection.grid is empty")
            if not all(math.isfinite(v) for v in grid):
                raise ValueError(f"Selection.grid must be finite numbers, got {grid}")
            object.__setattr__(self, "grid", grid)
        if self.validation not in VALIDATIONS:
            raise ValueError(f"Selection.validation must be one of {list(VALIDATIONS)}, got "
                             f"{self.validation!r}")
        folds = check_count("Selection.cv_folds", self.cv_folds)
        if folds < 2:
            raise ValueError(f"Selection.cv_folds must be an integer >= 2, got {folds}")
        fraction = self.validation_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) \
                or not 0 < fraction < 1:
            raise ValueError("Selection.validation_fraction must be a fraction in (0, 1), "
                             f"got {fraction!r}")

    def to_dict(self) -> dict:
        """The fields as a dict (how a save stores a Selection)."""
        return dataclasses.asdict(self)


def as_selection(value) -> Selection:
    """An estimator's ``selection`` option as a ``Selection`` (None: the defaults)."""
    if value is None:
        return Selection()
    if not isinstance(value, Selection):
        raise ValueError(f"selection must be a ppgpc.Selection or None, got {value!r}")
    return value


MINIBATCH_KEYS = ("batch_size", "max_iter", "learning_rate", "validation_fraction")
"""The ``inference_options`` every minibatch method reads, with the same meaning: the
minibatch size B, the number of steps (iterations), the optimiser's (peak) learning rate,
and the share of training points held out for validation."""


def check_minibatch_options(options: dict, num_samples: int | None = None) -> dict:
    """The minibatch keys of ``inference_options`` (``MINIBATCH_KEYS``), checked.

    Args:
        options: an estimator's ``inference_options`` (other keys pass through unchecked:
            the driver checks them).
        num_samples: N, when known: ``batch_size`` must then be at most N.

    Returns:
        ``options`` with ``validation_fraction`` removed (the estimator holds the points
        out itself; the driver never sees the key).

    Raises:
        ValueError: a key that is not what it should be, named.
    """
    options = dict(options)
    if options.get("batch_size") is not None:
        batch = check_count("batch_size", options["batch_size"])
        if num_samples is not None and batch > num_samples:
            raise ValueError(f"batch_size must be at most N = {num_samples}, got {batch}")
    if options.get("max_iter") is not None:
        check_count("max_iter", options["max_iter"])
    if options.get("learning_rate") is not None:
        check_positive("learning_rate", options["learning_rate"])
    fraction = options.pop("validation_fraction", None)
    if fraction is not None and (isinstance(fraction, bool)
                                 or not isinstance(fraction, (int, float))
                                 or not 0 < fraction <= 0.5):
        raise ValueError("validation_fraction must be None or a fraction in (0, 0.5], "
                         f"got {fraction!r}")
    if fraction is not None and options.get("validation_data") is not None:
        raise ValueError("give validation_fraction or inference_options['validation_data'], "
                         "not both")
    return options


def hold_out(X: np.ndarray, y: np.ndarray, fraction, seed: int):
    """(X_fit, y_fit, (X_val, y_val) or None): a stratified, seeded share ``fraction`` of
    the points held out (``train_validation_split``); None holds out nothing."""
    if fraction is None:
        return X, y, None
    split = train_validation_split(X, y, seed=seed, val_fraction=float(fraction))
    if split.X_train.shape[0] < 2:
        raise ValueError(f"validation_fraction={fraction} leaves {split.X_train.shape[0]} "
                         "training point(s); use a smaller fraction or None")
    return split.X_train, split.y_train, (split.X_val, split.y_val)
