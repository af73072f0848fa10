"""Synthetic classification problems: 2-D Gaussian mixtures with class means on a circle.

The ILR paper's synthetic experiments (its "effect of epsilon" study, Fig. 5, and the
scaling-with-classes study, Fig. 6) and the logistic-softmax paper's toy (Galy-Fajou et al.
2020, section 5.1 and Fig. 8 of the appendix) all use one generative model: class
``c in 0..C-1`` has probability ``1 / C`` and

    x | y = c  ~  N(mu_c, sigma^2 I_2),    mu_c = r (cos(2 pi c / C), sin(2 pi c / C)).

``sigma`` sets the overlap of the components: as it grows the classes overlap and the Bayes
class probabilities

    p(y = c | x) = softmax_c(-|x - mu_c|^2 / (2 sigma^2))                         (1)

(equal priors; the common normaliser and the ``|x|^2`` term cancel) approach uniform over
most of the plane. Knowing (1) exactly lets a notebook or a test compare a classifier's
predictive probabilities with the truth, not only with labels.

The paper texts lost the numerical settings in extraction, so the presets below are ours and
say so: ``logistic_softmax_toy`` keeps what the text states (three classes, 500 points,
sigma^2 = 0.5) and puts the means on the unit circle.

Example:
    >>> from ppgpc.datasets.synthetic import gaussian_mixture, bayes_probabilities
    >>> X, y = gaussian_mixture(300, num_classes=4, sigma=0.5, seed=0)
    >>> X.shape, y.shape, sorted(set(y.tolist()))
    ((300, 2), (300,), [0, 1, 2, 3])
    >>> bayes_probabilities(X[:2], num_classes=4, sigma=0.5).shape
    (2, 4)
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "MixtureProblem",
    "circle_means",
    "gaussian_mixture",
    "bayes_probabilities",
    "mixture_problem",
    "logistic_softmax_toy",
    "LSM_TOY_SIGMA",
]

LSM_TOY_SIGMA = math.sqrt(0.5)
"""Component standard deviation of the logistic-softmax paper's toy (variance 0.5)."""


class MixtureProblem(NamedTuple):
    """A train/test draw from the circle mixture, with the settings that made it."""

    X_train: np.ndarray
    """(n_train, 2) inputs."""
    y_train: np.ndarray
    """(n_train,) labels in 0..C-1."""
    X_test: np.ndarray
    """(n_test, 2) inputs."""
    y_test: np.ndarray
    """(n_test,) labels in 0..C-1."""
    num_classes: int
    sigma: float
    radius: float

    def bayes_probabilities(self, X: ArrayLike) -> np.ndarray:
        """(n, C) true class probabilities (1) at X."""
        return bayes_probabilities(X, self.num_classes, self.sigma, radius=self.radius)


def _check_settings(num_classes, sigma, radius) -> None:
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) \
            or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
    if not (np.isscalar(sigma) and np.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be a positive finite number, got {sigma!r}")
    if not (np.isscalar(radius) and np.isfinite(radius) and radius > 0):
        raise ValueError(f"radius must be a positive finite number, got {radius!r}")


def circle_means(num_classes: int, radius: float = 1.0) -> np.ndarray:
    """(C, 2) component means ``r (cos(2 pi c / C), sin(2 pi c / C))``, c = 0..C-1."""
    _check_settings(num_classes, 1.0, radius)
    angles = 2.0 * np.pi * np.arange(num_classes) / num_classes
    return radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)


def gaussian_mixture(n: int, num_classes: int = 3, sigma: float = 0.5, *,
                     radius: float = 1.0, seed: int | Sequence[int] = 0
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Draw n labelled points from the circle mixture.

    Labels are drawn i.i.d. uniform on 0..C-1 (so class counts are multinomial, as in the
    generative model behind (1)), then ``x = mu_y + sigma * eps`` with ``eps ~ N(0, I_2)``.

    Args:
        n: number of points (>= 1).
        num_classes: C >= 2.
        sigma: component standard deviation (> 0).
        radius: radius of the circle of means (> 0).
        seed: NumPy generator seed (an int or a sequence of ints).

    Returns:
        X (n, 2) float64 and y (n,) int64.
    """
    _check_settings(num_classes, sigma, radius)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    gen = np.random.default_rng(seed)
    y = gen.integers(0, num_classes, size=n)
    X = circle_means(num_classes, radius)[y] + sigma * gen.normal(size=(n, 2))
    return X, y.astype(np.int64)


def bayes_probabilities(X: ArrayLike, num_classes: int, sigma: float, *,
                        radius: float = 1.0) -> np.ndarray:
    """(n, C) Bayes class probabilities (1) of the circle mixture at inputs X (n, 2)."""
    _check_settings(num_classes, sigma, radius)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != 2:
        raise ValueError(f"X must have shape (n, 2), got {X.shape}")
    sq = ((X[:, None, :] - circle_means(num_classes, radius)[None]) ** 2).sum(-1)
    logits = -sq / (2.0 * sigma**2)
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)


def mixture_problem(n_train: int, n_test: int, num_classes: int = 3, sigma: float = 0.5, *,
                    radius: float = 1.0, seed: int = 0) -> MixtureProblem:
    """Independent train and test draws of the circle mixture.

    The test set comes from a generator seeded with ``(seed, 1)``, the training set with
    ``(seed, 0)``, so the two never share random numbers.
    """
    X_train, y_train = gaussian_mixture(n_train, num_classes, sigma, radius=radius,
                                        seed=[seed, 0])
    X_test, y_test = gaussian_mixture(n_test, num_classes, sigma, radius=radius,
                                      seed=[seed, 1])
    return MixtureProblem(X_train, y_train, X_test, y_test, int(num_classes), float(sigma),
                          float(radius))


def logistic_softmax_toy(n_train: int = 500, n_test: int = 500, *, seed: int = 0
                         ) -> MixtureProblem:
    """The logistic-softmax paper's three-class toy: 500 points, sigma^2 = 0.5, unit circle."""
    return mixture_problem(n_train, n_test, 3, LSM_TOY_SIGMA, radius=1.0, seed=seed)
