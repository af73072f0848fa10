"""ILRGPClassifier: scikit-learn conventions and clear errors on bad input."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from conftest import assert_estimator_conventions, toy_problem
from ppgpc import ILRGPClassifier, Selection, SoftmaxSVGPClassifier


@pytest.fixture(scope="module")
def fitted():
    X, y = toy_problem(36, 3, seed=11)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    clf = ILRGPClassifier(epsilon="auto", selection=Selection(grid=(0.9, 0.999)),
                          seed=3).fit(X, labels)
    return clf, X, labels


def test_classes_probabilities_and_labels(fitted):
    clf, X, labels = fitted
    assert_estimator_conventions(clf, X, labels, ["setosa", "versicolor", "virginica"],
                                 min_accuracy=0.9)
    assert clf.epsilon_ in (0.9, 0.999)
    assert set(clf.epsilon_scores_) == {0.9, 0.999}
    assert clf.noise_std_ > 0


def test_predictions_are_reproducible(fitted):
    clf, X, _ = fitted
    np.testing.assert_array_equal(clf.predict_proba(X[:5]), clf.predict_proba(X[:5]))


def test_to_inference_data_uses_class_names(fitted):
    clf, X, _ = fitted
    idata = clf.to_inference_data(X[:3])
    assert list(idata.predictions["p"].coords["class_label"].values) == clf.classes_.tolist()
    assert list(idata.predictions["p"].coords["class"].values) == list(range(len(clf.classes_)))


def test_integer_labels_with_gaps_are_encoded():
    X, y = toy_problem(24, 3, seed=1)
    labels = np.array([1, 5, 7])[y]  # like glass: labels need not be 0..C-1
    clf = ILRGPClassifier(epsilon=0.99).fit(X, labels)
    assert clf.classes_.tolist() == [1, 5, 7]
    assert clf.result_.num_classes == 3


@pytest.mark.parametrize(
    "X, y, match",
    [
        (np.array([[0.0, np.nan], [1.0, 2.0], [0.5, 0.1]]), [0, 1, 0], "NaN"),
        (np.array([[0.0, np.inf], [1.0, 2.0], [0.5, 0.1]]), [0, 1, 0], "infinite"),
        (np.zeros(4), [0, 1, 0, 1], "Expected 2D array, got 1D array"),
        (np.zeros((4, 2)), [0, 1, 0], "disagree"),
        (np.zeros((4, 2)), [[0, 1], [0, 1], [1, 0], [1, 1]], "y should be a 1d array"),
        (np.random.default_rng(0).normal(size=(5, 2)), ["a"] * 5, "single class"),
        (np.array([["a", "b"], ["c", "d"]]), [0, 1], r"column 0 holds a string \('a' in row 0\)"),
    ],
)
def test_bad_training_input_raises_clear_errors(X, y, match):
    with pytest.raises(ValueError, match=match):
        ILRGPClassifier(epsilon=0.99).fit(X, y)


def test_bad_prediction_input_and_unknown_labels(fitted):
    clf, X, labels = fitted
    with pytest.raises(ValueError, match="X has 3 features, but ILRGPClassifier is expecting 2"):
        clf.predict_proba(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="not seen during fit: \\['tulip'\\]"):
        clf.score(X[:2], ["setosa", "tulip"])
    with pytest.raises(ValueError, match="NaN"):
        clf.predict(np.array([[np.nan, 0.0]]))


def test_unfitted_and_bad_settings():
    with pytest.raises(NotFittedError, match="not fitted"):
        ILRGPClassifier().predict(np.zeros((1, 2)))
    X, y = toy_problem(12, 2)
    with pytest.raises(ValueError, match="inference='gibbs'"):
        ILRGPClassifier(inference="gibbs").fit(X, y)
    with pytest.raises(ValueError, match="epsilon"):
        ILRGPClassifier(epsilon=1.5).fit(X, y)


def test_too_large_for_exact_inference_names_the_problem():
    """NUTS over the exact posterior is refused past the limit; the type-II default goes
    sparse instead, saying what the exact fit would have cost."""
    X, y = toy_problem(30, 2)
    with pytest.raises(ValueError, match="too many for exact inference.*GiB"):
        ILRGPClassifier(epsilon=0.99, inference="nuts", max_exact_points=20).fit(X, y)
    with pytest.warns(UserWarning, match="exceed max_exact_points=20.*GiB"):
        ILRGPClassifier(epsilon=0.99, max_exact_points=20, num_inducing=10,
                        progress=False).fit(X, y)


def test_a_learned_noise_scale_that_collapses_is_reported():
    """Type-II ML drives exact ILR-GP's learned noise scale to about 1e-92 on 60 glass
    points (clean labels: an interpolating GP fits the smoothed labels exactly). fit warns;
    MAP, whose LogNormal(0, 1) prior holds the scale off zero on a set this small, does not."""
    from ppgpc.datasets import load

    X, y = load("glass")
    keep = np.random.default_rng(0).permutation(len(y))[:60]
    X, y = X[keep], y[keep]
    with pytest.warns(UserWarning, match="noise scale fell to .* default noise level: the GP "
                                         "interpolates"):
        ml = ILRGPClassifier(epsilon=0.99, learn_noise_scale=True,
                             inference="exact").fit(X, y)
    assert ml.noise_scale_ < 1e-6
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="the learned noise scale")
        assert ILRGPClassifier(epsilon=0.99, learn_noise_scale=True, inference="map").fit(
            X, y).noise_scale_ > 1e-6


def test_learned_noise_scale_is_reported_saved_and_refused_where_it_does_not_apply(tmp_path):
    X, y = toy_problem(40, 3, seed=4)
    clf = ILRGPClassifier(epsilon=0.99, learn_noise_scale=True, seed=1).fit(X, y)
    assert clf.noise_scale_ > 0
    assert clf.noise_scale_ == float(clf.result_.hypers["noise_scale"][0, 0])
    sparse = ILRGPClassifier(epsilon=0.99, learn_noise_scale=True, inference="collapsed",
                             num_inducing=8, seed=1).fit(X, y)
    assert sparse.noise_scale_ > 0 and sparse.noise_scale_ != clf.noise_scale_
    loaded = ILRGPClassifier.load(clf.save(tmp_path / "clf"))
    assert loaded.noise_scale_ == clf.noise_scale_
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    assert ILRGPClassifier(epsilon=0.99).fit(X, y).noise_scale_ is None
    # Uncollapsed-ILR (categorical likelihood, no noise to learn) is SVGP's ILR link now
    with pytest.raises(ValueError, match="inference='uncollapsed'.*SoftmaxSVGPClassifier"):
        ILRGPClassifier(learn_noise_scale=True, inference="uncollapsed").fit(X, y)
    with pytest.raises(ValueError, match="learn_noise_scale must be True or False"):
        ILRGPClassifier(epsilon=0.99, learn_noise_scale="yes").fit(X, y)


def test_inducing_inputs_per_ilr_coordinate_are_fitted_saved_and_refused_where_they_do_not_apply(
        tmp_path):
    """``shared_inducing=False``: Collapsed-ILR fits (C-1, M, D) inducing inputs and keeps
    them through a save and load; Uncollapsed-ILR passes the option to its SVGP model; exact
    inference refuses it."""
    X, y = toy_problem(40, 3, seed=4)
    clf = ILRGPClassifier(epsilon=0.99, inference="collapsed", num_inducing=5,
                          shared_inducing=False, seed=1).fit(X, y)
    assert clf.result_.hypers["inducing_inputs"].shape[2:] == (2, 5, 2)
    assert clf.score(X, y) > 0.9
    loaded = ILRGPClassifier.load(clf.save(tmp_path / "clf"))
    assert loaded.shared_inducing is False
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    scaled = ILRGPClassifier(epsilon=0.99, inference="collapsed", num_inducing=5,
                             shared_inducing=False, learn_noise_scale=True, seed=1).fit(X, y)
    assert scaled.noise_scale_.shape == (2,)                       # one per ILR coordinate
    assert np.all(scaled.noise_scale_ > 0) and np.all(scaled.noise_scale_ != 1.0)
    assert scaled.noise_scale_[0] != scaled.noise_scale_[1]
    reloaded = ILRGPClassifier.load(scaled.save(tmp_path / "scaled"))
    np.testing.assert_array_equal(reloaded.noise_scale_, scaled.noise_scale_)
    np.testing.assert_array_equal(reloaded.predict_proba(X), scaled.predict_proba(X))
    svgp = SoftmaxSVGPClassifier(link="ilr", num_inducing=5, shared_inducing=False,
                                 inference_options={"max_iter": 20, "batch_size": 20}
                                 ).fit(X, y)
    assert svgp.result_.hypers["inducing_inputs"].shape[2:] == (2, 5, 2)
    with pytest.raises(ValueError, match="shared_inducing=False .* not 'map'"):
        ILRGPClassifier(epsilon=0.99, shared_inducing=False).fit(X, y)
    with pytest.raises(ValueError, match="shared_inducing must be True or False"):
        ILRGPClassifier(epsilon=0.99, inference="collapsed", shared_inducing="no").fit(X, y)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ILRGPClassifier", "DirichletGPClassifier",
                                  "LogisticSoftmaxGPClassifier", "SoftmaxSVGPClassifier"])
def test_the_shared_docstring_example_runs_for_every_estimator(name):
    """``shared_doc`` writes each estimator's example from ``EXAMPLE_DOC``; the filled-in
    example is valid doctest that passes (fit on wine, two rows of three probabilities)."""
    import doctest

    import ppgpc

    cls = getattr(ppgpc, name)
    assert "{EXAMPLE}" not in cls.__doc__ and "{SHARED_DOC}" not in cls.__doc__
    assert f">>> clf = {name}(" in cls.__doc__
    (test,) = doctest.DocTestFinder(recurse=False).find(cls, name, globs={})
    runner = doctest.DocTestRunner()
    runner.run(test)
    assert runner.summarize(verbose=False) == (0, 5)


def test_shared_doc_refuses_a_docstring_without_its_lines():
    from ppgpc.estimators.base import shared_doc

    class NoExample:
        """Args:
{SHARED_DOC}
        """

    with pytest.raises(ValueError, match="docstring of NoExample has no {EXAMPLE} line"):
        shared_doc(example="epsilon=0.9")(NoExample)


@pytest.mark.parametrize("num_classes", [2, 3, 4, 5, 8, 26])
def test_the_tau_search_extends_only_to_values_proposition_1_takes(num_classes):
    """On heavily overlapping classes the leave-one-out NLL can still fall at the top of the
    tau grid, and the search then extends it: every value it may try must give a noise level
    (with C = 5 it once tried tau = 1.6 and the default fit failed inside the model)."""
    from ppgpc.gp.simplex import proposition1_noise_std
    from ppgpc.models.ilr_gp import TAU_GRID

    est, values = ILRGPClassifier(), list(TAU_GRID)
    while (value := est._beyond("tau", values, "high", num_classes)) is not None:
        values.append(value)
    for tau in values:
        assert proposition1_noise_std(num_classes, 0.99, tau) > 0


def test_the_logistic_softmax_estimator_and_the_driver_hold_the_same_hyperparameters():
    """The estimator's NUTS is one call to the driver: ``fit(..., method="nuts",
    form="latent")`` on the estimator's scaled inputs runs the same CAVI fit of the kernel
    (``Latent.fit_hypers``) and the same chains, and records how the values were obtained."""
    import numpy as np

    from ppgpc import LogisticSoftmaxGPClassifier
    from ppgpc.infer import fit

    rng = np.random.default_rng(3)
    y = np.arange(45) % 3
    X = rng.normal(size=(45, 2)) + 2.0 * np.eye(3, 2)[y]
    short = {"num_warmup": 50, "num_samples": 50, "max_samples": 50}
    clf = LogisticSoftmaxGPClassifier(progress=False, inference_options=short).fit(X, y)
    direct = fit("logistic_softmax", clf.standardizer_.transform(X), y, method="nuts",
                 form="latent", progress_bar=False, **short)
    assert set(direct.hypers) == set(clf.result_.hypers)
    for name, value in direct.hypers.items():
        np.testing.assert_array_equal(np.asarray(value), np.asarray(clf.result_.hypers[name]))
    np.testing.assert_array_equal(np.asarray(direct.latent), np.asarray(clf.result_.latent))
    for info in (direct.info, clf.result_.info):
        assert info.hyperparameters == "CAVI ELBO (type-II MAP)" and info.cavi.converged
        assert [c.stage for c in info.convergence.optimizers] == ["CAVI"]


def test_the_svgp_estimator_and_the_driver_hold_the_same_hyperparameters_for_nuts():
    """``SoftmaxSVGPClassifier(inference="nuts")`` is one call to the driver: ``fit(...,
    method="nuts", form="latent")`` with the estimator's model options runs the same SVI fit
    of the kernel at the model's schedule (``svi_hypers``) and the same chains, and both
    record the SVI run and its check."""
    import numpy as np

    from ppgpc import SoftmaxSVGPClassifier
    from ppgpc.infer import fit

    rng = np.random.default_rng(4)
    y = np.arange(36) % 3
    X = rng.normal(size=(36, 2)) + 2.0 * np.eye(3, 2)[y]
    short = {"num_warmup": 50, "num_samples": 50, "max_samples": 50}
    clf = SoftmaxSVGPClassifier(inference="nuts", progress=False,
                                inference_options=short).fit(X, y)
    direct = fit("softmax_svgp", clf.standardizer_.transform(X), y, method="nuts",
                 form="latent", progress_bar=False,
                 model_options=clf._svi_model_options(len(y), None), **short)
    assert set(direct.hypers) == set(clf.result_.hypers)
    for name, value in direct.hypers.items():
        np.testing.assert_array_equal(np.asarray(value), np.asarray(clf.result_.hypers[name]))
    np.testing.assert_array_equal(np.asarray(direct.latent), np.asarray(clf.result_.latent))
    for info in (direct.info, clf.result_.info):
        assert info.hyperparameters == "SVI ELBO (type-II ML)"
        assert info.svi is not None and info.svi.steps > 0
        assert [c.stage for c in info.convergence.optimizers][0].startswith("SVI")
