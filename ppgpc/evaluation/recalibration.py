"""Post-hoc recalibration baselines: temperature scaling and Dirichlet calibration.

Both learn a map from a classifier's probabilities ``p`` to new probabilities ``q`` on a
held-out calibration set ``(p_i, y_i), i = 1..n`` by minimising the mean negative
log-likelihood, and apply it to any probabilities of the same classifier. With
``z = log p`` (entries floored at ``1e-300`` so that a probability of exactly 0 stays
finite; nothing else is changed):

* Temperature scaling (Guo, Pleiss, Sun and Weinberger 2017): ``q = softmax(z / T)``, one
  scalar ``T > 0``. For logits ``l`` it equals ``softmax(l / T)``, since ``log softmax(l)``
  differs from ``l`` by a constant per row; so pass ``softmax(l)``. The mean NLL is convex
  in ``beta = 1 / T``,

      NLL(beta) = (1/n) sum_i [log sum_c exp(beta z_ic) - beta z_{i y_i}],
      NLL'(beta) = (1/n) sum_i [E_{s_i}[z_i] - z_{i y_i}],
      NLL''(beta) = (1/n) sum_i Var_{s_i}[z_i],

  with ``s_i = softmax(beta z_i)``, and is minimised by safeguarded Newton steps inside a
  bracket on which ``NLL'`` changes sign: the global minimum, so the calibration NLL never
  exceeds its value at ``T = 1``.
* Dirichlet calibration (Kull, Perello-Nieto, Kaengsepp, Silva Filho, Song and Flach
  2019): ``q = softmax(W z + b)``, a multinomial logistic regression on log-probabilities,
  with their off-diagonal and intercept regularisation (ODIR):

      L(W, b) = NLL + lam / (C (C - 1)) sum_{c != j} W_cj^2 + mu / C sum_c b_c^2.

  The diagonal of ``W`` is free, so temperature scaling (``W = I / T``, ``b = 0``) lies in
  the family at no penalty and the fitted calibration NLL is never above temperature
  scaling's. ``L`` is convex; it is minimised by Newton steps with a backtracking line
  search from the identity map ``W = I, b = 0``. Default ``lam = mu = 1`` (fixed: a
  moderate shrinkage for calibration sets of tens to hundreds of points; Kull et al.
  choose both by cross-validation, which is not done here). Every class needs a
  calibration label: the free diagonal weight of a class without one grows without bound.

Example:
    >>> import numpy as np
    >>> from ppgpc.evaluation.recalibration import fit_temperature
    >>> rng = np.random.default_rng(0)
    >>> logits = 2.0 * rng.normal(size=(500, 3))
    >>> q = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    >>> y = (rng.uniform(size=(500, 1)) > np.cumsum(q, axis=1)[:, :-1]).sum(axis=1)
    >>> p = q**2 / (q**2).sum(axis=1, keepdims=True)   # overconfident: T = 2 undoes it
    >>> fit = fit_temperature(p, y)
    >>> bool(1.6 < fit.temperature < 2.5), fit.transform(p).shape
    (True, (500, 3))
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import log_softmax, logsumexp, softmax

from ppgpc.evaluation.metrics import _validate
from ppgpc.validation import check_nonnegative

__all__ = [
    "TemperatureScaling",
    "DirichletCalibration",
    "fit_temperature",
    "fit_dirichlet",
]

LOG_FLOOR = 1e-300
"""Probabilities are floored at this before the logarithm (only exact zeros change)."""

_MAX_STEPS = 200


def _log_probs(p: np.ndarray) -> np.ndarray:
    """(n, C) ``log max(p, LOG_FLOOR)``."""
    return np.log(np.maximum(p, LOG_FLOOR))


def _check_transform_input(probs: ArrayLike, C: int) -> np.ndarray:
    p = np.asarray(probs, dtype=np.float64)
    p, _ = _validate(p, np.zeros(p.shape[0] if p.ndim == 2 else 0, dtype=np.int64))
    if p.shape[1] != C:
        raise ValueError(f"probs has {p.shape[1]} classes but the recalibration was fitted "
                         f"with {C}")
    return p


# ------------------------------------------------------------------ temperature scaling
class TemperatureScaling(NamedTuple):
    """A fitted temperature; ``transform(probs)`` applies it."""

    temperature: float
    """T > 0 (T > 1 softens overconfident probabilities, T < 1 sharpens)."""
    nll: float
    """Mean calibration-set NLL after scaling."""
    nll_before: float
    """Mean calibration-set NLL at T = 1 (of the floored probabilities)."""
    iterations: int
    """Newton or bisection steps taken."""

    def transform(self, probs: ArrayLike) -> np.ndarray:
        """(m, C) ``softmax(log p / T)`` of (m, C) probabilities."""
        p = np.asarray(probs, dtype=np.float64)
        p = _check_transform_input(p, p.shape[1] if p.ndim == 2 else 0)
        return softmax(_log_probs(p) / self.temperature, axis=1)


def _temperature_terms(z: np.ndarray, labels: np.ndarray, beta: float):
    """(NLL, NLL', NLL'') at inverse temperature beta (module docstring)."""
    scaled = beta * z
    s = softmax(scaled, axis=1)                                          # (n, C)
    mean_z = np.sum(s * z, axis=1)                                       # E_s[z]
    z_true = z[np.arange(z.shape[0]), labels]
    value = np.mean(logsumexp(scaled, axis=1) - beta * z_true)
    slope = np.mean(mean_z - z_true)
    curvature = np.mean(np.sum(s * (z - mean_z[:, None]) ** 2, axis=1))
    return float(value), float(slope), float(curvature)


def fit_temperature(probs: ArrayLike, y: ArrayLike) -> TemperatureScaling:
    """Temperature scaling fitted by minimum mean NLL on calibration data.

    Args:
        probs: (n, C) calibration probabilities (for logits, pass their softmax).
        y: (n,) labels 0..C-1.

    Returns:
        A :class:`TemperatureScaling`.

    Raises:
        ValueError: bad inputs; probabilities no better than uniform on this set
            (``NLL'(0) >= 0``: the best T is infinite); or labels that are always the most
            probable class, so the NLL keeps falling as ``T -> 0``.
    """
    p, labels = _validate(probs, y)
    z = _log_probs(p)
    nll_before, slope, _ = _temperature_terms(z, labels, 1.0)
    if _temperature_terms(z, labels, 0.0)[1] >= 0:
        raise ValueError("on this calibration set the probabilities are no better than "
                         "uniform (the NLL falls as T grows without bound); temperature "
                         "scaling has no finite answer")
    if np.all(z[np.arange(z.shape[0]), labels] >= z.max(axis=1)):
        raise ValueError("every calibration label is the most probable class: the NLL keeps "
                         "falling as T -> 0, so temperature scaling has no finite answer; "
                         "use more calibration data")
    # NLL'(0) < 0, and NLL'(beta) -> mean_i (max_c z_ic - z_iy_i) > 0 as beta -> inf
    lo, hi = 0.0, 1.0
    while slope < 0:
        lo, hi = hi, 2.0 * hi
        slope = _temperature_terms(z, labels, hi)[1]
    beta = 1.0 if lo < 1.0 < hi else 0.5 * (lo + hi)
    for step in range(1, _MAX_STEPS + 1):
        value, slope, curvature = _temperature_terms(z, labels, beta)
        if slope < 0:
            lo = beta
        else:
            hi = beta
        if abs(slope) <= 1e-13 * max(1.0, abs(value)) or hi - lo <= 1e-15 * hi:
            break
        newton = beta - slope / curvature if curvature > 0 else np.nan
        beta = newton if lo < newton < hi else 0.5 * (lo + hi)
    else:
        raise RuntimeError(f"temperature scaling did not converge in {_MAX_STEPS} steps")
    value = _temperature_terms(z, labels, beta)[0]
    return TemperatureScaling(float(1.0 / beta), value, nll_before, step - 1)


# ------------------------------------------------------------------ Dirichlet calibration
class DirichletCalibration(NamedTuple):
    """A fitted Dirichlet calibration map; ``transform(probs)`` applies it."""

    weights: np.ndarray
    """(C, C) W of ``q = softmax(W log p + b)``."""
    bias: np.ndarray
    """(C,) b."""
    off_diagonal_penalty: float
    """ODIR lambda on the off-diagonal weights."""
    intercept_penalty: float
    """ODIR mu on the intercepts."""
    nll: float
    """Mean calibration-set NLL after the map (without the penalty)."""
    nll_before: float
    """Mean calibration-set NLL of the floored input probabilities (W = I, b = 0)."""
    iterations: int
    """Newton steps taken."""

    def transform(self, probs: ArrayLike) -> np.ndarray:
        """(m, C) ``softmax(W log p + b)`` of (m, C) probabilities."""
        p = _check_transform_input(probs, self.bias.shape[0])
        return softmax(_log_probs(p) @ self.weights.T + self.bias, axis=1)


def _dirichlet_objective(theta: np.ndarray, X: np.ndarray, Y: np.ndarray,
                         penalty: np.ndarray):
    """Objective, gradient (C, d) and Hessian (C d, C d) of the ODIR-penalised mean NLL.

    ``theta = [W | b]`` (C, d = C + 1), features ``X = [log p, 1]`` (n, d), one-hot labels
    Y (n, C), and ``penalty`` (C, d) the per-entry coefficient of ``theta^2`` (ODIR).
    With ``s_i = softmax(theta x_i)``: gradient ``(S - Y)^T X / n + 2 penalty theta``;
    Hessian ``(1/n) sum_i (diag(s_i) - s_i s_i^T) (x) x_i x_i^T + diag(2 penalty)``.
    """
    n, d = X.shape
    C = Y.shape[1]
    logits = X @ theta.T                                                 # (n, C)
    log_s = log_softmax(logits, axis=1)
    s = np.exp(log_s)
    value = -np.sum(Y * log_s) / n + np.sum(penalty * theta**2)
    grad = (s - Y).T @ X / n + 2.0 * penalty * theta
    V = (s[:, :, None] * X[:, None, :]).reshape(n, C * d)                # s_ic x_id
    hess = -(V.T @ V) / n
    for c in range(C):
        block = slice(c * d, (c + 1) * d)
        hess[block, block] += (X * s[:, c:c + 1]).T @ X / n
    hess[np.diag_indices(C * d)] += 2.0 * penalty.ravel()
    return float(value), grad, hess


def fit_dirichlet(probs: ArrayLike, y: ArrayLike, *, off_diagonal_penalty: float = 1.0,
                  intercept_penalty: float = 1.0) -> DirichletCalibration:
    """Dirichlet calibration with ODIR, fitted by Newton's method on calibration data.

    Args:
        probs: (n, C) calibration probabilities.
        y: (n,) labels 0..C-1.
        off_diagonal_penalty: ODIR lambda >= 0.
        intercept_penalty: ODIR mu >= 0.

    Returns:
        A :class:`DirichletCalibration`. Each step costs ``O(n C^2 (C + 1)^2)`` for the
        Hessian and a solve of size ``C (C + 1)``.

    Raises:
        ValueError: bad inputs or penalties, or a class without calibration labels.
        RuntimeError: no convergence in 200 Newton steps (with zero penalties a
            calibration set the map can separate has no finite minimum).
    """
    p, labels = _validate(probs, y)
    lam = check_nonnegative("off_diagonal_penalty", off_diagonal_penalty)
    mu = check_nonnegative("intercept_penalty", intercept_penalty)
    n, C = p.shape
    empty = np.flatnonzero(np.bincount(labels, minlength=C) == 0)
    if empty.size:
        raise ValueError(f"class(es) {empty.tolist()} have no calibration labels; Dirichlet "
                         "calibration would send their probabilities to 0 (their free "
                         "diagonal weight has no finite optimum). Use a calibration set "
                         "with every class, or fit_temperature")
    X = np.hstack([_log_probs(p), np.ones((n, 1))])                      # (n, C + 1)
    Y = np.eye(C)[labels]
    penalty = np.zeros((C, C + 1))
    penalty[:, :C] = lam / (C * (C - 1))
    penalty[np.arange(C), np.arange(C)] = 0.0                            # diagonal is free
    penalty[:, C] = mu / C
    theta = np.hstack([np.eye(C), np.zeros((C, 1))])                     # the identity map
    nll_before = float(-np.mean(log_softmax(X @ theta.T, axis=1)[np.arange(n), labels]))
    value, grad, hess = _dirichlet_objective(theta, X, Y, penalty)
    for step in range(1, _MAX_STEPS + 1):
        direction = -np.linalg.lstsq(hess, grad.ravel(), rcond=None)[0].reshape(C, C + 1)
        decrement = -float(np.sum(grad * direction))                     # Newton decrement^2
        if decrement <= 1e-15 * max(1.0, abs(value)):                    # f - f* ~ decrement/2
            break
        t = 1.0
        while True:                                                      # Armijo backtracking
            candidate = theta + t * direction
            new = _dirichlet_objective(candidate, X, Y, penalty)
            if new[0] <= value - 0.25 * t * decrement or t < 1e-12:
                break
            t *= 0.5
        theta, (value, grad, hess) = candidate, new
    else:
        raise RuntimeError(f"Dirichlet calibration did not converge in {_MAX_STEPS} Newton "
                           "steps; raise the penalties")
    logits = X @ theta.T
    nll = float(-np.mean(log_softmax(logits, axis=1)[np.arange(n), labels]))
    return DirichletCalibration(theta[:, :C].copy(), theta[:, C].copy(), lam, mu, nll,
                                nll_before, step - 1)
