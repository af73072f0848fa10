"""Reliability diagrams and probability maps (docs/math.md section 7), drawn as matplotlib's
own plotting functions, ArviZ's and scikit-learn's displays draw.

A single-panel function draws into ``ax`` when given, else into pyplot's current axes
(``plt.gca()``: a new figure when there is none), and returns the axes; a multi-panel one
draws into ``axes`` when given, else into a new pyplot figure, and returns the figure. So
``plt.savefig``, ``plt.show()`` and notebooks' inline display see every plot. matplotlib is
imported when a plot is drawn, never with this module, and nothing here selects a backend
(without a display, matplotlib uses its file-only one).

Example:
    >>> import numpy as np
    >>> import matplotlib.pyplot as plt
    >>> from ppgpc.evaluation.plotting import reliability_bands_diagram
    >>> rng = np.random.default_rng(0)
    >>> p1 = rng.uniform(size=200)
    >>> y = (rng.uniform(size=200) < p1).astype(int)
    >>> ax = reliability_bands_diagram(np.stack([1 - p1, p1], axis=1), y, label="model")
    >>> plt.savefig("/tmp/ppgpc_doctest_reliability.png")
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ppgpc.evaluation.calibration import reliability_bands
from ppgpc.evaluation.metrics import ece, reliability_table, table_ece

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["reliability_diagram", "reliability_grid", "classwise_reliability_grid",
           "confidence_ppc_diagram", "reliability_bands_diagram", "reliability_bands_grid",
           "probability_map", "confidence_map", "probability_map_grid", "marginal_overlay",
           "CLASS_PALETTE", "save_figure", "close"]

CLASS_PALETTE = (
    (0.85, 0.10, 0.10), (0.10, 0.65, 0.15), (0.12, 0.30, 0.90), (0.95, 0.60, 0.05),
    (0.60, 0.20, 0.75), (0.05, 0.70, 0.75), (0.85, 0.30, 0.65), (0.55, 0.40, 0.20),
    (0.50, 0.50, 0.50), (0.70, 0.75, 0.10),
)
"""Colours of classes 0..9 in probability maps when C != 3 (cycled beyond 10 classes)."""

IDENTITY_GID = "ppgpc-identity"
"""``gid`` of the dashed identity line, drawn once per axes."""
COUNTS_LABEL = "ppgpc-counts"
"""``label`` of the twin axes holding the bin-count histograms."""
BAND_GID = "ppgpc-consistency-band"
"""``gid`` of the consistency-band bars of :func:`reliability_bands_diagram`."""

_AXIS_LABELS = {
    "binary": ("predicted p(y = 1)", "observed frequency of y = 1"),
    "top-label": ("confidence  max$_c$ p(c)", "top-label accuracy"),
}
_COUNTS_HEADROOM = 4.0  # count histograms use the bottom quarter of the panel


def _current_axes() -> Axes:
    """pyplot's current axes (a new figure's, when there is no figure)."""
    import matplotlib.pyplot as plt

    return plt.gca()


def _panels(count: int, columns: int, size: tuple[float, float], axes=None):
    """(figure, ``count`` axes): the given ``axes`` (at least ``count`` of them), or the
    panels of a new pyplot figure, ``columns`` to a row, each panel ``size`` inches."""
    if axes is not None:
        flat = list(np.ravel(np.asarray(axes, dtype=object)))
        if len(flat) < count:
            raise ValueError(f"axes has {len(flat)} axes for {count} panels")
        return flat[0].figure, flat[:count]
    import matplotlib.pyplot as plt

    rows = -(-count // columns)
    fig = plt.figure(figsize=(size[0] * min(count, columns), size[1] * rows),
                     layout="constrained")
    panels = fig.subplots(rows, min(count, columns), squeeze=False).ravel()
    for panel in panels[count:]:
        panel.set_visible(False)
    return fig, list(panels[:count])


def _style_axes(ax: Axes, kind: str) -> None:
    """ArviZ-like look: light grid, no top/right spines, unit square."""
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_box_aspect(1.0)
    ax.grid(True, color="0.9", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_color("0.4")
    ax.tick_params(colors="0.3", labelsize=9)
    xlabel, ylabel = _AXIS_LABELS[kind]
    ax.set_xlabel(xlabel, fontsize=10)
    ax.set_ylabel(ylabel, fontsize=10)


def _identity_line(ax: Axes) -> None:
    """Draw the dashed diagonal once, however often the axes is reused."""
    if any(line.get_gid() == IDENTITY_GID for line in ax.get_lines()):
        return
    ax.plot(
        [0.0, 1.0], [0.0, 1.0], linestyle="--", color="0.55", linewidth=1.0,
        gid=IDENTITY_GID, label="_nolegend_", zorder=1,
    )


def _counts_axes(ax: Axes) -> Axes:
    """The twin axes holding count histograms; created on first use, then reused."""
    for other in ax.figure.axes:
        if other.get_label() == COUNTS_LABEL and other.get_shared_x_axes().joined(ax, other):
            return other
    counts_ax = ax.twinx()
    counts_ax.set_label(COUNTS_LABEL)
    counts_ax.set_zorder(ax.get_zorder() - 1)  # histogram behind the curves
    ax.patch.set_visible(False)
    for side in ("top", "left", "bottom"):
        counts_ax.spines[side].set_visible(False)
    counts_ax.spines["right"].set_color("0.75")
    counts_ax.tick_params(axis="y", colors="0.55", labelsize=8)
    counts_ax.set_ylabel("count", color="0.55", fontsize=9)
    counts_ax.set_ylim(0.0, 1.0)
    counts_ax.set_box_aspect(1.0)
    ax.figure.sca(ax)  # the diagram stays the current axes, not its twin
    return counts_ax


def _draw_counts(ax: Axes, edges: np.ndarray, count: np.ndarray, color: Any) -> None:
    """Add one model's bin counts as a light filled step histogram."""
    counts_ax = _counts_axes(ax)
    counts_ax.stairs(count, edges, fill=True, color=color, alpha=0.18, linewidth=0)
    counts_ax.stairs(count, edges, color=color, alpha=0.6, linewidth=1.0)
    top = max(counts_ax.get_ylim()[1], _COUNTS_HEADROOM * max(int(count.max()), 1))
    counts_ax.set_ylim(0.0, top)


def reliability_diagram(
    probs: ArrayLike,
    y: ArrayLike,
    *,
    n_bins: int = 10,
    kind: str = "auto",
    ax: Axes | None = None,
    label: str | None = None,
    show_counts: bool = True,
) -> Axes:
    """Observed frequency against mean confidence per bin, with the identity line.

    Uses exactly the binning of :func:`ppgpc.evaluation.metrics.reliability_table`; each non-empty
    bin is a point at ``(confidence, accuracy)`` joined by a line. The legend entry
    gives the ECE and names its kind. Call repeatedly on the same ``ax`` with different
    ``label`` values to compare models: the identity line and the count axis are shared.

    Args:
        probs: Class probabilities, shape ``(n, C)``.
        y: Integer labels, shape ``(n,)``.
        n_bins: Number of equal-width bins on ``[0, 1]``.
        kind: ``"auto"``, ``"binary"`` or ``"top-label"`` (``"classwise"`` has one
            diagram per class and is not drawn here).
        ax: Axes to draw into; pyplot's current axes when ``None``.
        label: Model name for the legend.
        show_counts: Draw bin counts as a light histogram on a twin y-axis (right).

    Returns:
        The axes drawn into (its ``.figure`` can be passed to :func:`save_figure`).

    Raises:
        ValueError: On invalid inputs or ``kind="classwise"``.
    """
    if kind == "classwise":
        raise ValueError(
            "reliability_diagram draws one curve per model; kind='classwise' needs one "
            "diagram per class. Use reliability_table(..., kind='classwise', "
            "class_index=c) per class instead."
        )
    table = reliability_table(probs, y, n_bins, kind)
    ece_value = ece(probs, y, n_bins, kind)
    if ax is None:
        ax = _current_axes()
    _style_axes(ax, table.kind)
    _identity_line(ax)

    filled = table.count > 0
    ece_text = f"ECE ({table.kind}) = {ece_value:.3f}"
    (curve,) = ax.plot(
        table.confidence[filled], table.accuracy[filled], marker="o", markersize=4.5,
        linewidth=1.6, label=f"{label}: {ece_text}" if label else ece_text, zorder=3,
    )
    if show_counts:
        edges = np.append(table.bin_lower, table.bin_upper[-1])
        _draw_counts(ax, edges, table.count, curve.get_color())
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    return ax


def _grid(draw, results: dict, axes, kw: dict, what: str) -> Figure:
    """One ``draw(probs, y, ax=panel, **kw)`` panel per model of ``results``, titled."""
    if not results:
        raise ValueError("results is empty: pass {name: (probs, y)} for at least one model.")
    clash = {"ax", "label"} & set(kw)
    if clash:
        raise ValueError(f"{what} sets {sorted(clash)} itself; do not pass them.")
    fig, panels = _panels(len(results), len(results), (4.4, 4.4), axes)
    for panel, (name, (probs, y)) in zip(panels, results.items()):
        draw(probs, y, ax=panel, **kw)
        panel.set_title(str(name), fontsize=11)
    return fig


def reliability_grid(results: dict[str, tuple[ArrayLike, ArrayLike]], *, axes=None,
                     **kw: Any) -> Figure:
    """One equal-width-bin reliability diagram per model, side by side, titled by model name.

    Args:
        results: ``{name: (probs, y)}`` with ``probs`` ``(n, C)`` and ``y`` ``(n,)``;
            models may have different test sets.
        axes: one axes per model to draw into (a new pyplot figure when None).
        **kw: Passed to :func:`reliability_diagram` (``n_bins``, ``kind``,
            ``show_counts``); ``ax`` and ``label`` are set here.

    Returns:
        The figure. Its first ``len(results)`` axes are the panels, in the order of
        ``results``; twin count axes (if any) come after them.

    Raises:
        ValueError: If ``results`` is empty or ``kw`` contains ``ax`` or ``label``.
    """
    return _grid(reliability_diagram, results, axes, kw, "reliability_grid")


def reliability_bands_grid(results: dict[str, tuple[ArrayLike, ArrayLike]], *, axes=None,
                           **kw: Any) -> Figure:
    """One equal-mass reliability diagram with consistency bands and counts per model, side
    by side (:func:`reliability_bands_diagram`): the diagram to read on a small test set,
    where equal-width bins hold a handful of points or none.

    Args:
        results: ``{name: (probs, y)}``; axes: one axes per model (a new pyplot figure when
            None); **kw: passed to :func:`reliability_bands_diagram` (``n_bins``,
            ``min_count``, ``level``, ...); ``ax`` and ``label`` are set here.

    Returns:
        The figure, its panels first in the order of ``results``.
    """
    return _grid(reliability_bands_diagram, results, axes, kw, "reliability_bands_grid")


def classwise_reliability_grid(probs: ArrayLike, y: ArrayLike, *, n_bins: int = 10,
                               class_names=None, label: str | None = None,
                               show_counts: bool = True, axes=None) -> Figure:
    """One one-vs-rest reliability diagram per class (the class-wise ECE's bins).

    Panel c plots, per bin of p(c | x), the fraction of points whose label is c against
    the mean p(c | x); its legend gives that class's ECE, and the figure title the
    class-wise ECE (the mean over classes, Kull et al. 2019; Galy-Fajou et al.).

    Args:
        probs: (n, C) class probabilities; y: (n,) labels in 0..C-1.
        n_bins: equal-width bins; class_names: panel titles (default 0..C-1);
        label: model name for the figure title; show_counts: bin-count histograms.
        axes: C axes to draw into (a new pyplot figure when None).

    Returns:
        The figure with C panels (plus twin count axes).
    """
    p = np.asarray(probs, dtype=np.float64)
    C = p.shape[1] if p.ndim == 2 else 0
    names = list(range(C)) if class_names is None else list(class_names)
    if len(names) != C:
        raise ValueError(f"class_names has {len(names)} entries for C = {C} classes")
    fig, panels = _panels(max(C, 1), 4, (3.6, 3.6), axes)
    per_class = []
    for c, panel in enumerate(panels[:C]):
        table = reliability_table(p, y, n_bins, "classwise", class_index=c)
        filled = table.count > 0
        value = table_ece(table)
        per_class.append(value)
        _style_axes(panel, "binary")
        panel.set_xlabel(f"predicted p(y = {names[c]})", fontsize=9)
        panel.set_ylabel(f"observed frequency of y = {names[c]}", fontsize=9)
        _identity_line(panel)
        (curve,) = panel.plot(table.confidence[filled], table.accuracy[filled], marker="o",
                              markersize=4, linewidth=1.5, zorder=3,
                              label=f"ECE (one-vs-rest) = {value:.3f}")
        if show_counts:
            edges = np.append(table.bin_lower, table.bin_upper[-1])
            _draw_counts(panel, edges, table.count, curve.get_color())
        panel.legend(loc="upper left", fontsize=8, frameon=False)
        panel.set_title(f"class {names[c]}", fontsize=10)
    head = f"{label}: " if label else ""
    fig.suptitle(f"{head}class-wise ECE = {np.mean(per_class):.3f} (mean over classes)",
                 fontsize=11)
    return fig


def reliability_bands_diagram(probs: ArrayLike, y: ArrayLike, *, n_bins: int = 10,
                              kind: str = "auto", class_index: int | None = None,
                              min_count: int = 10, level: float = 0.95,
                              n_resamples: int = 1000, seed: int = 0, ax: Axes | None = None,
                              label: str | None = None, show_counts: bool = True) -> Axes:
    """Equal-mass reliability diagram with consistency bands (Broecker and Smith 2007).

    The bins and bands are :func:`ppgpc.evaluation.calibration.reliability_bands`'s: every bin holds
    at least ``min_count`` points (sizes differ by at most one), and each bin's grey bar is
    the central ``level`` range of its observed frequency under calibration (labels drawn
    from the predicted probabilities). A point outside its bar is ringed in red. Each point
    is labelled with its bin's count; ``show_counts`` adds the counts as a histogram over
    the bins' score ranges on a twin axis.

    Args:
        probs: (n, C) probabilities; y: (n,) labels 0..C-1.
        n_bins, kind, class_index, min_count, level, n_resamples, seed: as in
            ``reliability_bands`` (``kind="classwise"`` draws class ``class_index``).
        ax: axes to draw into (pyplot's current axes when None).
        label: model name for the legend.
        show_counts: the count histogram on a twin y-axis.

    Returns:
        The axes drawn into.
    """
    bands = reliability_bands(probs, y, n_bins=n_bins, kind=kind, class_index=class_index,
                              min_count=min_count, level=level, n_resamples=n_resamples,
                              seed=seed)
    ax = _draw_bands(bands, ax, label, f"{level:.0%} consistency band", show_counts)
    if bands.kind == "classwise":
        ax.set_xlabel(f"predicted p(y = {class_index})", fontsize=10)
        ax.set_ylabel(f"observed frequency of y = {class_index}", fontsize=10)
    return ax


def _draw_bands(bands, ax: Axes | None, label: str | None, band_label: str,
                show_counts: bool) -> Axes:
    """Equal-mass bins with a band per bin (a ``ppgpc.evaluation.calibration.BandedBins``):
    grey band bars, the observed curve (points outside their band ringed in red), each
    point's count, and optionally the count histogram on a twin axis."""
    if ax is None:
        ax = _current_axes()
    _style_axes(ax, "binary" if bands.kind == "classwise" else bands.kind)
    _identity_line(ax)
    ax.vlines(bands.confidence, bands.band_lower, bands.band_upper, colors="0.6",
              linewidth=5, alpha=0.55, gid=BAND_GID, zorder=2, label=band_label)
    low, high = int(bands.count.min()), int(bands.count.max())
    per_bin = str(low) if low == high else f"{low}-{high}"
    text = f"{bands.count.size} equal-mass bins, {per_bin} points each"
    (curve,) = ax.plot(bands.confidence, bands.accuracy, marker="o", markersize=4.5,
                       linewidth=1.6, zorder=3, label=f"{label}: {text}" if label else text)
    outside = (bands.accuracy < bands.band_lower) | (bands.accuracy > bands.band_upper)
    if outside.any():
        ax.scatter(bands.confidence[outside], bands.accuracy[outside], s=70,
                   facecolors="none", edgecolors="C3", linewidths=1.3, zorder=4,
                   label=f"outside the band ({int(outside.sum())} of {outside.size})")
    for x, acc, count in zip(bands.confidence, bands.accuracy, bands.count):
        ax.annotate(str(int(count)), (x, acc), textcoords="offset points", xytext=(0, 6),
                    ha="center", fontsize=7, color="0.35")
    if show_counts:
        inner = (bands.score_upper[:-1] + bands.score_lower[1:]) / 2.0
        edges = np.concatenate([bands.score_lower[:1], inner, bands.score_upper[-1:]])
        _draw_counts(ax, edges, bands.count, curve.get_color())
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    return ax


def confidence_ppc_diagram(ppc, *, ax: Axes | None = None, label: str | None = None,
                           show_counts: bool = True) -> Axes:
    """The posterior predictive check of ``ppgpc.evaluation.calibration.confidence_ppc``: per
    equal-mass confidence bin, the observed fraction of correct predicted labels (points,
    ringed in red outside their band) against the central ``ppc.level`` range of that
    fraction under labels replicated from the posterior predictive (grey bars).

    Args:
        ppc: a ``ppgpc.evaluation.calibration.ConfidencePPC``.
        ax: axes to draw into (pyplot's current axes when None).
        label: model name for the legend.
        show_counts: the count histogram on a twin y-axis.

    Returns:
        The axes drawn into.
    """
    return _draw_bands(ppc, ax, label, f"{ppc.level:.0%} of replicated labels", show_counts)


def _class_colours(num_classes: int) -> np.ndarray:
    """(C, 3) colours: pure R, G, B for three classes, else ``CLASS_PALETTE`` (cycled)."""
    if num_classes == 3:
        return np.eye(3)
    return np.array([CLASS_PALETTE[c % len(CLASS_PALETTE)] for c in range(num_classes)])


def probability_map(image: ArrayLike, extent, *, ax: Axes | None = None, points=None,
                    labels=None, title: str | None = None, xlabel: str = "x$_1$",
                    ylabel: str = "x$_2$") -> Axes:
    """Draw an RGB picture of predictive probabilities over a 2-D grid (appendix A.4 of the
    logistic-softmax paper), with the training points on top.

    Args:
        image: (G1, G2, 3) RGB values in [0, 1]; row i is the i-th value of the vertical
            coordinate (``ppgpc.evaluation.maps.rgb_image`` makes it from probabilities).
        extent: (left, right, bottom, top) of the grid in plot coordinates.
        ax: axes to draw into (pyplot's current axes when None).
        points: optional (n, 2) points in the same coordinates; labels: their classes
            (0..C-1), drawn in the class colours with a white edge.
        title, xlabel, ylabel: text.

    Returns:
        The axes.
    """
    image = np.asarray(image, dtype=np.float64)
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"image must have shape (G1, G2, 3); got {image.shape}")
    if ax is None:
        ax = _current_axes()
    ax.imshow(np.clip(image, 0.0, 1.0), origin="lower", extent=tuple(extent), aspect="auto",
              interpolation="bilinear")
    if points is not None:
        points = np.asarray(points)
        colours = "k"
        if labels is not None:
            labels = np.asarray(labels, dtype=int)
            palette = _class_colours(int(labels.max()) + 1 if labels.size else 1)
            colours = palette[labels]
        ax.scatter(points[:, 0], points[:, 1], c=colours, s=14, edgecolors="white",
                   linewidths=0.6, zorder=3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return _map_axes(ax, extent, title, xlabel, ylabel)


def _map_axes(ax: Axes, extent, title: str | None, xlabel: str, ylabel: str) -> Axes:
    """The limits, ticks and text of a map over a grid of inputs."""
    ax.set_xlim(extent[0], extent[1])
    ax.set_ylim(extent[2], extent[3])
    ax.tick_params(colors="0.3", labelsize=8)
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def confidence_map(confidence: ArrayLike, extent, *, ax: Axes | None = None,
                   num_classes: int | None = None, points=None, title: str | None = None,
                   xlabel: str = "x$_1$", ylabel: str = "x$_2$") -> Axes:
    """Draw the top-class probability max_c p(c | x) over a 2-D grid (where the classifier is
    sure, near 1; where it is not, down to 1/C), with a colour bar and the training points.

    Args:
        confidence: (G1, G2) top-class probabilities, rows along the vertical coordinate.
        extent: (left, right, bottom, top) of the grid; ax: axes to draw into (pyplot's
            current axes when None); num_classes: C, the colour scale's floor 1/C (the
            image's minimum when None); points: optional (n, 2) points; title, xlabel,
            ylabel: text.

    Returns:
        The axes.
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    if confidence.ndim != 2:
        raise ValueError(f"confidence must have shape (G1, G2); got {confidence.shape}")
    if ax is None:
        ax = _current_axes()
    low = 1.0 / num_classes if num_classes else float(confidence.min())
    shown = ax.imshow(confidence, origin="lower", extent=tuple(extent), aspect="auto",
                      interpolation="bilinear", cmap="viridis", vmin=low, vmax=1.0)
    ax.figure.colorbar(shown, ax=ax, shrink=0.8, label="max$_c$ p(c | x)")
    if points is not None:
        points = np.asarray(points)
        ax.scatter(points[:, 0], points[:, 1], c="white", s=10, edgecolors="k",
                   linewidths=0.4, zorder=3)
    return _map_axes(ax, extent, title, xlabel, ylabel)


def probability_map_grid(images: dict, extent, *, points=None, labels=None,
                         suptitle: str | None = None, xlabel: str = "x$_1$",
                         ylabel: str = "x$_2$", confidence: dict | None = None,
                         num_classes: int | None = None, axes=None) -> Figure:
    """``probability_map`` panels side by side, one per model (``{name: image}``), and with
    ``confidence`` (``{name: (G1, G2) top-class probabilities}``) a ``confidence_map`` under
    each. ``axes``: the panels to draw into, models along the rows' columns (a new pyplot
    figure when None). Returns the figure."""
    if not images:
        raise ValueError("images is empty: pass {name: (G1, G2, 3) image} for one model or more")
    rows = 1 if confidence is None else 2
    fig, panels = _panels(rows * len(images), len(images), (3.8, 3.9), axes)
    for panel, (name, image) in zip(panels, images.items()):
        probability_map(image, extent, ax=panel, points=points, labels=labels,
                        title=str(name), xlabel=xlabel, ylabel=ylabel)
    if confidence is not None:
        for panel, name in zip(panels[len(images):], images):
            confidence_map(confidence[name], extent, ax=panel, num_classes=num_classes,
                           points=points, title=f"{name}: top-class probability",
                           xlabel=xlabel, ylabel=ylabel)
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    return fig


def marginal_overlay(ax: Axes, draws_a: ArrayLike, draws_b: ArrayLike, *,
                     labels=("a", "b"), title: str | None = None) -> Axes:
    """Overlay two samples' marginal densities (a Gaussian KDE with Scott's bandwidth,
    ``scipy.stats.gaussian_kde``, on the range of the draws widened by three bandwidths; a
    vertical line for a constant).

    Args:
        ax: axes to draw into; draws_a, draws_b: 1-D samples of one scalar quantity.
        labels: legend names of the two posteriors; title: panel title.
    """
    from scipy.stats import gaussian_kde

    def kde(draws):
        density = gaussian_kde(draws)
        width = 3.0 * float(np.sqrt(density.covariance[0, 0]))
        grid = np.linspace(draws.min() - width, draws.max() + width, 256)
        return grid, density(grid)

    for draws, name, colour in ((draws_a, labels[0], "C0"), (draws_b, labels[1], "C1")):
        draws = np.asarray(draws, dtype=np.float64).ravel()
        if np.ptp(draws) == 0:
            ax.axvline(draws[0], color=colour, linewidth=1.6, label=f"{name} (point)")
            continue
        grid, density = kde(draws)
        ax.plot(grid, density, color=colour, linewidth=1.6, label=name)
        ax.fill_between(grid, density, color=colour, alpha=0.15, linewidth=0)
    ax.set_yticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(colors="0.3", labelsize=8)
    ax.grid(True, axis="x", color="0.92")
    if title:
        ax.set_title(title, fontsize=9)
    return ax


def save_figure(fig: Figure | Axes, path: str | Path) -> Path:
    """Write ``fig`` as a PNG (dpi 120, tight bounding box), creating parent folders.

    Args:
        fig: A Figure, or an Axes whose figure is saved.
        path: Destination ending in ``.png``.

    Returns:
        The path written.

    Raises:
        ValueError: If ``path`` does not end in ``.png``.
    """
    from matplotlib.axes import Axes

    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"save_figure writes PNG files; path must end in .png, got {path}.")
    if isinstance(fig, Axes):
        fig = fig.figure
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=120, bbox_inches="tight")
    return path


def close(fig: Figure | Axes) -> None:
    """Close ``fig`` (or an axes' figure) in pyplot, freeing it: for scripts that draw many
    figures without showing them."""
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes

    plt.close(fig.figure if isinstance(fig, Axes) else fig)
