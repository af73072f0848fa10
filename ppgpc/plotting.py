"""Reliability diagrams (MATH.md section 5), headless-safe.

matplotlib is imported lazily inside the functions; nothing here selects a backend or
touches pyplot. Without an ``ax`` the figures are plain :class:`matplotlib.figure.Figure`
objects, so they render to files on machines without a display and do not pile up in
pyplot's global state.

Example:
    >>> import numpy as np
    >>> from ppgpc.plotting import reliability_diagram, save_figure
    >>> rng = np.random.default_rng(0)
    >>> p1 = rng.uniform(size=200)
    >>> y = (rng.uniform(size=200) < p1).astype(int)
    >>> ax = reliability_diagram(np.stack([1 - p1, p1], axis=1), y, label="model")
    >>> path = save_figure(ax.figure, "/tmp/ppgpc_doctest_reliability.png")
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ppgpc.metrics import ece, reliability_table

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["reliability_diagram", "reliability_grid", "save_figure"]

IDENTITY_GID = "ppgpc-identity"
"""``gid`` of the dashed identity line, drawn once per axes."""
COUNTS_LABEL = "ppgpc-counts"
"""``label`` of the twin axes holding the bin-count histograms."""

_AXIS_LABELS = {
    "binary": ("predicted p(y = 1)", "observed frequency of y = 1"),
    "top-label": ("confidence  max$_c$ p(c)", "top-label accuracy"),
}
_COUNTS_HEADROOM = 4.0  # count histograms use the bottom quarter of the panel


def _new_axes(figsize: tuple[float, float] = (4.6, 4.4)) -> Axes:
    """A single axes on a pyplot-free Figure."""
    from matplotlib.figure import Figure

    return Figure(figsize=figsize).add_subplot()


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

    Uses exactly the binning of :func:`ppgpc.metrics.reliability_table`; each non-empty
    bin is a point at ``(confidence, accuracy)`` joined by a line. The legend entry
    gives the ECE and names its kind. Call repeatedly on the same ``ax`` with different
    ``label`` values to compare models: the identity line and the count axis are shared.

    Args:
        probs: Class probabilities, shape ``(n, C)``.
        y: Integer labels, shape ``(n,)``.
        n_bins: Number of equal-width bins on ``[0, 1]``.
        kind: ``"auto"``, ``"binary"`` or ``"top-label"`` (``"classwise"`` has one
            diagram per class and is not drawn here).
        ax: Axes to draw into; a new pyplot-free Figure is made when ``None``.
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
        ax = _new_axes()
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


def reliability_grid(results: dict[str, tuple[ArrayLike, ArrayLike]], **kw: Any) -> Figure:
    """One reliability diagram per model, side by side, titled by model name.

    Args:
        results: ``{name: (probs, y)}`` with ``probs`` ``(n, C)`` and ``y`` ``(n,)``;
            models may have different test sets.
        **kw: Passed to :func:`reliability_diagram` (``n_bins``, ``kind``,
            ``show_counts``); ``ax`` and ``label`` are set here.

    Returns:
        A pyplot-free Figure. Its first ``len(results)`` axes are the panels, in the
        order of ``results``; twin count axes (if any) come after them.

    Raises:
        ValueError: If ``results`` is empty or ``kw`` contains ``ax`` or ``label``.
    """
    from matplotlib.figure import Figure

    if not results:
        raise ValueError("results is empty: pass {name: (probs, y)} for at least one model.")
    clash = {"ax", "label"} & set(kw)
    if clash:
        raise ValueError(f"reliability_grid sets {sorted(clash)} itself; do not pass them.")
    fig = Figure(figsize=(4.4 * len(results), 4.4), layout="constrained")
    panels = fig.subplots(1, len(results), squeeze=False)[0]
    for panel, (name, (probs, y)) in zip(panels, results.items()):
        reliability_diagram(probs, y, ax=panel, **kw)
        panel.set_title(str(name), fontsize=11)
    return fig


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
