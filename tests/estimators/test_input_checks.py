"""Bad input and bad settings raise errors that name the problem, before any JAX code runs;
a failed fit never leaves a half-updated estimator; seeds reach every random step; exports
and saves say what is wrong (session 33's audits of input handling and of export)."""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from conftest import toy_problem
from ppgpc import (
    DirichletGPClassifier,
    ILRGPClassifier,
    LogisticSoftmaxGPClassifier,
    SoftmaxSVGPClassifier,
)
from ppgpc.estimators.conjugate import ConjugateClassifier  # the smoothing search
from ppgpc.infer import fit, to_inference_data
from ppgpc.validation import (MAX_ABS_INPUT, check_count, check_exact_size, check_features,
                              check_flag, check_integer_labels, check_labels, check_options,
                              check_seed, encode_labels)

QUICK = {"max_iter": 20, "num_draws": 20}

# the short fits here stop L-BFGS early on purpose
pytestmark = pytest.mark.filterwarnings("ignore::ppgpc.ConvergenceWarning")


@pytest.fixture(scope="module")
def toy():
    return toy_problem(30, 3, seed=2)


@pytest.fixture(scope="module")
def fitted_ilr(toy):
    """A quick ILR fit on ``toy`` for the tests that only read or save it."""
    X, y = toy
    return ILRGPClassifier(epsilon=0.99, inference_options=QUICK).fit(X, y)


# ----------------------------------------------------------------------- array checks
@pytest.mark.parametrize("X, match", [
    (np.ones((3, 2)) + 1j, "complex"),
    (np.array([[0.0, 1e200], [1.0, 2.0]]), "up to 1e\\+200 in magnitude"),
    (np.array([[0.0, -2e160], [1.0, 2.0]]), "up to 2e\\+160"),
])
def test_features_refuse_complex_and_overflowing_values(X, match):
    with pytest.raises(ValueError, match=match):
        check_features(X)


def test_features_accept_values_up_to_the_limit():
    X = np.array([[MAX_ABS_INPUT, 0.0], [-MAX_ABS_INPUT, 1.0]])
    np.testing.assert_array_equal(check_features(X), X)


@pytest.mark.parametrize("y, match", [
    (np.array([0.0, 1.0, np.inf]), "infinite labels \\(1 of them\\)"),
    (np.array([0.0, np.nan, 1.0]), "1 missing label\\(s\\) \\(1 nan; first at index 1\\)"),
    (np.array([0, 1, np.nan, np.nan], dtype=object),
     "2 missing label\\(s\\) \\(2 nan; first at index 2\\)"),
    (np.array(["a", 1.5, float("nan")], dtype=object), "1 missing label\\(s\\) \\(1 nan;"),
    (np.array(["a", None, "b", None], dtype=object), "2 missing label\\(s\\) \\(2 None;"),
])
def test_labels_refuse_infinite_and_missing_values(y, match):
    with pytest.raises(ValueError, match=match):
        check_labels(y, len(y))


def test_pandas_missing_labels_are_named_as_missing(toy):
    """A pandas column with gaps gives pd.NA (string and nullable integer dtypes) or NaN:
    each is a missing label, not "a mix of label types" nor a class of its own."""
    pd = pytest.importorskip("pandas")
    X, _ = toy
    for labels, kind in [(pd.Series(["a", pd.NA, "b"] * 10, dtype="string"), "<NA>"),
                         (pd.Series([1, pd.NA, 2] * 10, dtype="Int64"), "nan"),
                         (pd.Series(["a", None, "b"] * 10, dtype=object), "None"),
                         (pd.Categorical(["a", None, "b"] * 10), "nan")]:
        with pytest.raises(ValueError, match=f"y has 10 missing label\\(s\\) \\(10 {kind}; "
                                             "first at index 1\\); drop those samples"):
            ILRGPClassifier().fit(X, labels)


def test_mixed_label_types_are_named():
    with pytest.raises(ValueError, match="mixes label types.*\\['int', 'str'\\]"):
        encode_labels(np.array([0, "a", 1], dtype=object))


def test_driver_labels_refuse_classes_without_points_unless_num_classes_is_given():
    with pytest.raises(ValueError, match="class\\(es\\) \\[0, 1, 3, 4\\] of 0..5"):
        check_integer_labels(np.array([2, 5, 2, 5]), 4, None)
    with pytest.raises(ValueError, match="class\\(es\\) \\[0\\] of 0..1"):
        check_integer_labels(np.ones(5, int), 5, None)
    labels, C = check_integer_labels(np.array([2, 5, 2, 5]), 4, 6)  # intended: allowed
    assert C == 6 and labels.tolist() == [2, 5, 2, 5]


@pytest.mark.parametrize("value", [2.5, 2.0, True, 0, -3, "4", None])
def test_counts_are_integers(value):
    with pytest.raises(ValueError, match="num_inducing must be an integer >= 1"):
        check_count("num_inducing", value)


def test_options_are_checked_by_kind_and_normalised():
    opts = {"n": np.int64(3), "warmup": 0, "rate": 1, "flag": np.bool_(True), "m": None}
    out = check_options(opts, counts=("n", "m"), non_negative=("warmup",), positive=("rate",),
                        flags=("flag",), optional=("m",))
    assert out == {"n": 3, "warmup": 0, "rate": 1.0, "flag": True, "m": None}
    assert type(out["n"]) is int and type(out["rate"]) is float
    with pytest.raises(ValueError, match="m must be an integer >= 1, got None"):
        check_options(opts, counts=("m",))          # None only where it is optional
    with pytest.raises(ValueError, match="warmup must be finite and positive, got 0"):
        check_options(opts, positive=("warmup",))


def test_counts_seeds_and_flags_accept_what_they_should():
    assert check_count("n", np.int64(3)) == 3
    assert check_seed(0) == 0
    with pytest.raises(ValueError, match="seed must be an integer >= 0, got -1"):
        check_seed(-1)
    assert check_flag("f", np.bool_(False)) is False
    for bad in ("no", 1, None):
        with pytest.raises(ValueError, match="f must be True or False"):
            check_flag("f", bad)


def test_size_error_names_the_alternative_and_checks_the_limit():
    with pytest.raises(ValueError, match="limit is 10. Instead, use X; or raise"):
        check_exact_size(11, 10, "m", "use X")
    with pytest.raises(ValueError, match="Instead, use a sparse model or subsample"):
        check_exact_size(11, 10, "m")
    with pytest.raises(ValueError, match="max_exact_points must be an integer >= 1, got -5"):
        check_exact_size(11, -5, "m")
    check_exact_size(10, 10, "m")
    check_exact_size(10**6, None, "m")


# ----------------------------------------------------------------------------- driver
def test_driver_sparse_models_have_no_exact_size_limit(toy):
    """The collapsed sparse bound costs O(N M^2); the limit of exact inference must not
    refuse it (it did, with the advice to use a sparse model)."""
    X, y = toy
    result = fit("ilr_gp_sparse", X, y, model_options={"num_inducing": 5},
                 max_exact_points=10, max_iter=3, num_draws=10)
    assert result.predict_proba(X[:2]).shape == (2, 3)
    with pytest.raises(ValueError, match='limit is 10. Instead, use a sparse model: '
                                         'ILRGPClassifier\\(inference="collapsed"\\)'):
        fit("ilr_gp", X, y, max_exact_points=10)


# Each of these failed deep inside JAX or NumPyro, or was accepted and did nothing useful.
# The settings every optimiser checks, and those every sampler checks, with the start of the
# error that must name them:
OPTIMISER_SETTINGS = [
    ({"max_iter": 0}, "max_iter must be an integer >= 1, got 0"),
    ({"max_iter": -3}, "max_iter must be an integer >= 1, got -3"),
    ({"num_draws": -1}, "num_draws must be an integer >= 1, got -1"),
    ({"learning_rate": float("nan")}, "learning_rate must be finite and positive, got nan"),
    ({"learning_rate": -1}, "learning_rate must be finite and positive, got -1"),
]
SAMPLER_SETTINGS = [
    ({"num_chains": 0}, "num_chains must be an integer >= 1, got 0"),
    ({"num_samples": 0}, "num_samples must be an integer >= 1, got 0"),
    ({"num_samples": 10.5}, "num_samples must be an integer >= 1, got 10.5"),
    ({"num_warmup": -1}, "num_warmup must be an integer >= 0, got -1"),
]
OPTIMISERS = [("ilr_gp", {"method": "map"}), ("ilr_gp", {"method": "exact", "optimizer": "adam"}),
              ("logistic_softmax", {"method": "cavi"})]
SAMPLERS = [("ilr_gp", {"method": "nuts"}), ("logistic_softmax", {"method": "gibbs"})]


def _cases(methods, settings):
    """(model, options, match): each bad setting with each method's own options."""
    return [(model, {**method, **bad}, match) for model, method in methods
            for bad, match in settings]


@pytest.mark.parametrize("model, options, match", [
    *_cases(OPTIMISERS, OPTIMISER_SETTINGS),
    *_cases(SAMPLERS, SAMPLER_SETTINGS),
    ("logistic_softmax", {"method": "cavi", "num_inducing": 2.5},
     "num_inducing must be an integer >= 1, got 2.5"),
    ("logistic_softmax", {"method": "gibbs", "hyper_algo": "nuts"},
     "hyper_algo must be one of \\['HMC', 'NUTS'\\], got 'nuts'"),
    ("ilr_gp", {"method": "nuts", "target_accept": 2.0},
     "target_accept must be a probability in \\(0, 1\\)"),
    ("ilr_gp", {"method": "nuts", "dense_mass": "yes"}, "dense_mass must be True or False"),
])
def test_driver_method_settings_are_checked_before_any_work(toy, model, options, match):
    """A bad setting is refused by name before the data are even prepared."""
    import dataclasses

    from ppgpc.models import get_spec

    def no_prepare(*args, **kwargs):
        raise AssertionError("the data were prepared before the settings were checked")

    X, y = toy
    spec = dataclasses.replace(get_spec(model), prepare=no_prepare)
    with pytest.raises(ValueError, match=match):
        fit(spec, X, y, **options)


def test_estimator_inference_options_are_checked_before_the_smoothing_search(toy, monkeypatch):
    """epsilon="auto" runs leave-one-out fits before the final fit; a bad option of the
    final fit must be refused before them, not minutes later."""
    def no_search(*args, **kwargs):
        raise AssertionError("a validation fit ran before the options were checked")

    monkeypatch.setattr(ConjugateClassifier, "_loo_scorer", no_search)
    monkeypatch.setattr(ConjugateClassifier, "_held_out_losses", no_search)
    X, y = toy
    with pytest.raises(ValueError, match="num_draws must be an integer >= 1, got -1"):
        ILRGPClassifier(inference_options={"num_draws": -1}).fit(X, y)
    with pytest.raises(ValueError, match="learning_rate must be finite and positive, got -1"):
        LogisticSoftmaxGPClassifier(inference="cavi",
                                    inference_options={"learning_rate": -1}).fit(X, y)
    with pytest.raises(ValueError, match="num_chains must be an integer >= 1, got 0"):
        LogisticSoftmaxGPClassifier(inference_options={"num_chains": 0}).fit(X, y)


@pytest.mark.parametrize("hypers, match", [
    ({"kernel_variance": 1.0, "kernel_lengthscale": [1.0, 1.0, 1.0]},
     "kernel_lengthscale must have shape \\(2,\\) \\(or be a scalar\\), got \\(3,\\)"),
    ({"kernel_variance": -1.0, "kernel_lengthscale": 1.0},
     "kernel_variance must be positive"),
    ({"kernel_variance": 1.0, "kernel_lengthscale": [1.0, 0.0]},
     "kernel_lengthscale must be positive"),
])
def test_driver_given_hyperparameters_are_checked(toy, hypers, match):
    X, y = toy
    with pytest.raises(ValueError, match=match):
        fit("ilr_gp", X, y, hyperparameters=hypers)


def test_driver_a_scalar_lengthscale_broadcasts_over_ard_inputs(toy):
    X, y = toy
    given = fit("ilr_gp", X, y, hyperparameters={"kernel_variance": 1.0,
                                                  "kernel_lengthscale": 0.7}, num_draws=10)
    full = fit("ilr_gp", X, y, hyperparameters={"kernel_variance": 1.0,
                                                 "kernel_lengthscale": [0.7, 0.7]},
               num_draws=10)
    np.testing.assert_array_equal(given.predict_proba(X[:4]), full.predict_proba(X[:4]))


def test_driver_seed_and_prediction_inputs_are_checked(toy):
    X, y = toy
    with pytest.raises(ValueError, match="seed must be an integer >= 0, got 1.5"):
        fit("ilr_gp", X, y, seed=1.5)
    result = fit("ilr_gp", X, y, **QUICK)
    with pytest.raises(ValueError, match="NaN in 2 row"):
        result.predict_proba(np.full((2, 2), np.nan))
    with pytest.raises(ValueError, match="3 features but the model was fitted with 2"):
        result.predict_proba(np.zeros((2, 3)))


def test_driver_refuses_non_finite_predictions(toy):
    """A posterior with a NaN draw must not turn into NaN probabilities (whose argmax would
    silently be class 0)."""
    import dataclasses

    X, y = toy
    result = fit("logistic_softmax", X, y, method="cavi", max_iter=5, num_draws=4)
    broken = dataclasses.replace(result, latent=result.latent.at[0, 0, 0, 0].set(np.nan))
    with pytest.raises(FloatingPointError, match="not finite"):
        broken.predict_proba(X[:3])


# ------------------------------------------------------------------------- estimators
@pytest.mark.parametrize("make, match", [
    (lambda: DirichletGPClassifier(alpha_eps=0.01, shared_kernel="no"),
     "shared_kernel must be True or False, got 'no'"),
    (lambda: SoftmaxSVGPClassifier(shared_kernel="no"),
     "shared_kernel must be True or False, got 'no'"),
    (lambda: SoftmaxSVGPClassifier(num_inducing=2.5), "num_inducing must be an integer"),
    (lambda: SoftmaxSVGPClassifier(inference_options={"max_iter": 0}),
     "max_iter must be an integer >= 1"),
    (lambda: ILRGPClassifier(inference="collapsed", num_inducing=2.7),
     "num_inducing must be an integer"),
    (lambda: ILRGPClassifier(epsilon="foo"), "epsilon must be a number in \\(0, 1\\) or 'auto'"),
    (lambda: ILRGPClassifier(noise_std=float("inf")), "noise_std must be finite and positive"),
    (lambda: DirichletGPClassifier(alpha_eps="x"),
     "alpha_eps must be a finite positive number, 'auto' or 'train', got 'x'"),
    (lambda: ILRGPClassifier(max_exact_points=-5), "max_exact_points must be an integer >= 1"),
    (lambda: ILRGPClassifier(seed=1.5), "seed must be an integer >= 0, got 1.5"),
    (lambda: LogisticSoftmaxGPClassifier(inference="cavi", num_inducing=0),
     "num_inducing must be an integer >= 1, got 0"),
])
def test_estimator_settings_are_checked(toy, make, match):
    X, y = toy
    with pytest.raises(ValueError, match=match):
        make().fit(X, y)


def test_too_large_is_refused_before_any_validation_fit(toy, monkeypatch):
    """A search runs fits before the final fit: the size limit of a final fit that cannot
    go sparse by itself (NUTS; the type-II fits switch, ``tests/estimators/test_search.py``)
    must refuse the data first, and name the data's own N."""
    def no_validation(*args, **kwargs):
        raise AssertionError("a validation fit ran before the size check")

    monkeypatch.setattr(ConjugateClassifier, "_held_out_losses", no_validation)
    monkeypatch.setattr(ConjugateClassifier, "_loo_scorer", no_validation)
    X, y = toy
    with pytest.raises(ValueError, match="30 training points is too many.*limit is 20. "
                                         "Instead, use a sparse model"):
        ILRGPClassifier(inference="nuts", max_exact_points=20).fit(X, y)
    with pytest.raises(ValueError, match="30 training points.*DirichletGPClassifier\\("
                                         "inference=\"collapsed\"\\)"):
        DirichletGPClassifier(inference="nuts", max_exact_points=20).fit(X, y)
    with pytest.raises(ValueError, match="30 training points.*the sparse CAVI"):
        LogisticSoftmaxGPClassifier(inference="cavi", max_exact_points=20).fit(X, y)


def test_sparse_inference_ignores_the_exact_limit(toy):
    X, y = toy
    clf = ILRGPClassifier(epsilon=0.99, inference="collapsed", num_inducing=5,
                          max_exact_points=10, inference_options=QUICK).fit(X, y)
    assert clf.predict_proba(X[:2]).shape == (2, 3)


def test_a_failed_refit_keeps_the_previous_fit(toy):
    X, y = toy
    clf = ILRGPClassifier(epsilon=0.99, inference_options=QUICK).fit(X, y)
    before = clf.predict_proba(X[:4])
    classes, scaling = clf.classes_, clf.standardizer_
    clf.inference_options = {"no_such_option": 1}  # the driver refuses it mid-fit
    with pytest.raises(TypeError, match="unknown option"):
        clf.fit(X * 100 + 5, np.array(["a", "b", "c", "d"])[np.arange(30) % 4])
    assert clf.classes_ is classes and clf.standardizer_ is scaling
    np.testing.assert_array_equal(clf.predict_proba(X[:4]), before)


def test_a_failed_first_fit_leaves_the_estimator_unfitted(toy):
    X, y = toy
    clf = ILRGPClassifier(epsilon=0.99, inference_options={"no_such_option": 1})
    with pytest.raises(TypeError, match="unknown option"):
        clf.fit(X, y)
    assert not any(k.endswith("_") and not k.startswith("_") for k in vars(clf))
    with pytest.raises(NotFittedError, match="not fitted"):
        clf.predict(X[:1])


# ------------------------------------------------------- exports, maps, comparison, CLI
def test_labels_given_with_an_estimator_export_are_its_class_names(toy):
    """wine-style labels 1, 2, 3: scoring an estimator's export with test labels that are
    all 1 and 2 must read them as classes '1' and '2', not as indices 1 and 2 (which gave
    accuracy 0 where the estimator's own evaluate gives the truth)."""
    from ppgpc.evaluation import exports

    X, y = toy
    labels = y + 1
    clf = ILRGPClassifier(epsilon=0.99, inference_options=QUICK).fit(X, labels)
    keep = labels < 3
    idata = clf.to_inference_data(X[keep])
    probs = exports.predictive_probabilities(idata)
    expected = exports.scores(probs, labels[keep] - 1)   # the indices of 1, 2
    got = exports.scores(idata, labels[keep])
    assert got == expected
    assert got["accuracy"] == clf.evaluate(X[keep], labels[keep])["accuracy"] > 0.9
    assert exports.calibration_table({"ILR": idata}, labels[keep]).rows["ILR"] == expected
    np.testing.assert_array_equal(exports.labels_to_indices(idata, [3, 1]), [2, 0])
    with pytest.raises(ValueError, match="label\\(s\\) \\['0'\\] that are not among this "
                                         "InferenceData's classes \\['1', '2', '3'\\]"):
        exports.scores(idata, labels[keep] - 1)


def test_labels_given_with_a_driver_export_are_indices(toy):
    from ppgpc.evaluation import exports

    X, y = toy
    result = fit("ilr_gp", X, y, **QUICK)
    idata = to_inference_data(result, X[:6])
    probs = exports.predictive_probabilities(idata)
    assert exports.scores(idata, y[:6]) == exports.scores(probs, y[:6])


def test_compare_posteriors_refuses_non_finite_draws_and_bad_settings():
    from ppgpc import compare_posteriors

    rng = np.random.default_rng(0)
    good = {"a": rng.normal(size=(1, 10, 2))}
    broken = {"a": np.full((1, 10, 2), np.nan)}
    with pytest.raises(ValueError, match="variable 'a' of x has 20 non-finite value"):
        compare_posteriors(broken, good, labels=("x", "y"))
    with pytest.raises(ValueError, match="alpha must be a level in \\(0, 1\\), got 0"):
        compare_posteriors(good, good, alpha=0)
    with pytest.raises(ValueError, match="max_draws must be an integer >= 2, got 0"):
        compare_posteriors(good, good, max_draws=0)


def test_probability_maps_check_their_inputs(toy):
    from ppgpc.evaluation.maps import input_grid, plot_probability_maps

    X, y = toy
    uniform = lambda Z: np.full((len(Z), 3), 1 / 3)  # noqa: E731
    with pytest.raises(ValueError, match="X contains NaN in 1 row"):
        input_grid(np.vstack([X, [[np.nan, 0.0]]]))
    with pytest.raises(ValueError, match="disagree on the number of samples: 30 versus 5"):
        plot_probability_maps(uniform, X, y[:5], grid_size=4)
    with pytest.raises(ValueError, match="y must hold class indices 0..2"):
        plot_probability_maps(uniform, X, y + 1, grid_size=4)


def test_a_damaged_save_is_named(tmp_path, fitted_ilr):
    import ppgpc

    fitted_ilr.save(tmp_path / "m")
    (tmp_path / "m" / "arrays.nc").write_bytes(b"not netCDF")
    with pytest.raises(ValueError, match="arrays.nc: the save is damaged"):
        ppgpc.load(tmp_path / "m")
    (tmp_path / "m" / "settings.json").write_text("{")
    with pytest.raises(ValueError, match="settings.json is not valid JSON"):
        ppgpc.load(tmp_path / "m")


def test_a_save_whose_arrays_come_from_another_save_is_named(tmp_path, toy, fitted_ilr):
    """settings.json and arrays.nc prove they belong together: arrays.nc copied in from
    another save of the same class is refused at load, not left to fail at predict."""
    import shutil

    import ppgpc

    X, y = toy
    other = ppgpc.ILRGPClassifier(epsilon=0.05, progress=False).fit(X[:20], y[:20])
    fitted_ilr.save(tmp_path / "m")
    other.save(tmp_path / "other")
    assert np.allclose(ppgpc.load(tmp_path / "m").predict_proba(X), fitted_ilr.predict_proba(X))
    shutil.copy(tmp_path / "other" / "arrays.nc", tmp_path / "m" / "arrays.nc")
    with pytest.raises(ValueError, match="arrays.nc was written with another settings.json"):
        ppgpc.load(tmp_path / "m")


@pytest.mark.parametrize("X, match", [
    (np.array([[1.0, "a"], [2.0, "b"], [3.0, "c"], [4.0, "d"]], dtype=object),
     r"X's column 1 holds a string \('a' in row 0\)"),
    ([[1.0, 2.0], [3.0, "x"], [5.0, 6.0], [7.0, 8.0]], r"column 1 holds a string \('x' in row 1\)"),
    (np.array([["1", "2"], ["3", "4"], ["5", "6"], ["7", "8"]]), r"X.astype\(float\)"),
], ids=["object-array", "nested-list", "numeric-strings"])
def test_arrays_of_strings_name_the_column_and_the_value(X, match):
    import ppgpc

    with pytest.raises(ValueError, match=match):
        ppgpc.ILRGPClassifier(epsilon=0.05, progress=False).fit(X, [0, 1, 0, 1])


def test_estimator_export_needs_x_with_y(toy, fitted_ilr):
    with pytest.raises(ValueError, match="pass X too"):
        fitted_ilr.to_inference_data(None, toy[1])


@pytest.mark.parametrize("argv, message", [
    (["fit", "--dataset", "wine", "--seed", "-1"], "argument --seed: must be at least 0"),
    (["fit", "--dataset", "wine", "--max-train", "-5"], "--max-train: must be at least 2"),
    (["fit", "--dataset", "wine", "--epsilon", "abc"],
     "--epsilon: expected 'auto' or a number in \\(0, 1\\), got 'abc'"),
    (["fit", "--dataset", "wine", "--epsilon", "1.5"], "--epsilon: must be in \\(0, 1\\)"),
    (["compare", "--dataset", "wine", "--grid-size", "1"], "--grid-size: must be at least 2"),
])
def test_cli_refuses_bad_numbers_before_fitting(argv, message, capsys):
    from ppgpc.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    import re
    assert re.search(message, err), err


# ------------------------------------------------- seeds, export and saving (audit 2)
def test_the_seed_reaches_cavi(toy):
    """The stochastic CAVI's minibatches (and a sparse start) come from the driver's seed:
    different seeds give different ELBO traces, the same seed the same one."""
    X, y = toy
    options = dict(method="cavi", batch_size=8, max_iter=12, elbo_every=2, num_draws=4)
    traces = [np.asarray(fit("logistic_softmax", X, y, seed=s, **options)
                         .sample_stats["elbo"]) for s in (0, 1, 0)]
    np.testing.assert_array_equal(traces[0], traces[2])
    assert not np.array_equal(traces[0], traces[1])


def test_the_seed_reaches_the_k_means_start_of_sparse_models(toy):
    X, y = toy
    starts = [fit("ilr_gp_sparse", X, y, seed=s, model_options={"num_inducing": 6},
                  max_iter=1, num_draws=4).data.inducing_init for s in (0, 1)]
    assert not np.array_equal(starts[0], starts[1])
    given = fit("ilr_gp_sparse", X, y, seed=1, model_options={"num_inducing": 6, "seed": 0},
                max_iter=1, num_draws=4)
    np.testing.assert_array_equal(given.data.inducing_init, starts[0])   # an explicit seed wins


def test_an_export_no_thin_can_fit_says_so(toy):
    X, y = toy
    result = fit("ilr_gp", X, y, **QUICK)
    with pytest.raises(ValueError, match="one draw per chain alone takes 480 B, so no thin "
                                         "fits: raise max_bytes"):
        to_inference_data(result, max_bytes=100)


def test_saving_refuses_files_and_foreign_folders(tmp_path, fitted_ilr):
    import ppgpc

    clf = fitted_ilr
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(ValueError, match="it is a file"):
        clf.save(tmp_path / "a_file")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="holds other files \\(\\['notes.txt'\\]\\)"):
        clf.save(tmp_path / "mine")
    # another tool's files of the same names are not a ppgpc save: left as they are
    for name, text in [("settings.json", '{"editor.fontSize": 12}'), ("arrays.nc", "data")]:
        folder = tmp_path / f"other_{name}"
        folder.mkdir()
        (folder / name).write_text(text)
        with pytest.raises(ValueError, match=f"holds other files \\(\\['{name}'\\]\\) and is "
                                             "not a ppgpc save"):
            clf.save(folder)
        assert (folder / name).read_text() == text and len(list(folder.iterdir())) == 1
    clf.save(tmp_path / "m")
    clf.save(tmp_path / "m")                       # over an earlier save: allowed
    (tmp_path / "m" / "settings.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="holds a JSON list"):
        ppgpc.load(tmp_path / "m")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ppgpc.load(tmp_path / "nowhere")


def test_export_and_nuts_messages_name_the_fix(toy, fitted_ilr):
    X, y = toy
    with pytest.raises(TypeError, match="names the classes by classes_"):
        fitted_ilr.to_inference_data(X[:2], class_names=["a", "b", "c"])
    with pytest.raises(ValueError, match="no collapsed form for NUTS .*; use form='latent'"):
        fit("logistic_softmax", X, y, method="nuts",
            hyperparameters={"kernel_variance": 1.0, "kernel_lengthscale": 1.0})
