"""scikit-learn compatibility of the four estimators (``ppgpc.estimators``).

``check_estimator`` runs scikit-learn's own conformance checks on each (through
``parametrize_with_checks``, one test per check); the other tests use the tools a user
reaches for: ``clone``, a ``Pipeline`` with a scaler, ``cross_val_score``, ``GridSearchCV``,
pickle (what joblib's worker processes need), and the errors for unfitted estimators,
continuous targets and prediction columns that differ from fit's.

The estimators run with short fits here (few optimiser iterations, few inducing points):
the checks test the interface, not the inference, which the model test modules check.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone, is_classifier
from sklearn.exceptions import DataConversionWarning, NotFittedError
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import (
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
    parametrize_with_checks,
)

import ppgpc
from conftest import SMALL, toy_problem
from ppgpc import (
    ConvergenceWarning,
    DirichletGPClassifier,
    ILRGPClassifier,
    LogisticSoftmaxGPClassifier,
    SoftmaxSVGPClassifier,
)

# the short fits stop the optimisers early on purpose
pytestmark = pytest.mark.filterwarnings("ignore::ppgpc.ConvergenceWarning")

ESTIMATORS = (ILRGPClassifier, DirichletGPClassifier, LogisticSoftmaxGPClassifier,
              SoftmaxSVGPClassifier)

ITERATIONS = 5 if SMALL else 20
"""Optimiser iterations (L-BFGS, CAVI) of the short fits."""

SVI_STEPS = 20 if SMALL else 60
"""SVI steps of the short SVGP fits."""


def quick(cls, **params):
    """``cls`` with short fits: fixed smoothing levels (no grid search), ``ITERATIONS``
    optimiser iterations, 50 CAVI draws for the logistic-softmax GP, and for SVGP
    ``SVI_STEPS`` steps on 8 inducing inputs."""
    if cls is ILRGPClassifier:
        base = dict(epsilon=0.99, tau=0.1, inference_options={"max_iter": ITERATIONS})
    elif cls is DirichletGPClassifier:
        base = dict(alpha_eps=0.01, inference_options={"max_iter": ITERATIONS})
    elif cls is LogisticSoftmaxGPClassifier:
        base = dict(inference="cavi", inference_options={"max_iter": ITERATIONS,
                                                          "num_draws": 50})
    else:
        base = dict(num_inducing=8, inference_options={"max_iter": SVI_STEPS,
                                                       "learning_rate": 0.05})
    return cls(**{**base, **params})


GRIDS = {
    ILRGPClassifier: {"epsilon": [0.9, 0.99]},
    DirichletGPClassifier: {"alpha_eps": [0.01, 0.1]},
    LogisticSoftmaxGPClassifier: {"kernel": ["rbf", "rbf-ard"]},
    SoftmaxSVGPClassifier: {"inference_options": [
        {"max_iter": SVI_STEPS, "learning_rate": rate} for rate in (0.02, 0.05)]},
}
"""A parameter of each estimator for ``GridSearchCV`` to choose, two values."""


@pytest.fixture(scope="module")
def blobs():
    """(X (36, 2), y (36,)) three separated classes with string labels."""
    X, y = toy_problem(36, 3, seed=3)
    return X, np.array(["a", "b", "c"])[y]


# ------------------------------------------------------------------ check_estimator
@pytest.mark.slow
@parametrize_with_checks([quick(cls) for cls in ESTIMATORS])
def test_check_estimator(estimator, check):
    """scikit-learn's conformance checks, every one of them: none is expected to fail, so
    none is declared (``expected_failed_checks``). scikit-learn itself skips
    ``check_array_api_input`` unless ``SCIPY_ARRAY_API=1`` is set (pytest reports the skip
    and its reason); ``test_check_array_api_input_with_scipy_array_api`` runs it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # short fits stop early
        check(estimator)


ARRAY_API_CHECK = """
import warnings
from sklearn.utils.estimator_checks import check_array_api_input
from test_sklearn import ESTIMATORS, quick
from ppgpc import ConvergenceWarning
warnings.simplefilter("ignore", ConvergenceWarning)
for cls in ESTIMATORS:
    check_array_api_input(cls.__name__, quick(cls), array_namespace="numpy",
                          expect_only_array_outputs=False)
    print("passed", cls.__name__)
"""


@pytest.mark.slow
def test_check_array_api_input_with_scipy_array_api():
    """The one check ``check_estimator`` skips here: ``check_array_api_input`` needs
    ``SCIPY_ARRAY_API=1`` before SciPy is imported, so it runs in a fresh process. For
    estimators without array-API support (the default tag) it checks that enabling
    scikit-learn's array-API dispatch leaves fits on NumPy inputs unchanged."""
    here = Path(__file__).parent  # test_sklearn.py here, conftest.py one folder up
    env = {**os.environ, "SCIPY_ARRAY_API": "1",
           "PYTHONPATH": os.pathsep.join([str(here), str(here.parent)])}
    run = subprocess.run([sys.executable, "-c", ARRAY_API_CHECK], env=env, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split("\n")[:-1] == [f"passed {cls.__name__}" for cls in ESTIMATORS]


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_defaults_are_valid_scikit_learn_parameters(cls):
    """The default constructor's parameters pass scikit-learn's checks of parameters (the
    fast settings above are what the other tests run; these are what users get)."""
    estimator = cls()
    assert is_classifier(estimator)
    for check in (check_parameters_default_constructible, check_no_attributes_set_in_init,
                  check_get_params_invariance, check_set_params):
        check(cls.__name__, estimator)
    params = estimator.get_params()
    assert clone(estimator).get_params() == params
    assert estimator.set_params(seed=3) is estimator and estimator.seed == 3


# ------------------------------------------------------------------ scikit-learn's tools
@pytest.mark.slow
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_clone_pipeline_cross_validation_and_grid_search(cls, blobs):
    X, y = blobs
    estimator = quick(cls)
    copy = clone(estimator)
    assert copy is not estimator and copy.get_params() == estimator.get_params()

    pipeline = make_pipeline(StandardScaler(), quick(cls, standardize=False))
    pipeline.fit(X, y)
    assert pipeline.predict_proba(X).shape == (len(X), 3)
    assert pipeline.score(X, y) > 0.8

    scores = cross_val_score(quick(cls), X, y, cv=3)
    assert scores.shape == (3,) and np.all(scores > 0.6)

    (name, values), = GRIDS[cls].items()
    search = GridSearchCV(pipeline, {f"{type(pipeline[-1]).__name__.lower()}__{name}": values},
                          cv=2).fit(X, y)
    assert getattr(search.best_estimator_[-1], name) in values
    assert search.predict(X).shape == (len(X),)


@pytest.mark.slow
def test_cross_validation_in_worker_processes(blobs):
    """joblib's worker processes get the estimator and its fits by pickle: SVGP's model spec
    once held a local function, which made ``n_jobs > 1`` fail."""
    X, y = blobs
    scores = cross_val_score(quick(SoftmaxSVGPClassifier), X, y, cv=2, n_jobs=2)
    assert scores.shape == (2,) and np.all(scores > 0.6)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_pickle_round_trip_predicts_the_same(cls, blobs):
    X, y = blobs
    estimator = quick(cls).fit(X, y)
    loaded = pickle.loads(pickle.dumps(estimator))
    assert type(loaded) is cls and loaded.get_params() == estimator.get_params()
    np.testing.assert_array_equal(loaded.predict_proba(X), estimator.predict_proba(X))
    np.testing.assert_array_equal(loaded.classes_, estimator.classes_)
    assert loaded.n_iter_ == estimator.n_iter_ >= 1


def test_n_iter_counts_the_final_fits_iterations(blobs):
    """``n_iter_`` is what the optimiser of the final fit ran: L-BFGS iterations of type-II
    MAP, CAVI iterations, SVI steps; 0 when the hyperparameters are given."""
    X, y = blobs
    ilr = quick(ILRGPClassifier).fit(X, y)
    assert ilr.n_iter_ == ilr.result_.info.optimizer.iterations
    assert 1 <= ilr.n_iter_ <= ITERATIONS
    cavi = quick(LogisticSoftmaxGPClassifier).fit(X, y)
    assert cavi.n_iter_ == cavi.result_.info.cavi.iterations <= ITERATIONS
    svgp = quick(SoftmaxSVGPClassifier).fit(X, y)
    assert svgp.n_iter_ == svgp.result_.info.svi.steps and 1 <= svgp.n_iter_ <= SVI_STEPS
    given = ILRGPClassifier(epsilon=0.99, tau=0.1, kernel="rbf", inference="exact",
                            inference_options={"hyperparameters": {"kernel_variance": 1.0,
                                                                   "kernel_lengthscale": 1.0}})
    assert given.fit(X, y).n_iter_ == 0


# ------------------------------------------------------------------ errors and feature names
def test_feature_names_are_recorded_and_enforced(blobs):
    X, y = blobs
    frame = pd.DataFrame(X, columns=["width", "height"])
    clf = quick(ILRGPClassifier).fit(frame, y)
    assert clf.feature_names_in_.tolist() == ["width", "height"] and clf.n_features_in_ == 2
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        from_array = clf.predict_proba(X)  # scikit-learn's warning: the names go unchecked
    np.testing.assert_array_equal(clf.predict_proba(frame), from_array)
    expected = r"the model was fitted on the columns \['width', 'height'\], in that order"
    with pytest.raises(ValueError, match="X has the columns in another order; " + expected):
        clf.predict_proba(frame[["height", "width"]])
    with pytest.raises(ValueError, match=r"X lacks \['height'\]; " + expected):
        clf.predict(frame.rename(columns={"height": "depth"}))
    with pytest.raises(ValueError, match=r"X has columns not seen in fit \['depth'\]"):
        clf.predict(frame.assign(depth=1.0))
    with pytest.raises(ValueError, match="in another order"):
        clf.score(frame[["height", "width"]], y)
    # refitted on an array, the names are gone
    assert not hasattr(clf.fit(X, y), "feature_names_in_")


@pytest.mark.parametrize("dtype, kind", [(object, "strings"), ("category", "categories"),
                                         ("string", "strings")])
def test_a_column_of_words_is_named_with_how_to_drop_or_encode_it(blobs, dtype, kind):
    X, y = blobs
    colour = np.where(np.arange(len(y)) % 2 == 0, "red", "blue")
    frame = pd.DataFrame(X, columns=["width", "height"]).assign(
        colour=pd.Series(colour).astype(dtype))
    with pytest.raises(ValueError, match=f"X's column 'colour' holds {kind} \\(e.g. 'red'\\), "
                                         r"not numbers; drop it \(X.drop\(columns=\['colour'\]"):
        quick(ILRGPClassifier).fit(frame, y)
    # numbers in an object column are numbers
    numbers = pd.DataFrame(X, columns=["width", "height"]).astype(object)
    assert quick(ILRGPClassifier).fit(numbers, y).n_features_in_ == 2


def test_a_class_with_one_row_is_named_in_a_warning(blobs):
    X, y = blobs
    labels = y.astype(object)
    labels[0] = "lonely"
    with pytest.warns(UserWarning, match="single training row: 'lonely' \\(1 row\\)"):
        clf = quick(ILRGPClassifier).fit(X, labels)
    assert "lonely" in clf.classes_.tolist()


def test_saved_estimators_keep_feature_names_and_iterations(blobs, tmp_path):
    X, y = blobs
    frame = pd.DataFrame(X, columns=["width", "height"])
    clf = quick(ILRGPClassifier).fit(frame, y)
    loaded = ppgpc.load(clf.save(tmp_path / "model"))
    np.testing.assert_array_equal(loaded.feature_names_in_, clf.feature_names_in_)
    assert loaded.n_iter_ == clf.n_iter_
    with pytest.raises(ValueError, match="X has the columns in another order"):
        loaded.predict(frame[["height", "width"]])


def test_continuous_targets_and_target_columns(blobs):
    X, y = blobs
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        quick(ILRGPClassifier).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="Unknown label type: continuous"):  # as objects too
        quick(ILRGPClassifier).fit(X, X[:, 0].astype(object))
    codes = np.unique(y, return_inverse=True)[1]
    with pytest.warns(DataConversionWarning, match="column-vector y"):
        column = quick(ILRGPClassifier).fit(X, codes[:, None])
    flat = quick(ILRGPClassifier).fit(X, codes.astype(object))  # integers as objects
    np.testing.assert_array_equal(column.predict_proba(X), flat.predict_proba(X))


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_unfitted_estimators_raise_not_fitted_error(cls, tmp_path):
    X = np.zeros((2, 2))
    estimator = cls()
    for call in (lambda: estimator.predict(X), lambda: estimator.predict_proba(X),
                 lambda: estimator.score(X, [0, 1]), lambda: estimator.to_inference_data(),
                 lambda: estimator.save(tmp_path / "model")):
        with pytest.raises(NotFittedError, match=f"This {cls.__name__} instance is not "
                                                 "fitted yet"):
            call()


def test_the_export_names_its_features_after_the_columns(blobs):
    X, y = blobs
    frame = pd.DataFrame(X, columns=["width", "height"])
    idata = quick(ILRGPClassifier).fit(frame, y).to_inference_data(frame.iloc[:3])
    assert idata.constant_data["feature"].values.tolist() == ["width", "height"]
    assert idata.predictions_constant_data["feature"].values.tolist() == ["width", "height"]
    assert quick(ILRGPClassifier).fit(X, y).to_inference_data() \
        .constant_data["feature"].values.tolist() == [0, 1]


def test_hyperparameters_are_named_by_the_column_they_belong_to():
    """One column carries the classes and one is noise: its lengthscale is the long one
    under its own name, whichever order the columns come in, and a sampled lengthscale is
    the posterior mean of its draws, under the same names."""
    rng = np.random.default_rng(6)
    y = np.repeat([0, 1], 25)
    frame = pd.DataFrame({"signal": 2.0 * y + 0.3 * rng.normal(size=50),
                          "noise": rng.normal(size=50)})
    fits = [ILRGPClassifier(epsilon=0.99, tau=0.1, progress=False).fit(frame[cols], y)
            for cols in (["signal", "noise"], ["noise", "signal"])]
    for clf in fits:
        h = clf.hyperparameters_
        assert h["kernel_lengthscale[noise]"] > 2.0 * h["kernel_lengthscale[signal]"]
        order = clf.feature_names_in_.tolist()
        raw = np.asarray(clf.result_.hypers["kernel_lengthscale"])[0, 0]
        for j, column in enumerate(order):
            assert h[f"kernel_lengthscale[{column}]"] == raw[j]
    for column in ("signal", "noise"):
        a, b = (clf.hyperparameters_[f"kernel_lengthscale[{column}]"] for clf in fits)
        np.testing.assert_allclose(a, b, rtol=1e-3)
    short = {"num_warmup": 50, "num_samples": 50, "max_samples": 50, "num_chains": 2}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ppgpc.ConvergenceWarning)  # (50 draws, on purpose)
        sampled = ILRGPClassifier(epsilon=0.99, tau=0.1, inference="nuts", progress=False,
                                  inference_options=short).fit(frame, y)
    assert not sampled.result_.point_hypers
    draws = np.asarray(sampled.result_.hypers["kernel_lengthscale"])
    assert draws.shape[:2] == (2, 50) and np.std(draws[..., 0]) > 0
    h = sampled.hyperparameters_
    for j, column in enumerate(["signal", "noise"]):
        np.testing.assert_allclose(h[f"kernel_lengthscale[{column}]"],
                                   draws[..., j].mean(), rtol=1e-12)
    np.testing.assert_allclose(h["kernel_variance"], np.asarray(
        sampled.result_.hypers["kernel_variance"]).mean(), rtol=1e-12)
