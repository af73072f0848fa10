"""RGB pictures of predictive probabilities over a 2-D grid of inputs (appendix A.4 of the
logistic-softmax paper; docs/math.md section 7).

Each of three classes owns a colour channel, so saturated colours are confident predictions
and mixtures are transitions. For C != 3 classes each class gets a colour of
``ppgpc.evaluation.plotting.CLASS_PALETTE`` and a pixel is the probability-weighted mix of them
(the title says so). For D > 2 inputs the grid lies in the plane of the first two principal
components of the standardised training inputs, through their mean (the title says so).

* ``InputGrid`` / ``input_grid``: the (G * G, D) grid points covering (n, D) training inputs,
  with the plot coordinates of the plane they lie in;
* ``rgb_image``: (G * G, C) probabilities as a (G, G, 3) image;
* ``plot_probability_maps``: one or several classifiers' ``predict_proba`` over the grid,
  each drawn as an RGB map above its top-class probability map
  (``ppgpc.evaluation.plotting.probability_map_grid``).

Example:
    >>> import numpy as np
    >>> from ppgpc.evaluation.maps import input_grid
    >>> input_grid(np.array([[0.0, 0.0], [1.0, 2.0]]), grid_size=3, margin=0.0).points.shape
    (9, 2)
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from ppgpc.validation import check_features, check_labels

__all__ = ["InputGrid", "input_grid", "rgb_image", "plot_probability_maps"]


class InputGrid(NamedTuple):
    """A regular 2-D grid of input points (in the original input space)."""

    points: np.ndarray
    """(G * G, D) inputs, row-major: point [i * G + j] has coordinates (u[j], v[i])."""
    u: np.ndarray
    """(G,) horizontal plot coordinate."""
    v: np.ndarray
    """(G,) vertical plot coordinate."""
    origin: np.ndarray
    """(D,) input at plot coordinates (0, 0) (for D = 2: the zero vector)."""
    axes: np.ndarray
    """(2, D) input-space directions of one plot unit along u and v."""
    description: str
    """What the plane is, for titles."""
    xlabel: str
    ylabel: str

    @property
    def extent(self) -> tuple:
        """(left, right, bottom, top) for ``imshow``."""
        return (float(self.u[0]), float(self.u[-1]), float(self.v[0]), float(self.v[-1]))

    def project(self, X) -> np.ndarray:
        """(n, 2) plot coordinates of inputs X (n, D): least-squares projection on the plane."""
        X = np.asarray(X, dtype=np.float64)
        coef, *_ = np.linalg.lstsq(self.axes.T, (X - self.origin).T, rcond=None)
        return coef.T


def input_grid(X, grid_size: int = 60, margin: float = 0.1) -> InputGrid:
    """A grid covering the training inputs X (n, D).

    D = 2: the box of X widened by ``margin`` of its range on each side. D > 2: the plane of
    the first two principal components of the standardised inputs, through their mean,
    mapped back to the input space (x = mean + scale * (a pc1 + b pc2)); the grid covers the
    projected training points plus the margin. D = 1 is refused (there is no plane).
    """
    X = check_features(X)
    if X.shape[0] < 2 or X.shape[1] < 2:
        raise ValueError(f"input_grid needs X of shape (n >= 2, D >= 2); got {X.shape}")
    if not (isinstance(grid_size, (int, np.integer)) and grid_size >= 2):
        raise ValueError(f"grid_size must be an integer >= 2; got {grid_size!r}")
    D = X.shape[1]
    if D == 2:
        origin, axes = np.zeros(2), np.eye(2)
        description, xlabel, ylabel = "inputs x1, x2", "x$_1$", "x$_2$"
    else:
        mean, scale = X.mean(axis=0), X.std(axis=0)
        scale = np.where(scale > 0, scale, 1.0)
        _, _, vt = np.linalg.svd((X - mean) / scale, full_matrices=False)
        origin, axes = mean, vt[:2] * scale[None, :]
        description = ("plane of the first two principal components of the standardised "
                       "training inputs, through their mean")
        xlabel, ylabel = "PC 1", "PC 2"
    grid = InputGrid(np.zeros((0, D)), np.zeros(2), np.zeros(2), origin, axes, description,
                     xlabel, ylabel)
    coords = grid.project(X)
    lo, hi = coords.min(axis=0), coords.max(axis=0)
    pad = margin * np.maximum(hi - lo, 1e-12)
    u = np.linspace(lo[0] - pad[0], hi[0] + pad[0], grid_size)
    v = np.linspace(lo[1] - pad[1], hi[1] + pad[1], grid_size)
    uu, vv = np.meshgrid(u, v)
    points = origin + uu.reshape(-1, 1) * axes[0] + vv.reshape(-1, 1) * axes[1]
    return grid._replace(points=points, u=u, v=v)


def rgb_image(probs, grid_shape: tuple) -> tuple[np.ndarray, str]:
    """RGB pixels from class probabilities (appendix A.4 of the logistic-softmax paper).

    Args:
        probs: (G1 * G2, C) probabilities, row-major over the grid.
        grid_shape: (G1, G2).

    Returns:
        ((G1, G2, 3) image in [0, 1], a note for titles). For C = 3 the probabilities are
        the red, green and blue channels; otherwise each class has a palette colour
        (``ppgpc.evaluation.plotting.CLASS_PALETTE``) and a pixel is sum_c p_c colour_c.
    """
    from ppgpc.evaluation.plotting import _class_colours

    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 2 or probs.shape[0] != int(np.prod(grid_shape)):
        raise ValueError(f"probs must have shape ({int(np.prod(grid_shape))}, C) for a "
                         f"{tuple(grid_shape)} grid; got {probs.shape}")
    C = probs.shape[1]
    image = (probs @ _class_colours(C)).reshape(tuple(grid_shape) + (3,))
    note = ("RGB = p(class 0, 1, 2)" if C == 3
            else f"colour = probability-weighted mix of {C} class colours")
    return np.clip(image, 0.0, 1.0), note


def plot_probability_maps(predict_proba: Callable | dict, X, y=None, *, grid_size: int = 60,
                          margin: float = 0.1, show_points: bool = True,
                          confidence: bool = True, axes=None):
    """RGB pictures of one or several classifiers' predictive probabilities over a grid,
    each above a map of its top-class probability max_c p(c | x) (where it is unsure).

    Args:
        predict_proba: a function (n, D) inputs -> (n, C) probabilities (an estimator's
            ``predict_proba``), or ``{name: function}`` for one panel per model.
        X: (n, D) training inputs (the grid covers them; ``input_grid``).
        y: optional (n,) training labels as indices 0..C-1, drawn in the class colours.
        grid_size: points per side; margin: fraction of the range added on each side.
        show_points: draw the training points.
        confidence: draw the top-class probability map under each RGB map.
        axes: the panels to draw into (models along the columns, the confidence maps in a
            second row); a new pyplot figure when None.

    Returns:
        The figure, titled with the colour coding and, for D > 2, the plane.
    """
    from ppgpc.evaluation.plotting import probability_map_grid

    X = check_features(X)
    if y is not None:
        y = check_labels(y, X.shape[0])
    models = predict_proba if isinstance(predict_proba, dict) else {"": predict_proba}
    grid = input_grid(X, grid_size, margin)
    images, tops, note = {}, {}, ""
    for name, fn in models.items():
        probs = np.asarray(fn(grid.points))
        if y is not None and not images and (y.dtype.kind not in "iu" or y.min() < 0
                                             or y.max() >= probs.shape[1]):
            raise ValueError(f"y must hold class indices 0..{probs.shape[1] - 1} (for the "
                             "class colours); encode labels first, e.g. with an estimator's "
                             "classes_")
        images[name], note = rgb_image(probs, (grid_size, grid_size))
        tops[name] = probs.max(axis=1).reshape(grid_size, grid_size)
    suptitle = note if X.shape[1] == 2 else f"{note}\n{grid.description}"
    points = grid.project(X) if show_points else None
    labels = None if (y is None or not show_points) else y
    return probability_map_grid(images, grid.extent, points=points, labels=labels,
                                suptitle=suptitle, xlabel=grid.xlabel, ylabel=grid.ylabel,
                                confidence=tops if confidence else None,
                                num_classes=probs.shape[1], axes=axes)
