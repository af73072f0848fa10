"""ArviZ export for every (model, method): groups, shapes, dims, and ArviZ running on it."""

import warnings

import arviz as az
import numpy as np
import pytest

from arviz_versions import compare_elpd, concat_chains, group_names, loo
from fitted_cases import (CORE_MODELS, SAME_PATH, SPARSE_VARIANTS, C, N, NUM_PRED, cases,
                          fitted, toy)
from ppgpc.infer import fit, supported_methods, to_inference_data
from ppgpc.infer.arviz_export import LABEL_GROUPS, exported_chains, hyperparameter_dims
from ppgpc.infer.driver import METHODS

CASES = cases()
EXPORTED = [(m, k, None) for m, k in CASES] + list(SPARSE_VARIANTS)


@pytest.fixture(scope="module", params=EXPORTED,
                ids=[f"{m}-{k}" + ("-sparse" if M else "") for m, k, M in EXPORTED])
def exported(request):
    model, method, num_inducing = request.param
    result = fitted(model, method, num_inducing=num_inducing)
    X, y = toy()
    idata = to_inference_data(result, X[:NUM_PRED], y_pred=y[:NUM_PRED],
                                     class_names=["a", "b", "c"])
    return model, method, result, idata


def test_every_model_and_method_is_covered():
    """Each core model with each method it supports (GPD's NUTS through ILR-GP's, the same
    path: fitted_cases.SAME_PATH), and SVI once it is registered."""
    covered = set(CASES) | set(SAME_PATH)
    for model in CORE_MODELS:
        for method in supported_methods(model):
            assert (model, method) in covered, (model, method)
    if "svi" in METHODS:
        assert any(k == "svi" for _, k in CASES)


def test_groups_shapes_and_dims(exported):
    model, method, result, idata = exported
    chains, draws = exported_chains(result)
    L = result.spec.num_latent(C)
    for group in ("posterior", "log_likelihood", "posterior_predictive", "observed_data",
                  "constant_data", "predictions", "predictions_constant_data"):
        assert group in group_names(idata), group
    post = idata.posterior
    assert post["f"].dims == ("chain", "draw", "obs", "latent")
    assert post["f"].shape == (chains, draws, N, L)
    # sampled hyperparameters are posterior draws; point ones one value in constant_data
    hypers = post if not result.point_hypers else idata.constant_data
    lead = ("chain", "draw") if not result.point_hypers else ()
    for name in result.hypers:
        assert hypers[name].shape[:len(lead)] == (chains, draws)[:len(lead)], name
        assert (name in post) != result.point_hypers, name
    assert hypers["kernel_lengthscale"].dims == lead + ("feature",)
    if "inducing_inputs" in result.hypers:
        assert hypers["inducing_inputs"].dims == lead + ("inducing", "feature")
        assert post["u"].dims == ("chain", "draw", "inducing", "latent")
        assert np.all(np.isfinite(post["u"].values))
    ll = idata.log_likelihood["y"]
    assert ll.dims == ("chain", "draw", "obs") and ll.shape == (chains, draws, N)
    assert np.all(np.asarray(ll) <= 0) and np.all(np.isfinite(ll))
    pp = np.asarray(idata.posterior_predictive["y"])
    assert pp.shape == (chains, draws, N) and pp.min() >= 0 and pp.max() < C
    np.testing.assert_array_equal(idata.observed_data["y"], toy()[1])
    p = idata.predictions["p"]
    assert p.dims == ("chain", "draw", "pred", "class") and p.shape == (chains, draws, NUM_PRED, C)
    np.testing.assert_allclose(p.sum("class"), 1.0, atol=1e-10)
    assert list(p["class"].values) == [0, 1, 2]                  # the codes y holds
    assert list(p["class_label"].values) == ["a", "b", "c"]       # the labels they stand for
    assert "f" not in idata.predictions          # the latent there only on request
    np.testing.assert_array_equal(idata.predictions_constant_data["y"], toy()[1][:NUM_PRED])
    for group in group_names(idata):
        assert idata[group].attrs["ppgpc_model"] == model
        assert idata[group].attrs["ppgpc_method"] == method


def test_predictions_are_thinned_with_the_exact_mean_beside_them(exported):
    """The predictions group keeps every k-th draw of each chain (at most
    ``prediction_draws`` in all), labelled with the posterior draws they are, and drawn
    as the full set draws them; ``p_mean`` beside it is ``predict_proba`` exactly."""
    model, method, result, idata = exported
    chains, draws = exported_chains(result)
    X = toy()[0][:NUM_PRED]
    np.testing.assert_array_equal(idata.predictions_constant_data["p_mean"],
                                  np.asarray(result.predict_proba(X)))
    full = to_inference_data(result, X, prediction_draws=None, prediction_latent=True)
    few = to_inference_data(result, X, prediction_draws=2 * chains, prediction_latent=True)
    L = result.spec.num_latent(C)
    assert full.predictions["f"].shape == (chains, draws, NUM_PRED, L)
    kept = few.predictions["draw"].values
    step = -(-draws // 2)
    np.testing.assert_array_equal(kept, np.arange(0, draws, step))
    assert few.predictions["p"].shape == (chains, len(kept), NUM_PRED, C)
    for name in ("f", "p"):
        np.testing.assert_array_equal(few.predictions[name].values,
                                      full.predictions[name].sel(draw=kept).values)
    np.testing.assert_array_equal(few.predictions_constant_data["p_mean"],
                                  idata.predictions_constant_data["p_mean"])
    with pytest.raises(ValueError, match="prediction_draws must be a positive integer"):
        to_inference_data(result, X, prediction_draws=0)


def test_sample_stats_record_the_method(exported):
    _, method, result, idata = exported
    chains, draws = exported_chains(result)
    if method == "nuts":
        stats = idata.sample_stats
        for name in ("diverging", "tree_depth"):
            assert stats[name].shape == (chains, draws)
        assert stats["diverging"].dtype == bool
        assert stats["tree_depth"].values.min() >= 1
    elif method in ("cavi", "svi"):
        elbo = idata.sample_stats["elbo"]
        assert elbo.dims == ("chain", "iteration") and elbo.shape[1] >= 2
        assert np.all(np.isfinite(elbo))
    elif method == "gibbs":
        assert idata.sample_stats["mean_count"].shape == (chains, draws)


def test_log_likelihood_is_the_categorical_density_of_the_labels(exported):
    """log p(y_i | f_i) recomputed by hand from the exported f and the model's link."""
    _, _, result, idata = exported
    f = idata.posterior["f"].values
    logp = np.asarray(result.spec.log_link(f))
    y = toy()[1]
    expected = np.take_along_axis(logp, y[None, None, :, None], axis=-1)[..., 0]
    np.testing.assert_allclose(idata.log_likelihood["y"].values, expected, rtol=1e-10,
                               atol=1e-12)


def test_arviz_summary_loo_and_rhat_run(exported):
    _, _, result, idata = exported
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pareto-k and one-chain shape warnings on 30 points
        summary = az.summary(idata, var_names=["f"] + (
            [] if result.point_hypers else ["kernel_variance"]))
        elpd = loo(idata)
        rhat = az.rhat(idata, var_names=["f"])
    L = result.spec.num_latent(C)
    assert len(summary) == N * L + (not result.point_hypers)
    assert np.all(np.isfinite(summary["mean"]))
    assert np.isfinite(elpd.elpd) and elpd.elpd_i.shape == (N,)
    assert rhat["f"].shape == (N, L)
    if exported_chains(result)[0] > 1:  # short MCMC of a tiny problem mixes
        assert np.nanmax(rhat["f"].values) < 1.5


@pytest.mark.parametrize("case", [("logistic_softmax", "cavi"), ("ilr_gp", "exact"),
                                  ("softmax_svgp", "svi")])
def test_independent_draws_are_split_into_chains_that_arviz_diagnoses(case):
    """A fit's S independent draws (CAVI's q, the closed form, SVI's q) are exported as 4
    chains of S / 4 in their order: ArviZ's summary runs without a warning, and reads
    R-hat near 1 and a bulk ESS near S, as independent draws give."""
    result = fitted(*case)
    assert result.num_chains == 1 and result.num_draws == 60
    assert exported_chains(result) == (4, 15)
    idata = to_inference_data(result, toy()[0][:NUM_PRED])
    for group in ("posterior", "log_likelihood", "posterior_predictive", "predictions"):
        assert (idata[group].sizes["chain"], idata[group].sizes["draw"]) == (4, 15), group
    flat = np.asarray(result.predict_proba_draws(toy()[0][:NUM_PRED]))
    np.testing.assert_allclose(idata.predictions["p"].values.reshape(flat.shape), flat,
                               rtol=0, atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = az.summary(idata, var_names=["f"])
    assert summary["r_hat"].max() < 1.2
    assert summary["ess_bulk"].median() > 30
    thinned = to_inference_data(result, thin=7)   # 9 draws: not split
    assert thinned.posterior.sizes["chain"] == 1


def test_loo_compares_models_on_the_label_likelihood():
    """az.compare ranks models on comparable categorical log-likelihoods."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = az.compare({"ilr": to_inference_data(fitted("ilr_gp", "exact")),
                            "gpd": to_inference_data(fitted("dirichlet_gp", "exact"))})
    assert set(table.index) == {"ilr", "gpd"}
    column = compare_elpd(table)
    assert np.all(column < 0) and np.all(column > -N * np.log(C))


@pytest.mark.parametrize("case, kind", [
    (("ilr_gp", "exact"), "given"),              # the shared fits are given hyperparameters
    (("softmax_svgp", "svi"), "SVI ELBO (type-II ML)"),
    (("logistic_softmax", "nuts"), "given"),     # NUTS on the latent f, hyperparameters fixed
])
def test_a_point_estimate_is_one_value_and_the_sampled_latent_real_draws(case, kind):
    """Point hyperparameters are exported once, as they were fitted, in constant_data with
    no chain or draw dim and marked in attrs (not 60 identical draws with ESS 60 and NaN
    R-hat); the latent f, which the fit did sample, keeps its draws, which vary."""
    result = fitted(*case)
    idata = to_inference_data(result)
    assert result.point_hypers
    constant = idata.constant_data
    assert constant.attrs["point_estimate"] == kind
    for name, value in result.hypers.items():
        assert name not in idata.posterior, name
        assert "chain" not in constant[name].dims and "draw" not in constant[name].dims
        assert constant[name].attrs["point_estimate"] == kind
        np.testing.assert_array_equal(constant[name].values, np.asarray(value)[0, 0])
    assert "point_estimate" not in constant["X"].attrs
    f = idata.posterior["f"].values
    chains, draws = exported_chains(result)
    assert f.shape[:2] == (chains, draws)
    assert np.all(np.std(f, axis=(0, 1)) > 0)       # every element of f really varies
    # a point value broadcasts against the draws and survives a selection of draws
    kept = idata.sel(draw=slice(draws // 2, None))
    assert kept.constant_data.identical(constant)
    scaled = idata.posterior["f"] / np.sqrt(constant["kernel_variance"])
    assert scaled.sizes["draw"] == draws
    both = concat_chains(idata, idata)       # two runs as chains: data kept once
    assert both.posterior.sizes["chain"] == 2 * chains
    assert both.constant_data.identical(constant)


def test_sampled_hyperparameters_stay_posterior_draws():
    """NUTS on the collapsed model samples the hyperparameters: their draws are in
    posterior, with ESS and R-hat from ArviZ, and constant_data holds only X."""
    result = fitted("ilr_gp", "nuts")
    idata = to_inference_data(result)
    assert not result.point_hypers
    assert set(idata.constant_data.data_vars) == {"X"}
    assert "point_estimate" not in idata.constant_data.attrs
    variance = idata.posterior["kernel_variance"]
    assert variance.dims == ("chain", "draw") and np.ptp(variance.values) > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isfinite(float(az.rhat(idata, var_names=["kernel_variance"])
                                 ["kernel_variance"]))


@pytest.mark.parametrize("names, labels", [
    (None, [0, 1, 2]),                                  # a driver export: codes
    ([3, 5, 7], [3, 5, 7]),                             # numbers stay numbers
    (np.array(["x", "y", "z"], dtype=object), ["x", "y", "z"]),
])
def test_labels_are_codes_and_class_label_names_them(names, labels):
    """Every exported y holds the codes 0..C-1 that the class coordinate holds, and the
    class_label coordinate the original labels, on every group with labels: the observed
    labels equal the training codes, and class_label[y] the original labels."""
    result = fitted("ilr_gp", "exact")
    X, y = toy()
    idata = to_inference_data(result, X[:NUM_PRED], y_pred=y[:NUM_PRED], class_names=names)
    for group in LABEL_GROUPS:
        coords = idata[group].coords
        assert list(coords["class"].values) == [0, 1, 2], group
        assert list(coords["class_label"].values) == labels, group
        assert coords["class_label"].dims == ("class",), group
    observed = idata.observed_data
    np.testing.assert_array_equal(observed["y"], y)
    np.testing.assert_array_equal(observed["class_label"].values[observed["y"].values],
                                  np.asarray(labels)[y])
    replicated = np.unique(idata.posterior_predictive["y"].values)
    assert set(replicated.tolist()) <= set(observed["class"].values.tolist())
    np.testing.assert_array_equal(idata.predictions_constant_data["y"], y[:NUM_PRED])
    by_label = idata.predictions["p"].swap_dims({"class": "class_label"})
    np.testing.assert_array_equal(by_label.sel(class_label=labels[2]).values,
                                  idata.predictions["p"].sel({"class": 2}).values)
    with pytest.raises(ValueError, match="class_names must have 3 entries"):
        to_inference_data(result, class_names=["a", "b"])


def test_export_round_trips_through_netcdf(tmp_path):
    """The point estimates, their attrs and the class_label coordinate survive
    ``to_netcdf``/``az.from_netcdf`` (what ``ppgpc fit --save-idata`` writes)."""
    result = fitted("ilr_gp_sparse", "exact")
    X, y = toy()
    idata = to_inference_data(result, X[:NUM_PRED], class_names=["a", "b", "c"])
    idata.to_netcdf(str(tmp_path / "idata.nc"))
    back = az.from_netcdf(str(tmp_path / "idata.nc"))
    for name in result.hypers:
        np.testing.assert_array_equal(back.constant_data[name].values,
                                      idata.constant_data[name].values)
        assert back.constant_data[name].attrs["point_estimate"] == "given"
    assert list(back.observed_data["class_label"].values) == ["a", "b", "c"]
    assert list(back.predictions["class"].values) == [0, 1, 2]


def _svi_case():
    return next((m, k) for m, k in CASES if k == "svi")


@pytest.mark.parametrize("case", [("ilr_gp", "nuts", None), "svi", SPARSE_VARIANTS[0]])
def test_thinned_export_keeps_every_kth_draw(case):
    """``thin=k`` exports draws 0, k, 2k, ... of each chain: the thinned posterior is the
    full export's at those draws, and traces stay whole. (An inducing fit's f and u, at
    the training and inducing inputs, are fresh draws from p(f | v) for each kept v, so
    only their shapes are the full export's.)"""
    model, method, num_inducing = (*_svi_case(), None) if case == "svi" else case
    result = fitted(model, method, num_inducing=num_inducing)
    full = to_inference_data(result)
    thinned = to_inference_data(result, thin=7)
    kept = np.arange(0, result.num_draws, 7)
    assert thinned.posterior.sizes["draw"] == len(kept)
    for name in thinned.posterior.data_vars:
        if result.predictive_kind == "inducing" and name in ("f", "u"):
            assert thinned.posterior[name].shape[1] == len(kept)
            continue
        values = full.posterior[name].values  # back to the fit's chains, in order
        values = values.reshape((result.num_chains, result.num_draws) + values.shape[2:])
        np.testing.assert_array_equal(thinned.posterior[name].values, values[:, kept],
                                      err_msg=name)
    if method in ("svi", "cavi"):  # the ELBO trace is not per draw
        assert thinned.sample_stats["elbo"].shape == full.sample_stats["elbo"].shape
    else:
        np.testing.assert_array_equal(thinned.sample_stats["diverging"].values,
                                      full.sample_stats["diverging"].values[:, kept])
    assert result.thin(7).info.thinned_by == 7
    assert result.thin(1) is result


@pytest.mark.parametrize("model", ["logistic_softmax", "ilr_gp"])
def test_a_thinned_export_keeps_the_fits_own_exact_mean(model):
    """``thin`` thins the exported draws, never the estimate beside them: ``p_mean`` is the
    fit's ``predict_proba`` over all its draws, bit for bit, not the thinned draws' mean
    (which differs here by Monte Carlo error, so the test sees a drift)."""
    result = fitted(model, "nuts")
    X = toy()[0][:NUM_PRED]
    full = np.asarray(result.predict_proba(X))
    thinned_mean = np.asarray(result.thin(7).predict_proba(X))
    assert np.abs(full - thinned_mean).max() > 1e-6            # the test's power
    exported = to_inference_data(result, X, thin=7)
    np.testing.assert_array_equal(exported.predictions_constant_data["p_mean"].values, full)


def test_export_over_the_size_limit_names_the_thin_that_fits():
    result = fitted(*_svi_case())
    per_draw = 8 * N * result.spec.num_latent(C) * result.num_chains
    with pytest.raises(ValueError, match=r"pass thin=4 \(keeps 15 draws"):
        to_inference_data(result, max_bytes=15 * per_draw)
    assert to_inference_data(result, thin=4, max_bytes=15 * per_draw).posterior.sizes["draw"] == 15
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="thin step must be a positive integer"):
            result.thin(bad)


def test_hyperparameter_dims():
    kw = dict(num_features=4, num_latent=3)
    assert hyperparameter_dims("kernel_lengthscale", (4,), ard=True, **kw) == ["feature"]
    assert hyperparameter_dims("kernel_lengthscale", (3,), ard=False, **kw) == ["latent"]
    assert hyperparameter_dims("kernel_lengthscale", (3, 4), ard=True, **kw) == ["latent",
                                                                                 "feature"]
    assert hyperparameter_dims("mean", (3,), ard=True, **kw) == ["latent"]
    assert hyperparameter_dims("noise_scale", (3,), ard=True, **kw) == ["latent"]
    assert hyperparameter_dims("inducing_inputs", (5, 4), ard=True, **kw) == ["inducing",
                                                                              "feature"]
    assert hyperparameter_dims("W", (3, 3), ard=True, **kw) is None


def test_bad_prediction_inputs_are_refused():
    result = fitted("ilr_gp", "exact")
    with pytest.raises(ValueError, match=r"X_pred must have shape \(n, 2\)"):
        to_inference_data(result, np.zeros((3, 5)))
    with pytest.raises(ValueError, match="y_pred"):
        to_inference_data(result, np.zeros((3, 2)), y_pred=np.array([0, 1, 7]))


def test_unsupported_method_names_the_supported_ones():
    X, y = toy()
    with pytest.raises(ValueError, match=r"does not support method 'gibbs'.*\['exact', 'map'"):
        fit("ilr_gp", X, y, method="gibbs")
    with pytest.raises(ValueError, match="unknown method 'hmc'"):
        fit("logistic_softmax", X, y, method="hmc")
