"""ppgpc.evaluation.maps: the input grid (a box in 2-D, the principal plane beyond), RGB pixels
from probabilities, and the maps of known classifiers drawn over the grid."""

import numpy as np
import pytest

from fitted_cases import toy
from ppgpc.evaluation import maps
from ppgpc.evaluation.plotting import save_figure


def test_input_grid_in_two_dimensions_covers_the_data():
    X = toy()[0]
    grid = maps.input_grid(X, grid_size=7, margin=0.1)
    assert grid.points.shape == (49, 2)
    span = X.max(0) - X.min(0)
    np.testing.assert_allclose(grid.points.min(0), X.min(0) - 0.1 * span)
    np.testing.assert_allclose(grid.points.max(0), X.max(0) + 0.1 * span)
    np.testing.assert_allclose(grid.points[8], [grid.u[1], grid.v[1]])  # row-major (i=1, j=1)


def test_input_grid_beyond_two_dimensions_is_the_principal_plane():
    rng = np.random.default_rng(3)
    # 5-D inputs on scales 1..100 that vary mostly along two directions
    latent = rng.normal(size=(200, 2)) * [3.0, 1.5]
    X = latent @ rng.normal(size=(2, 5)) + 0.05 * rng.normal(size=(200, 5))
    X = X * [1.0, 10.0, 100.0, 1.0, 5.0] + 7.0
    grid = maps.input_grid(X, grid_size=5)
    assert "principal components" in grid.description
    np.testing.assert_allclose(grid.origin, X.mean(0))
    scale = X.std(0)
    z_axes = grid.axes / scale                           # directions in standardised space
    np.testing.assert_allclose(z_axes @ z_axes.T, np.eye(2), atol=1e-10)
    coords = grid.project(grid.points)                  # the grid lies in the plane
    np.testing.assert_allclose(coords[:, 0], np.tile(grid.u, 5), atol=1e-8)
    np.testing.assert_allclose(coords[:, 1], np.repeat(grid.v, 5), atol=1e-8)
    # two components explain nearly all the standardised variance
    Z = (X - X.mean(0)) / scale
    resid = Z - (Z @ z_axes.T) @ z_axes
    assert np.sum(resid**2) < 0.05 * np.sum(Z**2)
    with pytest.raises(ValueError, match="D >= 2"):
        maps.input_grid(X[:, :1])


def test_rgb_image_three_classes_and_a_palette_beyond():
    probs = np.array([[1.0, 0.0, 0.0], [0.2, 0.3, 0.5], [0.0, 0.0, 1.0], [1 / 3] * 3])
    image, note = maps.rgb_image(probs, (2, 2))
    np.testing.assert_allclose(image.reshape(4, 3), probs)
    assert note == "RGB = p(class 0, 1, 2)"
    from ppgpc.evaluation.plotting import CLASS_PALETTE

    p4 = np.array([[0.5, 0.5, 0.0, 0.0]])
    image, note = maps.rgb_image(p4, (1, 1))
    np.testing.assert_allclose(image[0, 0], 0.5 * np.add(CLASS_PALETTE[0], CLASS_PALETTE[1]))
    assert "mix of 4 class colours" in note
    with pytest.raises(ValueError, match="for a"):
        maps.rgb_image(p4, (2, 2))


def _softmax_of_position(Z):
    """A known classifier: p = softmax(x1, x2, 0) at each input."""
    logits = np.column_stack([Z[:, 0], Z[:, 1], np.zeros(len(Z))])
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_probability_maps_draw_one_panel_per_model(tmp_path):
    X, y = toy()
    fig = maps.plot_probability_maps({"softmax": _softmax_of_position,
                                      "uniform": lambda Z: np.full((len(Z), 3), 1 / 3)},
                                     X, y, grid_size=12)
    panels = [a for a in fig.axes if a.get_title()]
    assert [a.get_title() for a in panels] == ["softmax", "uniform",
                                               "softmax: top-class probability",
                                               "uniform: top-class probability"]
    grid = maps.input_grid(X, grid_size=12)
    expected = _softmax_of_position(grid.points).reshape(12, 12, 3)
    np.testing.assert_allclose(panels[0].get_images()[0].get_array(), expected)
    image = panels[1].get_images()[0].get_array()
    np.testing.assert_allclose(image, 1 / 3)            # grey where all classes are equal
    assert panels[0].collections[0].get_offsets().shape == (30, 2)  # training points drawn
    assert fig.get_suptitle() == "RGB = p(class 0, 1, 2)"
    np.testing.assert_allclose(panels[2].get_images()[0].get_array(), expected.max(axis=-1))
    np.testing.assert_allclose(panels[3].get_images()[0].get_array(), 1 / 3)
    assert save_figure(fig, tmp_path / "rgb.png").read_bytes()[:4] == b"\x89PNG"
    alone = maps.plot_probability_maps(_softmax_of_position, X, y, grid_size=12,
                                       confidence=False)
    assert len([a for a in alone.axes if a.get_images()]) == 1
