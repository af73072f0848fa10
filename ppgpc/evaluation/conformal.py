"""Split-conformal prediction sets from class probabilities (LAC, APS, RAPS; marginal or
class-conditional).

Given a classifier's probabilities ``p(x)`` on a held-out calibration set
``(x_i, y_i), i = 1..n`` that was not used for fitting, split conformal prediction turns
any probabilities, calibrated or not, into sets ``C(x)`` of labels with

    1 - alpha  <=  P(y in C(x))  <=  1 - alpha + 1 / (n + 1),

the probability taken over the calibration set and a new exchangeable test point. The lower
bound always holds; the upper bound holds when the scores have no ties (continuous
probabilities, or the randomised scores below).

Recipe. A score ``s(x, y)`` says how badly label ``y`` conforms to ``p(x)`` (larger is
worse). With the calibration scores ``s_i = s(x_i, y_i)`` the threshold is the
``k``-th smallest of them, ``k = ceil((n + 1)(1 - alpha))`` (:func:`conformal_quantile`),
and ``C(x) = {y : s(x, y) <= threshold}``. If ``k > n`` the threshold is infinite (every
set would hold every label); that needs ``n >= 1 / alpha - 1`` points and is refused
with an error instead.

Scores (``p_(1) >= p_(2) >= ...`` sorted probabilities of ``x``; ``o(y)`` the 1-based rank
of ``y`` in that order, ties broken by class index; ``u`` a uniform draw on ``[0, 1]``):

* ``"lac"`` (least ambiguous set-valued classifier, Sadinle, Lei and Wasserman 2019):
  ``s = 1 - p_y``. Smallest sets on average; no randomisation.
* ``"aps"`` (adaptive prediction sets, Romano, Sesia and Candes 2020):
  ``s = sum_{j < o(y)} p_(j) + u p_y``, the mass ranked above ``y`` plus a random part
  of ``y``'s own. Sets grow with the model's uncertainty.
* ``"raps"`` (regularised APS, Angelopoulos, Bates, Malik and Jordan 2021): APS plus
  ``penalty * max(0, o(y) - k_reg)``, which discourages labels ranked beyond ``k_reg``.
  Defaults ``penalty = 0.1``, ``k_reg = 1`` (fixed; the paper tunes both on a further
  held-out split, which is not done here). ``penalty = 0`` gives APS.

Randomised or not. With ``randomized=True`` (the default) APS and RAPS draw one ``u`` per
point (shared by all labels of that point) from an explicit generator, which makes the
scores continuous, so coverage lies between the two bounds above. With
``randomized=False``, ``u = 1`` (the whole mass up to and including ``y``): the sets are
deterministic and still cover at least ``1 - alpha``, and with continuous probabilities
also at most ``1 - alpha + 1 / (n + 1)``, but they are larger on average. Either way a set
may be empty (a point whose most probable label alone already scores above the threshold);
forcing the top label in would break the upper bound, so it is not done.

Class-conditional (Mondrian) sets use one threshold per class ``c`` computed from the
calibration points labelled ``c`` (``n_c`` of them); label ``c`` enters ``C(x)`` when
``s(x, c) <= threshold_c``. Then the coverage of every class separately lies between
``1 - alpha`` and ``1 - alpha + 1 / (n_c + 1)`` (Vovk 2012; Sadinle et al. 2019), which the
marginal sets do not promise.

Example:
    >>> import numpy as np
    >>> from ppgpc.evaluation.conformal import calibrate, predict_sets, coverage
    >>> rng = np.random.default_rng(0)
    >>> p = rng.dirichlet(np.ones(4), size=600)
    >>> y = (rng.uniform(size=(600, 1)) > np.cumsum(p, axis=1)).sum(axis=1)
    >>> cal = calibrate(p[:300], y[:300], alpha=0.1, score="aps", rng=1)
    >>> result = predict_sets(cal, p[300:], rng=2)
    >>> result.sets.shape, bool(coverage(result.sets, y[300:]) > 0.8)
    ((300, 4), True)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ppgpc.evaluation.metrics import _validate
from ppgpc.validation import (check_count, check_flag, check_nonnegative, check_probability,
                              check_seed)

__all__ = [
    "SCORES",
    "ConformalCalibration",
    "PredictionSets",
    "class_scores",
    "conformal_quantile",
    "calibrate",
    "predict_sets",
    "coverage",
    "ConformalClassifier",
]

SCORES: tuple[str, ...] = ("lac", "aps", "raps")
"""Accepted values of ``score``."""

_RANK_TOL = 1e-9  # (n + 1)(1 - alpha) within this of an integer counts as that integer


class ConformalCalibration(NamedTuple):
    """Thresholds learnt from a calibration set; :func:`predict_sets` applies them."""

    score: str
    """``"lac"``, ``"aps"`` or ``"raps"``."""
    alpha: float
    """Miscoverage level in (0, 1): sets cover the label with probability >= 1 - alpha."""
    threshold: np.ndarray
    """(C,) threshold of label c's score; all entries equal for marginal sets."""
    n_calibration: np.ndarray
    """(C,) number of calibration scores behind each threshold (n for marginal sets,
    n_c for class-conditional ones)."""
    class_conditional: bool
    """Whether the thresholds are per class (Mondrian) or one for all."""
    randomized: bool
    """Whether APS / RAPS scores draw ``u ~ U(0, 1)`` (else ``u = 1``); False for LAC."""
    penalty: float
    """RAPS penalty lambda (0 for LAC and APS)."""
    k_reg: int
    """RAPS rank from which the penalty counts (ignored unless RAPS)."""


class PredictionSets(NamedTuple):
    """Conformal prediction sets of n points over C labels."""

    sets: np.ndarray
    """(n, C) bool: ``sets[i, c]`` is True when label c is in point i's set."""
    size: np.ndarray
    """(n,) int: the number of labels in each set (0 is possible; see the module notes)."""


# ------------------------------------------------------------------ checks
def _check_probs(probs: ArrayLike) -> np.ndarray:
    """(n, C) float64 probabilities (rows on the simplex), checked as
    ``ppgpc.evaluation.metrics`` does."""
    p = np.asarray(probs, dtype=np.float64)
    return _validate(p, np.zeros(p.shape[0] if p.ndim == 2 else 0, dtype=np.int64))[0]


def _check_score(score: str) -> str:
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES}; got {score!r}")
    return score


def _generator(rng, what: str) -> np.random.Generator:
    """A NumPy Generator from ``rng`` (a Generator or a non-negative integer seed)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        raise ValueError(f"randomized scores need rng for {what}: a numpy Generator or an "
                         "integer seed (or pass randomized=False for deterministic sets)")
    return np.random.default_rng(check_seed(rng))


# ------------------------------------------------------------------ scores
def class_scores(probs: ArrayLike, score: str = "aps", *, u: ArrayLike | None = None,
                 penalty: float = 0.1, k_reg: int = 1) -> np.ndarray:
    """Non-conformity score of every label for every point.

    ``lac``: ``s(x, c) = 1 - p_c``. ``aps``: ``s(x, c) = sum_{j < o(c)} p_(j) + u p_c``.
    ``raps``: the APS score ``+ penalty * max(0, o(c) - k_reg)``. Here ``p_(1) >= p_(2) >=
    ...`` are the sorted probabilities of the point and ``o(c)`` the 1-based rank of label
    ``c`` among them (ties broken by the lower class index first).

    Args:
        probs: (n, C) class probabilities.
        score: ``"lac"``, ``"aps"`` or ``"raps"``.
        u: (n,) uniforms in [0, 1], one per point, shared by its labels; ``None`` means
            ``u = 1`` (deterministic APS / RAPS). Ignored by LAC.
        penalty: RAPS ``lambda >= 0``; ignored unless ``score="raps"``.
        k_reg: RAPS rank (>= 1) from which the penalty counts; ignored unless RAPS.

    Returns:
        (n, C) scores; larger means the label conforms worse.
    """
    p = _check_probs(probs)
    score = _check_score(score)
    n, C = p.shape
    if score == "lac":
        return 1.0 - p
    if u is None:
        u = np.ones(n)
    u = np.asarray(u, dtype=np.float64)
    if u.shape != (n,) or not np.all((u >= 0) & (u <= 1)):
        raise ValueError(f"u must hold n = {n} numbers in [0, 1], shape ({n},); "
                         f"got shape {u.shape}")
    order = np.argsort(-p, axis=1, kind="stable")                       # (n, C) labels by rank
    ranked = np.take_along_axis(p, order, axis=1)                       # (n, C) p_(1..C)
    above = np.cumsum(ranked, axis=1) - ranked                          # sum_{j < o} p_(j)
    above = np.maximum(above, 0.0)                                      # cumsum round-off
    ranked_scores = above + u[:, None] * ranked
    if score == "raps":
        penalty = check_nonnegative("penalty", penalty)
        k_reg = check_count("k_reg", k_reg)
        ranks = np.arange(1, C + 1)                                     # o = 1..C
        ranked_scores = ranked_scores + penalty * np.maximum(0, ranks - k_reg)[None, :]
    scores = np.empty_like(p)
    np.put_along_axis(scores, order, ranked_scores, axis=1)
    return scores


def _quantile_rank(n: int, alpha: float) -> int:
    """``k = ceil((n + 1)(1 - alpha))``, the rank of the conformal threshold among n scores."""
    return math.ceil((n + 1) * (1.0 - alpha) - _RANK_TOL)


def _min_points(alpha: float) -> int:
    """The fewest calibration scores whose conformal threshold is finite (k <= n)."""
    return math.ceil((1.0 - alpha) / alpha - _RANK_TOL)


def conformal_quantile(scores: ArrayLike, alpha: float, *, what: str = "") -> float:
    """The split-conformal threshold: the ``ceil((n + 1)(1 - alpha))``-th smallest score.

    Args:
        scores: (n,) calibration scores.
        alpha: miscoverage level in (0, 1).
        what: words naming the scores in an error (e.g. "class 2").

    Returns:
        The threshold (a float).

    Raises:
        ValueError: alpha outside (0, 1), or too few scores: the rank exceeds n, so the
            threshold would be infinite (fewer than ``1 / alpha - 1`` points).
    """
    alpha = check_probability("alpha", alpha, kind="a miscoverage level")
    s = np.asarray(scores, dtype=np.float64).ravel()
    n = s.size
    k = _quantile_rank(n, alpha)
    if k > n:
        where = f" for {what}" if what else ""
        raise ValueError(
            f"too few calibration points{where}: alpha = {alpha:g} needs at least "
            f"{_min_points(alpha)} (the threshold is the ceil((n + 1)(1 - alpha))-th "
            f"smallest of n scores, which does not exist for n = {n}, so the sets would "
            "hold every label); use more calibration data or a larger alpha")
    return float(np.partition(s, k - 1)[k - 1])


# ------------------------------------------------------------------ calibrate / predict
def calibrate(probs: ArrayLike, y: ArrayLike, alpha: float = 0.1, *, score: str = "aps",
              class_conditional: bool = False, randomized: bool = True, rng=None,
              penalty: float = 0.1, k_reg: int = 1) -> ConformalCalibration:
    """Thresholds for split-conformal sets from held-out calibration probabilities.

    Computes the calibration scores ``s_i = s(x_i, y_i)`` (:func:`class_scores`) and their
    conformal quantile (:func:`conformal_quantile`): one threshold from all ``n`` points,
    or with ``class_conditional=True`` one per class from the ``n_c`` points of that class.

    Args:
        probs: (n, C) probabilities of calibration points not used for fitting.
        y: (n,) labels as indices 0..C-1.
        alpha: miscoverage level in (0, 1).
        score: ``"lac"``, ``"aps"`` or ``"raps"`` (module docstring).
        class_conditional: per-class (Mondrian) thresholds.
        randomized: APS / RAPS draw ``u ~ U(0, 1)`` per point from ``rng``; else ``u = 1``.
        rng: a ``numpy.random.Generator`` or an integer seed; needed when ``randomized``
            and the score is APS or RAPS.
        penalty, k_reg: RAPS's lambda (>= 0) and rank (>= 1).

    Returns:
        A :class:`ConformalCalibration`.

    Raises:
        ValueError: bad probabilities or labels (naming them), alpha outside (0, 1), an
            unknown score, a missing ``rng``, or too few calibration points (in a class)
            for this alpha.
    """
    p, labels = _validate(probs, y)
    score = _check_score(score)
    alpha = check_probability("alpha", alpha, kind="a miscoverage level")
    class_conditional = check_flag("class_conditional", class_conditional)
    randomized = check_flag("randomized", randomized) and score != "lac"
    penalty = check_nonnegative("penalty", penalty) if score == "raps" else 0.0
    k_reg = check_count("k_reg", k_reg)
    n, C = p.shape
    u = _generator(rng, "calibrate").uniform(size=n) if randomized else None
    s = class_scores(p, score, u=u, penalty=penalty, k_reg=k_reg)[np.arange(n), labels]
    if class_conditional:
        counts = np.bincount(labels, minlength=C)
        threshold = np.array([conformal_quantile(s[labels == c], alpha, what=f"class {c} "
                                                 f"({counts[c]} points)") for c in range(C)])
    else:
        counts = np.full(C, n)
        threshold = np.full(C, conformal_quantile(s, alpha))
    return ConformalCalibration(score, alpha, threshold, counts, class_conditional,
                                randomized, penalty, k_reg)


def predict_sets(calibration: ConformalCalibration, probs: ArrayLike, *,
                 rng=None) -> PredictionSets:
    """Conformal prediction sets ``C(x) = {c : s(x, c) <= threshold_c}``.

    Args:
        calibration: from :func:`calibrate`.
        probs: (m, C) probabilities of new points (same classifier, same C).
        rng: a Generator or an integer seed for the test points' ``u``; needed when the
            calibration is randomised (APS / RAPS).

    Returns:
        :class:`PredictionSets` with (m, C) sets and (m,) sizes.
    """
    if not isinstance(calibration, ConformalCalibration):
        raise ValueError("calibration must be the ConformalCalibration that calibrate() "
                         f"returns; got {type(calibration).__name__}")
    p = _check_probs(probs)
    C = calibration.threshold.shape[0]
    if p.shape[1] != C:
        raise ValueError(f"probs has {p.shape[1]} classes but the calibration has {C}")
    u = (_generator(rng, "predict_sets").uniform(size=p.shape[0])
         if calibration.randomized else None)
    s = class_scores(p, calibration.score, u=u, penalty=calibration.penalty,
                     k_reg=calibration.k_reg)
    sets = s <= calibration.threshold[None, :]
    return PredictionSets(sets, sets.sum(axis=1))


def coverage(sets: ArrayLike, y: ArrayLike, *, per_class: bool = False):
    """Fraction of points whose label is in their set.

    Args:
        sets: (n, C) bool prediction sets; y: (n,) labels 0..C-1.
        per_class: return the (C,) coverage among the points of each class instead (NaN
            for a class without points).

    Returns:
        A float, or a (C,) array.
    """
    sets = np.asarray(sets)
    if sets.ndim != 2 or sets.dtype != bool:
        raise ValueError(f"sets must be a (n, C) bool array; got {sets.dtype} {sets.shape}")
    n, C = sets.shape
    labels = np.asarray(y)
    if labels.shape != (n,) or labels.dtype.kind not in "iu" or n == 0:
        raise ValueError(f"y must hold n = {n} integer labels, shape ({n},); got "
                         f"{labels.dtype} {labels.shape}")
    if labels.min() < 0 or labels.max() >= C:
        raise ValueError(f"labels must lie in 0..{C - 1}; got {labels.min()}..{labels.max()}")
    covered = sets[np.arange(n), labels]
    if not per_class:
        return float(covered.mean())
    counts = np.bincount(labels, minlength=C)
    hits = np.bincount(labels, weights=covered.astype(np.float64), minlength=C)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, hits / counts, np.nan)


# ------------------------------------------------------------------ estimator wrapper
class ConformalClassifier:
    """Split-conformal sets around any fitted classifier with ``predict_proba`` and
    ``classes_`` (a ppgpc estimator, a scikit-learn classifier, ...).

    ``calibrate(X_cal, y_cal)`` scores held-out data (not used to fit the estimator);
    ``predict_sets(X)`` returns the sets, whose columns follow ``classes_``. Randomised
    scores draw their uniforms from two streams of ``numpy.random.SeedSequence(seed)``, one
    for calibration and one for prediction, so repeated calls give the same sets.

    Args:
        estimator: a fitted classifier.
        alpha: miscoverage level in (0, 1).
        score: ``"lac"``, ``"aps"`` (default) or ``"raps"``.
        class_conditional: per-class (Mondrian) thresholds.
        randomized: randomised APS / RAPS (module docstring).
        seed: non-negative integer root seed.
        penalty, k_reg: RAPS's lambda and rank.

    Example:
        >>> from ppgpc import ILRGPClassifier
        >>> from ppgpc.evaluation.conformal import ConformalClassifier
        >>> # clf = ILRGPClassifier().fit(X_train, y_train)
        >>> # conf = ConformalClassifier(clf, alpha=0.1).calibrate(X_cal, y_cal)
        >>> # conf.predict_sets(X_test).size   # labels per test point
    """

    def __init__(self, estimator, alpha: float = 0.1, *, score: str = "aps",
                 class_conditional: bool = False, randomized: bool = True, seed: int = 0,
                 penalty: float = 0.1, k_reg: int = 1):
        if not callable(getattr(estimator, "predict_proba", None)):
            raise ValueError("estimator must have a predict_proba method; got "
                             f"{type(estimator).__name__}")
        if getattr(estimator, "classes_", None) is None:
            raise ValueError(f"{type(estimator).__name__} has no classes_: fit it first")
        self.estimator = estimator
        self.alpha = check_probability("alpha", alpha, kind="a miscoverage level")
        self.score = _check_score(score)
        self.class_conditional = check_flag("class_conditional", class_conditional)
        self.randomized = check_flag("randomized", randomized)
        self.seed = check_seed(seed)
        self.penalty = check_nonnegative("penalty", penalty)
        self.k_reg = check_count("k_reg", k_reg)
        self.classes_ = np.asarray(estimator.classes_)
        self.calibration_: ConformalCalibration | None = None

    def _streams(self) -> tuple[np.random.Generator, np.random.Generator]:
        calibration, prediction = np.random.SeedSequence(self.seed).spawn(2)
        return np.random.default_rng(calibration), np.random.default_rng(prediction)

    def _indices(self, y) -> np.ndarray:
        """(n,) indices into ``classes_`` of labels ``y``; unknown labels are an error."""
        index = {c: i for i, c in enumerate(self.classes_.tolist())}
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"labels must be a 1-D array; got shape {y.shape}")
        values = y.tolist()
        unknown = sorted({str(v) for v in values if v not in index})
        if unknown:
            raise ValueError(f"y holds label(s) {unknown[:10]} not among the estimator's "
                             f"classes_ {self.classes_.tolist()}")
        return np.array([index[v] for v in values], dtype=np.int64)

    def calibrate(self, X_cal, y_cal) -> ConformalClassifier:
        """Learn the thresholds from held-out ``(X_cal, y_cal)``; returns self."""
        probs = np.asarray(self.estimator.predict_proba(X_cal), dtype=np.float64)
        labels = self._indices(y_cal)
        if labels.shape[0] != probs.shape[0]:
            raise ValueError(f"X_cal and y_cal disagree on the number of points: "
                             f"{probs.shape[0]} versus {labels.shape[0]}")
        self.calibration_ = calibrate(
            probs, labels, self.alpha, score=self.score,
            class_conditional=self.class_conditional, randomized=self.randomized,
            rng=self._streams()[0], penalty=self.penalty, k_reg=self.k_reg)
        return self

    def predict_sets(self, X) -> PredictionSets:
        """(n, C) sets over ``classes_`` and their (n,) sizes for inputs ``X``."""
        if self.calibration_ is None:
            raise ValueError("call calibrate(X_cal, y_cal) before predict_sets")
        probs = np.asarray(self.estimator.predict_proba(X), dtype=np.float64)
        return predict_sets(self.calibration_, probs, rng=self._streams()[1])

    def coverage(self, X, y, *, per_class: bool = False):
        """Fraction of ``(X, y)`` whose label is in its set (per class with ``per_class``)."""
        return coverage(self.predict_sets(X).sets, self._indices(y), per_class=per_class)
