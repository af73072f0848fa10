"""ppgpc.evaluation.diagnostics against hand-computed values, from arrays and from an
InferenceData."""

import numpy as np
import pytest

from fitted_cases import NUM_PRED, fitted, toy
from ppgpc.evaluation import diagnostics
from ppgpc.evaluation.plotting import COUNTS_LABEL, IDENTITY_GID, save_figure
from ppgpc.infer import to_inference_data

# Four points, three classes. By hand:
#   argmax = 0, 1, 2, 0 -> correct, correct, wrong (y = 1), wrong (y = 2): accuracy 0.5
#   NLL = -(log .7 + log .6 + log .3 + log .2) / 4 = 0.9830...
#   Brier = (.09+.04+.01 + .04+.16+.04 + .25+.49+.04 + .16+.16+.64) / 4 = 0.53
#   top-label ECE, 2 bins: confidences .7 .6 .5 .4 -> bin (.5, 1]: {.7, .6} acc 1, conf .65;
#     bin [0, .5]: {.5, .4} acc 0, conf .45  ->  ECE = .5 * .35 + .5 * .45 = 0.40
#   class-wise ECE, 2 bins: class 0 scores .7 .2 .2 .4 vs hits 1 0 0 0:
#     bin [0,.5] {.2,.2,.4}: conf .2667 acc 0; bin (.5,1] {.7}: conf .7 acc 1 -> .75*.2667 + .25*.3
# = .275
#   class 1 scores .1 .6 .3 .4 vs hits 0 1 1 0: [0,.5] {.1,.3,.4} conf .2667 acc 1/3 -> .0667*.75;
#     (.5,1] {.6} acc 1 -> .4*.25 ... = .05 + .1 = .15
#   class 2 scores .2 .2 .5 .2 vs hits 0 0 0 1: [0,.5] all four: conf .275 acc .25 -> .025
#   class-wise ECE = (.275 + .15 + .025) / 3 = 0.15
PROBS = np.array([[0.7, 0.1, 0.2], [0.2, 0.6, 0.2], [0.2, 0.3, 0.5], [0.4, 0.4, 0.2]])
Y = np.array([0, 1, 1, 2])


def test_metrics_from_arrays_match_hand_computation():
    out = diagnostics.evaluate(PROBS, Y, n_bins=2)
    assert out["accuracy"] == 0.5
    assert out["nll"] == pytest.approx(-np.log([0.7, 0.6, 0.3, 0.2]).mean(), rel=1e-12)
    assert out["brier"] == pytest.approx(0.53, rel=1e-12)
    assert out["ece_kind"] == "top-label"
    assert out["ece"] == pytest.approx(0.40, rel=1e-12)
    assert out["classwise_ece"] == pytest.approx(0.15, rel=1e-12)
    per_class = diagnostics.classwise_ece(PROBS, Y, n_bins=2, per_class=True)
    np.testing.assert_allclose(per_class, [0.275, 0.15, 0.025], rtol=1e-12)


def test_table_names_the_ece_kinds():
    table = diagnostics.calibration_table({"model": PROBS}, Y, n_bins=2)
    text = repr(table)
    assert "top-label" in text and "class-wise" in text and "2 equal-width bins" in text
    frame = table.to_dataframe()
    assert list(frame.columns) == ["accuracy", "NLL", "Brier", "ECE (top-label)",
                                   "ECE (class-wise)"]
    assert frame.loc["model", "ECE (top-label)"] == pytest.approx(0.40)
    assert "top-label" in table._repr_html_()


@pytest.fixture(scope="module")
def idata():
    X, y = toy()
    return to_inference_data(fitted("logistic_softmax", "cavi"), X[:NUM_PRED],
                                                                y_pred=y[:NUM_PRED])


def test_metrics_from_an_inference_data(idata):
    p = idata.predictions["p"].values                       # (chain, draw, pred, class)
    probs = diagnostics.predictive_probabilities(idata)
    np.testing.assert_allclose(probs, p.mean(axis=(0, 1)), rtol=1e-12)
    labels = toy()[1][:NUM_PRED]
    np.testing.assert_array_equal(diagnostics.true_labels(idata), labels)
    assert diagnostics.evaluate(idata) == diagnostics.evaluate(probs, labels)
    # the training inputs: the model's link applied to every posterior draw of f
    result = fitted("logistic_softmax", "cavi")
    train = np.exp(np.asarray(result.spec.log_link(result.latent))).mean(axis=(0, 1))
    np.testing.assert_allclose(diagnostics.predictive_probabilities(idata, "posterior"), train,
                               rtol=1e-10)
    assert diagnostics.evaluate(idata, group="posterior")["accuracy"] > 0.9


def test_missing_inputs_are_clear_errors(idata):
    bare = to_inference_data(fitted("logistic_softmax", "cavi"))
    with pytest.raises(ValueError, match="no predictions group"):
        diagnostics.evaluate(bare)
    with pytest.raises(ValueError, match="pass the labels y"):
        diagnostics.evaluate(PROBS)
    with pytest.raises(ValueError, match="group must be"):
        diagnostics.evaluate(idata, group="prior")


def test_reliability_plots_from_an_inference_data(idata, tmp_path):
    ax = diagnostics.reliability_diagram(idata, label="LSM", n_bins=5)
    assert any(line.get_gid() == IDENTITY_GID for line in ax.get_lines())
    assert any(other.get_label() == COUNTS_LABEL for other in ax.figure.axes)
    fig = diagnostics.classwise_reliability(idata, n_bins=5)
    panels = [a for a in fig.axes if a.get_label() != COUNTS_LABEL and a.get_visible()]
    assert [a.get_title() for a in panels] == ["class 0", "class 1", "class 2"]
    assert "class-wise ECE" in fig.get_suptitle()
    assert save_figure(fig, tmp_path / "cw.png").read_bytes()[:4] == b"\x89PNG"


def test_calibration_test_and_bands_from_an_inference_data(idata):
    from ppgpc.evaluation.calibration import skce_test
    from ppgpc.evaluation.plotting import BAND_GID

    probs, labels = diagnostics.predictive_probabilities(idata), diagnostics.true_labels(idata)
    result = diagnostics.calibration_test(idata, n_resamples=99, seed=2)
    assert result == skce_test(probs, labels, n_resamples=99, seed=2)
    assert diagnostics.calibration_test(PROBS, Y, n_resamples=9) == skce_test(PROBS, Y,
                                                                              n_resamples=9)
    ax = diagnostics.reliability_bands(idata, min_count=5, n_resamples=50)
    assert any(c.get_gid() == BAND_GID for c in ax.collections)


def test_input_grid_in_two_dimensions_covers_the_data():
    X = toy()[0]
    grid = diagnostics.input_grid(X, grid_size=7, margin=0.1)
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
    grid = diagnostics.input_grid(X, grid_size=5)
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
        diagnostics.input_grid(X[:, :1])


def test_rgb_image_three_classes_and_a_palette_beyond():
    probs = np.array([[1.0, 0.0, 0.0], [0.2, 0.3, 0.5], [0.0, 0.0, 1.0], [1 / 3] * 3])
    image, note = diagnostics.rgb_image(probs, (2, 2))
    np.testing.assert_allclose(image.reshape(4, 3), probs)
    assert note == "RGB = p(class 0, 1, 2)"
    from ppgpc.evaluation.plotting import CLASS_PALETTE

    p4 = np.array([[0.5, 0.5, 0.0, 0.0]])
    image, note = diagnostics.rgb_image(p4, (1, 1))
    np.testing.assert_allclose(image[0, 0], 0.5 * np.add(CLASS_PALETTE[0], CLASS_PALETTE[1]))
    assert "mix of 4 class colours" in note
    with pytest.raises(ValueError, match="for a"):
        diagnostics.rgb_image(p4, (2, 2))


def _softmax_of_position(Z):
    """A known classifier: p = softmax(x1, x2, 0) at each input."""
    logits = np.column_stack([Z[:, 0], Z[:, 1], np.zeros(len(Z))])
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_probability_map_draws_one_panel_per_model(tmp_path):
    X, y = toy()
    fig = diagnostics.probability_map({"softmax": _softmax_of_position,
                                       "uniform": lambda Z: np.full((len(Z), 3), 1 / 3)},
                                      X, y, grid_size=12)
    panels = [a for a in fig.axes if a.get_title()]
    assert [a.get_title() for a in panels] == ["softmax", "uniform",
                                               "softmax: top-class probability",
                                               "uniform: top-class probability"]
    grid = diagnostics.input_grid(X, grid_size=12)
    expected = _softmax_of_position(grid.points).reshape(12, 12, 3)
    np.testing.assert_allclose(panels[0].get_images()[0].get_array(), expected)
    image = panels[1].get_images()[0].get_array()
    np.testing.assert_allclose(image, 1 / 3)            # grey where all classes are equal
    assert panels[0].collections[0].get_offsets().shape == (30, 2)  # training points drawn
    assert fig.get_suptitle() == "RGB = p(class 0, 1, 2)"
    np.testing.assert_allclose(panels[2].get_images()[0].get_array(), expected.max(axis=-1))
    np.testing.assert_allclose(panels[3].get_images()[0].get_array(), 1 / 3)
    assert save_figure(fig, tmp_path / "rgb.png").read_bytes()[:4] == b"\x89PNG"
    alone = diagnostics.probability_map(_softmax_of_position, X, y, grid_size=12,
                                        confidence=False)
    assert len([a for a in alone.axes if a.get_images()]) == 1


def test_confidence_ppc_from_an_inference_data(idata):
    """Training points (posterior_predictive) and prediction points (predictions["y"]) give
    ``ppgpc.evaluation.calibration.confidence_ppc`` of the arrays the export holds; the
    diagram draws one band bar per bin between the replicated quantiles."""
    from ppgpc.evaluation.calibration import confidence_ppc
    from ppgpc.evaluation.plotting import BAND_GID, confidence_ppc_diagram

    for group, rep in [("posterior", idata.posterior_predictive["y"]),
                       ("predictions", idata.predictions["y"])]:
        ppc = diagnostics.confidence_ppc(idata, group=group, min_count=5)
        expected = confidence_ppc(diagnostics.predictive_probabilities(idata, group),
                                  diagnostics.true_labels(idata, group),
                                  np.asarray(rep.values), min_count=5)
        np.testing.assert_array_equal(ppc.replicated, expected.replicated)
        np.testing.assert_array_equal(ppc.accuracy, expected.accuracy)
        assert ppc.replicated.shape[0] == idata.posterior.sizes["chain"] * idata.posterior.sizes["draw"]
    ax = confidence_ppc_diagram(ppc, label="LSM")
    (bars,) = [c for c in ax.collections if c.get_gid() == BAND_GID]
    np.testing.assert_allclose([seg[0][1] for seg in bars.get_segments()], ppc.band_lower)
    assert "95% of replicated labels" in [t.get_text() for t in ax.get_legend().get_texts()]
    with pytest.raises(ValueError, match="needs a ppgpc InferenceData"):
        diagnostics.confidence_ppc(PROBS)
