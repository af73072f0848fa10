"""Saving and loading without pickle: bit-for-bit predictions after a round trip."""

import json
import re
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

import ppgpc
from fitted_cases import NUM_PRED, SPARSE_VARIANTS, fitted, initial_hyperparameters, toy
from ppgpc import DirichletGPClassifier, ILRGPClassifier, LogisticSoftmaxGPClassifier, Selection
from ppgpc.gp.kernels import RBF, Matern52
from ppgpc.infer import FitResult
from ppgpc.io.format import encode
from ppgpc.io.persistence import constructor_params, load_result


@pytest.fixture(scope="module")
def classifier():
    """An ILR-GP estimator with string labels and raw-scale inputs; the hyperparameters and
    draw count of the shared ``ilr_gp`` fits, so that its compiled functions are reused."""
    X, y = toy()
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    options = {"hyperparameters": initial_hyperparameters("ilr_gp"), "num_draws": 60}
    clf = ILRGPClassifier(epsilon=0.99, seed=4, inference_options=options)
    clf.fit(10.0 * X + 3.0, labels)
    clf.epsilon_scores_ = {0.9: 0.25, 0.99: 0.125}  # as a search leaves it: float keys
    return clf, (10.0 * X + 3.0)[:NUM_PRED], labels[:NUM_PRED]


@pytest.mark.parametrize("model, method, num_inducing", [
    ("ilr_gp", "exact", None),                # point conjugate predictive
    ("dirichlet_gp_sparse", "map", None),     # nested prepared data with static options, inducing
    ("ilr_gp", "nuts", None),                 # per-draw hyperparameters, NUTS sample stats
    ("logistic_softmax", "gibbs", None),      # latent predictive, Gibbs sample stats
    ("logistic_softmax", "cavi", None),       # ELBO trace
    SPARSE_VARIANTS[0],                       # sparse CAVI: inducing draws, no stored latent
])
def test_fit_result_round_trip_is_bit_for_bit(tmp_path, model, method, num_inducing):
    result = fitted(model, method, num_inducing=num_inducing)
    X = toy()[0][:NUM_PRED]
    path = ppgpc.save(result, tmp_path / "fit")
    assert sorted(p.name for p in path.iterdir()) == ["arrays.nc", "settings.json"]
    loaded = load_result(path)
    assert loaded.spec is result.spec and loaded.kernel == result.kernel
    assert (loaded.method, loaded.predictive_kind, loaded.point_hypers, loaded.seed) == (
        result.method, result.predictive_kind, result.point_hypers, result.seed)
    for name, value in result.hypers.items():
        assert loaded.hypers[name].shape == value.shape
        np.testing.assert_array_equal(loaded.hypers[name], value)
    for name, value in result.sample_stats.items():
        assert loaded.sample_stats[name].dtype == np.asarray(value).dtype
        np.testing.assert_array_equal(loaded.sample_stats[name], value)
    np.testing.assert_array_equal(loaded.latent, result.latent)
    np.testing.assert_array_equal(loaded.inducing, result.inducing)
    assert loaded.settings == result.settings
    np.testing.assert_array_equal(loaded.predict_proba(X), result.predict_proba(X))
    np.testing.assert_array_equal(loaded.log_likelihood(), result.log_likelihood())


def test_estimator_round_trip_is_bit_for_bit(tmp_path, classifier):
    clf, X, labels = classifier
    path = clf.save(tmp_path / "clf")
    for loaded in (ppgpc.load(path), ILRGPClassifier.load(path)):
        assert type(loaded) is ILRGPClassifier
        assert (json.dumps(encode(constructor_params(loaded)), sort_keys=True)
                == json.dumps(encode(constructor_params(clf)), sort_keys=True))
        np.testing.assert_array_equal(loaded.classes_, clf.classes_)
        assert loaded.classes_.dtype == clf.classes_.dtype
        assert loaded.epsilon_ == clf.epsilon_ and loaded.epsilon_scores_ == clf.epsilon_scores_
        assert loaded.inference_options["num_draws"] == 60
        np.testing.assert_array_equal(loaded.inference_options["hyperparameters"]
                                      ["kernel_lengthscale"],
                                      clf.inference_options["hyperparameters"]
                                      ["kernel_lengthscale"])
        np.testing.assert_array_equal(loaded.standardizer_.scale, clf.standardizer_.scale)
        np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
        np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))
    idata = ppgpc.load(path).to_inference_data(X, labels)
    assert list(idata.predictions["class_label"].values) == clf.classes_.tolist()


@pytest.mark.parametrize("kernel", [RBF(ard=True, lengthscale_prior_scale=0.5),
                                    Matern52(ard=True, lengthscale_prior_scale=2.0)])
def test_a_kernel_object_in_the_settings_round_trips(tmp_path, kernel):
    """An estimator built with a kernel object (not a name) saves it as its class and fields
    and loads an equal kernel, with bit-for-bit predictions."""
    X, y = toy()
    options = {"hyperparameters": initial_hyperparameters("ilr_gp"), "num_draws": 60}
    clf = ILRGPClassifier(kernel=kernel, seed=4, inference_options=options).fit(X, y)
    path = clf.save(tmp_path / "clf")
    payload = json.loads((path / "settings.json").read_text())
    assert payload["params"]["kernel"] == {"__kernel__": {
        "class": type(kernel).__name__,
        "fields": {"ard": kernel.ard,
                   "lengthscale_prior_scale": kernel.lengthscale_prior_scale}}}
    loaded = ppgpc.load(path)
    assert loaded.kernel == kernel and loaded.result_.kernel == kernel
    np.testing.assert_array_equal(loaded.predict_proba(X[:NUM_PRED]),
                                  clf.predict_proba(X[:NUM_PRED]))


def test_saved_settings_are_plain_json(tmp_path, classifier):
    clf, _, _ = classifier
    path = clf.save(tmp_path / "clf")
    payload = json.loads((path / "settings.json").read_text())
    assert payload["kind"] == "estimator" and payload["class"] == "ILRGPClassifier"
    assert payload["result"]["model"] == "ilr_gp"
    assert payload["result"]["scalars"]["settings"]["model_options"]["epsilon"] == clf.epsilon_


def test_loading_the_wrong_thing_is_a_clear_error(tmp_path, classifier):
    clf, _, _ = classifier
    with pytest.raises(FileNotFoundError, match="not a saved ppgpc model"):
        ppgpc.load(tmp_path / "nothing")
    path = clf.save(tmp_path / "clf")
    with pytest.raises(TypeError, match="holds a ILRGPClassifier, not a DirichletGPClassifier"):
        DirichletGPClassifier.load(path)
    with pytest.raises(ValueError, match="not a FitResult"):
        load_result(path)
    payload = json.loads((path / "settings.json").read_text())
    payload["format_version"] = 99
    (path / "settings.json").write_text(json.dumps(payload))
    with pytest.raises(ValueError, match="format version 99"):
        ppgpc.load(path)


def test_what_cannot_be_saved_is_refused(tmp_path):
    with pytest.raises(NotFittedError, match="not fitted"):
        LogisticSoftmaxGPClassifier().save(tmp_path / "x")

    @jax.tree_util.register_static  # a user's kernel must be static to pass through jit
    class MyKernel(RBF):
        pass

    result = fitted("ilr_gp", "exact")
    custom = FitResult(**{**vars(result), "kernel": MyKernel()})
    with pytest.raises(ValueError, match="only the kernels of ppgpc.gp.kernels"):
        ppgpc.save(custom, tmp_path / "y")
    assert not (tmp_path / "y").exists()
    clf = ILRGPClassifier(kernel=MyKernel(), seed=4, inference_options={
        "hyperparameters": initial_hyperparameters("ilr_gp"), "num_draws": 60}).fit(*toy())
    with pytest.raises(ValueError, match="only the kernels of ppgpc.gp.kernels"):
        clf.save(tmp_path / "z")
    assert not (tmp_path / "z").exists()


def test_a_fitted_attribute_a_load_would_refuse_is_not_saved(tmp_path):
    clf = ILRGPClassifier(epsilon=0.99, seed=4, inference_options={
        "hyperparameters": initial_hyperparameters("ilr_gp"), "num_draws": 60}).fit(*toy())
    clf.my_note_ = "x"
    with pytest.raises(ValueError, match="cannot save the fitted attribute 'my_note_'"):
        clf.save(tmp_path / "clf")
    assert not (tmp_path / "clf").exists()


# ------------------------------------------------------- a damaged save is refused, named
def _damaged_copy(path, tmp_path, edit):
    """A copy of the save at ``path`` whose settings.json ``edit(payload)`` changed."""
    copy = tmp_path / "damaged"
    shutil.copytree(path, copy)
    payload = json.loads((copy / "settings.json").read_text())
    edit(payload)
    (copy / "settings.json").write_text(json.dumps(payload))
    return copy


def _classes(values):
    """An edit that replaces the saved classes_ (the fixture's string labels)."""
    return lambda p: p["fitted"]["classes_"].update({"__ndarray__": values,
                                                     "shape": [len(values)]})


@pytest.mark.parametrize("entry, edit, problem", [
    # a kernel class is taken from an allow-list, never looked up in a module
    ("result.kernel", lambda p: p["result"]["kernel"].update({"class": "jax"}),
     "names kernel class 'jax', not one of ppgpc's kernels ['Matern52', 'RBF']"),
    ("result.kernel", lambda p: p["result"]["kernel"].update({"class": "__init__"}),
     "names kernel class '__init__'"),
    ("params.kernel", lambda p: p["params"].update(
        {"kernel": {"__kernel__": {"class": "gram", "fields": {}}}}), "names kernel class 'gram'"),
    ("result.kernel", lambda p: p["result"]["kernel"]["fields"].update({"ard": "yes"}),
     "gives kernel RBF's field 'ard' the value 'yes', not of type bool"),
    # fitted attributes: an allow-list, types checked, and checked against the posterior
    ("fitted", lambda p: p["fitted"].update({"predict_proba": 1}),
     "has 'predict_proba', which is not a fitted attribute of ppgpc's estimators"),
    ("fitted.epsilon_", lambda p: p["fitted"].update({"epsilon_": "x"}),
     "is 'x', not a finite number or None"),
    ("fitted.classes_", lambda p: p["fitted"].pop("classes_"), "is missing"),
    ("fitted.classes_", _classes(["setosa", "versicolor"]),
     "has 2 classes, but the saved posterior has 3"),
    ("fitted.classes_", _classes(["virginica", "versicolor", "setosa"]),
     "does not hold each class once, sorted, as fit sets it"),
    ("fitted.classes_", lambda p: p["fitted"]["classes_"].update({"shape": [4]}),
     "is an array whose values do not fit its dtype <U10 and shape [4]"),
    ("fitted.classes_", lambda p: p["fitted"]["classes_"].update({"dtype": "|V8"}),
     "is an array of dtype |V8"),
    ("fitted.n_features_in_", lambda p: p["fitted"].update({"n_features_in_": 3}),
     "is for 3 features, but the saved training inputs have 2"),
    # missing and unknown entries, constructor parameters
    ("result", lambda p: p.pop("result"), "is missing"),
    ("(top level)", lambda p: p.update({"extra": 1}), "has unknown entries ['extra']"),
    ("params", lambda p: p["params"].update({"bogus": 1}),
     "has unknown parameter(s) ['bogus']; ILRGPClassifier takes ['epsilon',"),
    ("params.seed", lambda p: p["params"].pop("seed"), "is missing"),
    ("class", lambda p: p.update({"class": "GPClassifierBase"}),
     "is 'GPClassifierBase', not one of ppgpc's estimators"),
    ("kind", lambda p: p.update({"kind": "model"}), "is 'model', not one of"),
    # the FitResult entry
    ("result.model", lambda p: p["result"].update({"model": "nope"}),
     "names no ppgpc model: unknown model 'nope'"),
    ("result.scalars.method", lambda p: p["result"]["scalars"].pop("method"), "is missing"),
    ("result.scalars.seed", lambda p: p["result"]["scalars"].update({"seed": "4"}),
     "is '4', not of type int"),
    ("result.scalars", lambda p: p["result"]["scalars"].update({"bogus": 1}),
     "has 'bogus', which is not a field of FitResult"),
    ("result.scalars.settings.model_options",
     lambda p: p["result"]["scalars"]["settings"]["model_options"].update({"bogus": 1}),
     "does not prepare model 'ilr_gp'"),
])
def test_a_damaged_save_names_the_entry(tmp_path, classifier, entry, edit, problem):
    """Loading accepts only what a save writes; anything else is refused with a message
    that says the save is damaged and which entry, before anything is built from it."""
    clf, _, _ = classifier
    path = _damaged_copy(clf.save(tmp_path / "clf"), tmp_path, edit)
    message = f"settings.json: the save is damaged: entry '{entry}' {problem}"
    with pytest.raises(ValueError, match=re.escape(message)):
        ppgpc.load(path)


def test_a_damaged_fit_result_save_names_the_entry(tmp_path):
    path = ppgpc.save(fitted("ilr_gp", "exact"), tmp_path / "fit")
    for entry, edit in [("result", lambda p: p.pop("result")),
                        ("result.dict_fields", lambda p: p["result"].update(
                            {"dict_fields": ["hypers", "spec"]}))]:
        copy = _damaged_copy(path, tmp_path, edit)
        with pytest.raises(ValueError, match=re.escape(f"the save is damaged: entry '{entry}'")):
            load_result(copy)
        shutil.rmtree(copy)


# ------------------------------------------------- saves of format version 1 (before issue 36)
V1_SAVES = Path(__file__).parent.parent / "data" / "saves_v1"
"""Estimator saves written by format version 1 (``make_saves.py`` there, commit 091ae7d),
with the training data, test inputs and each model's predictions in predictions.npz."""

V1_TRANSLATIONS = {
    "ilr_map": ("ILRGPClassifier", {"inference": "map", "selection": None}),
    "gpd_map": ("DirichletGPClassifier",
                {"selection": Selection(validation="cv", cv_folds=3)}),
    "lsm_cavi": ("LogisticSoftmaxGPClassifier", {"inference": "cavi", "num_inducing": None}),
    # LSM's stochastic CAVI: inference="cavi" with a batch size, M from the options
    "lsm_svi": ("LogisticSoftmaxGPClassifier",
                {"inference": "cavi", "num_inducing": 8,
                 "inference_options": {"batch_size": 16, "max_iter": 20, "num_draws": 20}}),
    # ILR's uncollapsed inference is SVGP's ILR link, with the SVI defaults it ran with
    "ilr_uncollapsed": ("SoftmaxSVGPClassifier",
                        {"link": "ilr", "inference": "svi", "num_inducing": 8,
                         "inference_options": {"max_iter": 30, "learning_rate": 0.01,
                                               "num_draws": 20}}),
    # SVGP's SVI settings move into inference_options, progress_bar becomes progress
    "svgp_moved": ("SoftmaxSVGPClassifier",
                   {"progress": True, "inference_options": {
                       "num_draws": 20, "batch_size": 16, "max_iter": 30,
                       "learning_rate": 0.05, "validation_fraction": 0.2,
                       "natural_gradient": 0.1}}),
}


NEW_MODEL = {"gpd_map"}
"""Saves of a model whose prior changed since: the GPD's class means share one learned level
plus the log class frequencies (docs/math.md section 2), where each mean was free, so a
refit of the same settings is today's model and the test compares the settings it ran."""

NEW_RANDOM_STREAMS = {"lsm_svi", "lsm_cavi", "ilr_uncollapsed", "svgp_moved"}
"""Saves whose fit draws its random numbers from other streams since: the stochastic
CAVI's minibatches and first inducing inputs are fold_in streams of one root key (version
2); and, since training data are padded to fixed sizes (``ppgpc.runtime.padding``), the full CAVI's
draws of q, the SVGP's minibatch rows, its likelihood normals and its draws of q take one
fold_in stream per row or inducing input, and k-means runs on the padded rows. A refit runs
the same settings on new draws, so its probabilities differ by the algorithm's own Monte
Carlo spread, and the test compares the settings the refit ran."""


@pytest.mark.parametrize("name", sorted(V1_TRANSLATIONS))
def test_a_version_1_save_loads_with_its_settings_translated(name):
    """A version-1 save loads as today's estimator with the translated settings, predicts
    what it did when saved, and a refit of the translated settings on the same data
    reproduces the saved model (the translation keeps the fit). Both to rounding: the
    predictions were computed in another process, whose compiled programs (the test suite
    sets its own XLA flags) may differ in the last bits, and a refit's optimiser steps
    carry that rounding on (1e-9 after 30 SVI steps); a setting translated wrongly (another
    learning rate, step count, batch or M) moves the probabilities by 1e-2 or more."""
    data = np.load(V1_SAVES / "predictions.npz")
    assert json.loads((V1_SAVES / name / "settings.json").read_text())["format_version"] == 1
    cls_name, params = V1_TRANSLATIONS[name]
    loaded = ppgpc.load(V1_SAVES / name)
    assert type(loaded).__name__ == cls_name
    for key, value in params.items():
        assert loaded.get_params()[key] == value, key
    np.testing.assert_allclose(loaded.predict_proba(data["X_test"]), data[f"proba_{name}"],
                               rtol=1e-9, atol=1e-12)
    refit = clone(loaded).set_params(progress=False).fit(data["X"], data["y"])
    if name in NEW_RANDOM_STREAMS:  # same settings, new draws: compare what the fit ran
        saved, ran = loaded.result_.settings, refit.result_.settings
        for key in set(saved["model_options"]) & set(ran["model_options"]):
            assert ran["model_options"][key] == saved["model_options"][key], key
        for key in ("num_inducing", "batch_size", "max_iter", "num_draws", "learning_rate"):
            if key in saved["method_options"]:
                assert ran["method_options"][key] == saved["method_options"][key], key
        return
    if name in NEW_MODEL:  # same settings, today's model: compare what the fit ran
        assert refit.result_.settings == loaded.result_.settings
        return
    np.testing.assert_allclose(refit.predict_proba(data["X_test"]), data[f"proba_{name}"],
                               rtol=0, atol=1e-6)


def test_a_version_1_setting_without_equivalent_fails_naming_version_and_setting(tmp_path):
    with pytest.raises(ValueError, match="save format version 1, whose SoftmaxSVGPClassifier "
                                         "setting initial_variance=0.5 has no equivalent"):
        ppgpc.load(V1_SAVES / "svgp_removed")
    with pytest.raises(TypeError, match="holds a ILRGPClassifier saved in format version 1, "
                                        "which is now a SoftmaxSVGPClassifier"):
        ILRGPClassifier.load(V1_SAVES / "ilr_uncollapsed")
    copy = tmp_path / "v1"
    shutil.copytree(V1_SAVES / "svgp_moved", copy)
    payload = json.loads((copy / "settings.json").read_text())
    payload["params"].pop("ell_estimator")
    (copy / "settings.json").write_text(json.dumps(payload))
    with pytest.raises(ValueError, match="the save is damaged: entry 'params.ell_estimator' "
                                         "is missing"):
        ppgpc.load(copy)


def test_a_save_round_trips_a_selection(tmp_path):
    X, y = toy()
    clf = ILRGPClassifier(selection=Selection(grid=(0.9, 0.99), validation="holdout"),
                          tau=0.1, progress=False, inference_options={
                              "hyperparameters": initial_hyperparameters("ilr_gp"),
                              "num_draws": 60}).fit(X, y)
    loaded = ppgpc.load(clf.save(tmp_path / "clf"))
    assert loaded.selection == clf.selection and loaded.epsilon_ == clf.epsilon_
    settings = json.loads((tmp_path / "clf" / "settings.json").read_text())
    assert settings["format_version"] == 2
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
