"""ppgpc.evaluation.exports against hand-computed values, from arrays and from an
InferenceData; and the public names of ppgpc.evaluation's modules, one object each."""

import types

import numpy as np
import pytest

from fitted_cases import NUM_PRED, fitted, toy
from ppgpc.evaluation import exports
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
    out = exports.scores(PROBS, Y, n_bins=2)
    assert out["accuracy"] == 0.5
    assert out["nll"] == pytest.approx(-np.log([0.7, 0.6, 0.3, 0.2]).mean(), rel=1e-12)
    assert out["brier"] == pytest.approx(0.53, rel=1e-12)
    assert out["ece_kind"] == "top-label"
    assert out["ece"] == pytest.approx(0.40, rel=1e-12)
    assert out["classwise_ece"] == pytest.approx(0.15, rel=1e-12)
    per_class = exports.classwise_ece(PROBS, Y, n_bins=2, per_class=True)
    np.testing.assert_allclose(per_class, [0.275, 0.15, 0.025], rtol=1e-12)


def test_table_names_the_ece_kinds():
    table = exports.calibration_table({"model": PROBS}, Y, n_bins=2)
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
    probs = exports.predictive_probabilities(idata)        # p_mean: predict_proba
    np.testing.assert_array_equal(probs, np.asarray(
        fitted("logistic_softmax", "cavi").predict_proba(toy()[0][:NUM_PRED])))
    np.testing.assert_allclose(probs, p.mean(axis=(0, 1)), rtol=1e-12)  # every draw kept
    labels = toy()[1][:NUM_PRED]
    np.testing.assert_array_equal(exports.true_labels(idata), labels)
    assert exports.scores(idata) == exports.scores(probs, labels)
    # the training inputs: the model's link applied to every posterior draw of f
    result = fitted("logistic_softmax", "cavi")
    train = np.exp(np.asarray(result.spec.log_link(result.latent))).mean(axis=(0, 1))
    np.testing.assert_allclose(exports.predictive_probabilities(idata, "posterior"), train,
                               rtol=1e-10)
    assert exports.scores(idata, group="posterior")["accuracy"] > 0.9


def test_missing_inputs_are_clear_errors(idata):
    bare = to_inference_data(fitted("logistic_softmax", "cavi"))
    with pytest.raises(ValueError, match="no predictions group"):
        exports.scores(bare)
    with pytest.raises(ValueError, match="pass the labels y"):
        exports.scores(PROBS)
    with pytest.raises(ValueError, match="group must be"):
        exports.scores(idata, group="prior")


def test_reliability_plots_from_an_inference_data(idata, tmp_path):
    ax = exports.plot_reliability(idata, label="LSM", n_bins=5)
    assert any(line.get_gid() == IDENTITY_GID for line in ax.get_lines())
    assert any(other.get_label() == COUNTS_LABEL for other in ax.figure.axes)
    fig = exports.plot_classwise_reliability(idata, n_bins=5)
    panels = [a for a in fig.axes if a.get_label() != COUNTS_LABEL and a.get_visible()]
    assert [a.get_title() for a in panels] == ["class 0", "class 1", "class 2"]
    assert "class-wise ECE" in fig.get_suptitle()
    assert save_figure(fig, tmp_path / "cw.png").read_bytes()[:4] == b"\x89PNG"


def test_calibration_test_and_bands_from_an_inference_data(idata):
    from ppgpc.evaluation.calibration import skce_test
    from ppgpc.evaluation.plotting import BAND_GID

    probs, labels = exports.predictive_probabilities(idata), exports.true_labels(idata)
    result = exports.calibration_test(idata, n_resamples=99, seed=2)
    assert result == skce_test(probs, labels, n_resamples=99, seed=2)
    assert exports.calibration_test(PROBS, Y, n_resamples=9) == skce_test(PROBS, Y,
                                                                          n_resamples=9)
    ax = exports.plot_reliability(idata, min_count=5, n_resamples=50)
    assert any(c.get_gid() == BAND_GID for c in ax.collections)
    import matplotlib.pyplot as plt

    ax = exports.plot_reliability(idata, bins="equal-width", n_bins=5, ax=plt.figure().gca())
    assert not any(c.get_gid() == BAND_GID for c in ax.collections)
    with pytest.raises(ValueError, match="bins must be one of"):
        exports.plot_reliability(idata, bins="quantile")


def test_confidence_check_from_an_inference_data(idata):
    """Training points (posterior_predictive) and prediction points (predictions["y"]) give
    ``ppgpc.evaluation.calibration.confidence_ppc`` of the arrays the export holds; the
    diagram draws one band bar per bin between the replicated quantiles."""
    from ppgpc.evaluation.calibration import confidence_ppc
    from ppgpc.evaluation.plotting import BAND_GID, confidence_ppc_diagram

    for group, rep in [("posterior", idata.posterior_predictive["y"]),
                       ("predictions", idata.predictions["y"])]:
        ppc = exports.confidence_check(idata, group=group, min_count=5)
        expected = confidence_ppc(exports.predictive_probabilities(idata, group),
                                  exports.true_labels(idata, group),
                                  np.asarray(rep.values), min_count=5)
        np.testing.assert_array_equal(ppc.replicated, expected.replicated)
        np.testing.assert_array_equal(ppc.accuracy, expected.accuracy)
        sizes = idata.posterior.sizes
        assert ppc.replicated.shape[0] == sizes["chain"] * sizes["draw"]
    ax = confidence_ppc_diagram(ppc, label="LSM")
    (bars,) = [c for c in ax.collections if c.get_gid() == BAND_GID]
    np.testing.assert_allclose([seg[0][1] for seg in bars.get_segments()], ppc.band_lower)
    assert "95% of replicated labels" in [t.get_text() for t in ax.get_legend().get_texts()]
    with pytest.raises(ValueError, match="needs a ppgpc InferenceData"):
        exports.confidence_check(PROBS)


# ------------------------------------------------------------------ one name, one meaning
def _names_with_two_objects(modules) -> dict:
    """{name: [modules]} for each name that two of ``modules`` list in ``__all__`` for
    different objects. A submodule listed by its package is its table of contents, not a
    function or class, and is left out (``chain_diagnostics`` names both a module and its
    function)."""
    owners: dict = {}
    for module in modules:
        for name in module.__all__:
            obj = getattr(module, name)
            if not isinstance(obj, types.ModuleType):
                owners.setdefault(name, {})[module.__name__] = obj
    return {name: sorted(by_module) for name, by_module in owners.items()
            if len({id(obj) for obj in by_module.values()}) > 1}


def test_no_public_name_of_the_evaluation_modules_means_two_things():
    """A name exported by two modules of ppgpc.evaluation (the package included) is one
    object, so ``from ppgpc.evaluation.X import name`` means the same whatever X is."""
    import importlib
    import pkgutil

    import ppgpc.evaluation as evaluation

    modules = [evaluation] + [importlib.import_module(f"{evaluation.__name__}.{info.name}")
                              for info in pkgutil.iter_modules(evaluation.__path__)]
    assert {m.__name__.rsplit(".", 1)[-1] for m in modules} >= {"exports", "maps", "metrics"}
    assert _names_with_two_objects(modules) == {}


def test_the_name_check_sees_a_name_with_two_meanings():
    from ppgpc.evaluation import metrics

    other = types.ModuleType("other")
    other.__all__ = ["evaluate", "ece"]
    other.evaluate, other.ece = (lambda source: source), metrics.ece
    assert _names_with_two_objects([metrics, other]) == {"evaluate": ["other", metrics.__name__]}
