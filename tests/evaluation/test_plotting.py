"""Tests of ppgpc.evaluation.plotting: PNG output, the structure of the axes, and drawing as
matplotlib's own plots do (current axes, ``ax=``, ``axes=``)."""

import numpy as np
import pytest

from ppgpc.evaluation.calibration import reliability_bands
from ppgpc.evaluation.plotting import (BAND_GID, COUNTS_LABEL, IDENTITY_GID,
                                       reliability_bands_diagram, reliability_diagram,
                                       reliability_grid, save_figure)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _synthetic(n_classes, seed, n=400, temperature=1.0):
    """Labels drawn from softmax(logits); probs = softmax(temperature * logits)."""
    rng = np.random.default_rng(seed)
    logits = 2.0 * rng.normal(size=(n, n_classes))
    true = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = (rng.uniform(size=(n, 1)) > np.cumsum(true, axis=1)).sum(axis=1)
    scaled = np.exp(temperature * logits)
    return scaled / scaled.sum(axis=1, keepdims=True), y


def _identity_lines(ax):
    return [
        line for line in ax.get_lines()
        if len(line.get_xdata()) == 2
        and np.allclose(line.get_xdata(), [0, 1]) and np.allclose(line.get_ydata(), [0, 1])
        and line.get_linestyle() == "--"
    ]


def _panels(fig):
    return [ax for ax in fig.axes if ax.get_label() != COUNTS_LABEL]


def test_diagram_writes_valid_png(tmp_path):
    probs, y = _synthetic(3, seed=0)
    ax = reliability_diagram(probs, y, label="model")
    path = save_figure(ax.figure, tmp_path / "nested" / "dir" / "rel.png")
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 10_000


def test_diagram_contents():
    probs, y = _synthetic(3, seed=1)
    ax = reliability_diagram(probs, y, n_bins=8, label="m")
    identity = _identity_lines(ax)
    assert len(identity) == 1 and identity[0].get_gid() == IDENTITY_GID
    legend_texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend_texts[0].startswith("m: ECE (top-label) = ")
    assert not ax.spines["top"].get_visible() and not ax.spines["right"].get_visible()
    counts_axes = [a for a in ax.figure.axes if a.get_label() == COUNTS_LABEL]
    assert len(counts_axes) == 1


def test_binary_diagram_names_binary_kind_and_can_skip_counts():
    probs, y = _synthetic(2, seed=2)
    ax = reliability_diagram(probs, y, show_counts=False)
    assert ax.get_legend().get_texts()[0].get_text().startswith("ECE (binary) = ")
    assert len(ax.figure.axes) == 1


def test_repeated_calls_share_identity_line_and_count_axis():
    probs, y = _synthetic(3, seed=3)
    over, _ = _synthetic(3, seed=3, temperature=2.5)
    ax = reliability_diagram(probs, y, label="calibrated")
    reliability_diagram(over, y, ax=ax, label="overconfident")
    assert len(_identity_lines(ax)) == 1
    assert len(ax.get_legend().get_texts()) == 2
    assert sum(a.get_label() == COUNTS_LABEL for a in ax.figure.axes) == 1


def test_grid_has_one_panel_per_model(tmp_path):
    results = {
        "a": _synthetic(3, seed=4),
        "b": _synthetic(3, seed=5, temperature=2.0),
        "c": _synthetic(2, seed=6, n=150),
    }
    fig = reliability_grid(results, n_bins=5)
    panels = _panels(fig)
    assert len(panels) == 3
    assert fig.axes[:3] == panels
    assert [ax.get_title() for ax in panels] == ["a", "b", "c"]
    assert all(len(_identity_lines(ax)) == 1 for ax in panels)
    assert save_figure(fig, tmp_path / "grid.png").read_bytes()[:8] == PNG_MAGIC


def _png_is_not_blank(path) -> bool:
    """Whether the PNG at ``path`` has pixels of more than one colour."""
    import matplotlib.image

    pixels = matplotlib.image.imread(path)
    return bool(np.ptp(pixels.reshape(-1, pixels.shape[-1]), axis=0).max() > 0)


def test_a_diagram_drawn_after_plt_figure_is_what_plt_savefig_saves(tmp_path):
    """As with matplotlib's own plots: no ``ax`` draws on pyplot's current axes, so the
    figure ``plt.figure()`` made is what ``plt.savefig`` writes (not a blank image)."""
    import matplotlib.pyplot as plt

    from ppgpc.evaluation import exports

    plt.figure()
    ax = exports.plot_reliability(*_synthetic(3, seed=7))
    assert ax is plt.gca()
    plt.savefig(tmp_path / "rel.png")
    assert _png_is_not_blank(tmp_path / "rel.png")
    blank = plt.figure()
    blank.savefig(tmp_path / "blank.png")
    assert not _png_is_not_blank(tmp_path / "blank.png")  # the check can see a blank image


def test_every_single_panel_plot_takes_ax_and_returns_it():
    import matplotlib.pyplot as plt

    from ppgpc.evaluation.plotting import (confidence_map, probability_map,
                                          reliability_bands_diagram)

    probs, y = _synthetic(3, seed=9)
    _, axes = plt.subplots(1, 4)
    assert reliability_diagram(probs, y, ax=axes[0]) is axes[0]
    assert reliability_bands_diagram(probs, y, ax=axes[1]) is axes[1]
    image = np.random.default_rng(0).uniform(size=(5, 6, 3))
    assert probability_map(image, (0, 1, 0, 1), ax=axes[2]) is axes[2]
    assert confidence_map(image.max(axis=-1), (0, 1, 0, 1), ax=axes[3], num_classes=3) is axes[3]


def test_grids_draw_into_given_axes_and_refuse_too_few():
    import matplotlib.pyplot as plt

    from ppgpc.evaluation.plotting import reliability_bands_grid

    fig, axes = plt.subplots(1, 2)
    results = {"a": _synthetic(3, seed=1), "b": _synthetic(3, seed=2)}
    assert reliability_bands_grid(results, axes=axes) is fig
    assert [ax.get_title() for ax in axes] == ["a", "b"]
    with pytest.raises(ValueError, match="1 axes for 2 panels"):
        reliability_grid(results, axes=axes[:1])


def test_errors(tmp_path):
    probs, y = _synthetic(3, seed=8)
    with pytest.raises(ValueError, match="classwise"):
        reliability_diagram(probs, y, kind="classwise")
    with pytest.raises(ValueError, match="results is empty"):
        reliability_grid({})
    with pytest.raises(ValueError, match="sets"):
        reliability_grid({"a": (probs, y)}, label="x")
    with pytest.raises(ValueError, match=r"\.png"):
        save_figure(reliability_diagram(probs, y).figure, tmp_path / "x.pdf")


def test_bands_diagram_draws_bands_counts_and_equal_mass_bins(tmp_path):
    probs, y = _synthetic(3, seed=9, n=253, temperature=2.0)  # overconfident
    ax = reliability_bands_diagram(probs, y, n_bins=10, min_count=30, n_resamples=300,
                                   label="sharp")
    bands = reliability_bands(probs, y, n_bins=10, min_count=30, n_resamples=300)
    assert bands.count.size == 8 and bands.count.min() >= 30  # 253 // 30 bins
    # one grey bar per bin, from the band's lower to its upper end
    (bars,) = [c for c in ax.collections if c.get_gid() == BAND_GID]
    segments = bars.get_segments()
    assert len(segments) == 8
    np.testing.assert_allclose([seg[0][1] for seg in segments], bands.band_lower)
    np.testing.assert_allclose([seg[1][1] for seg in segments], bands.band_upper)
    # every point labelled with its count, and the counts histogram on the twin axis
    counts = [int(t.get_text()) for t in ax.texts]
    assert counts == bands.count.tolist()
    (twin,) = [a for a in ax.figure.axes if a.get_label() == COUNTS_LABEL]
    assert len(twin.patches) == 2  # filled and outlined stairs
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "95% consistency band" in legend
    assert "sharp: 8 equal-mass bins, 31-32 points each" in legend
    assert any(t.startswith("outside the band (") for t in legend)  # miscalibrated bins ringed
    assert save_figure(ax, tmp_path / "bands.png").read_bytes()[:8] == PNG_MAGIC


def test_bands_diagram_one_vs_rest_axis_labels():
    probs, y = _synthetic(3, seed=10, n=200)
    ax = reliability_bands_diagram(probs, y, kind="classwise", class_index=2, n_resamples=100,
                                   show_counts=False)
    assert ax.get_xlabel() == "predicted p(y = 2)"
    assert not any(a.get_label() == COUNTS_LABEL for a in ax.figure.axes)
