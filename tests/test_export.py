"""ArviZ export for every (model, method): groups, shapes, dims, and ArviZ running on it."""

import warnings

import arviz as az
import numpy as np
import pytest

from fitted_cases import (CORE_MODELS, SAME_PATH, SPARSE_VARIANTS, C, N, NUM_PRED, cases,
                          fitted, toy)
from ppgpc.infer import fit, supported_methods
from ppgpc.infer.driver import METHODS
from ppgpc.infer.arviz_export import hyperparameter_dims

CASES = cases()
EXPORTED = [(m, k, None) for m, k in CASES] + list(SPARSE_VARIANTS)


@pytest.fixture(scope="module", params=EXPORTED,
                ids=[f"{m}-{k}" + ("-sparse" if M else "") for m, k, M in EXPORTED])
def exported(request):
    model, method, num_inducing = request.param
    result = fitted(model, method, num_inducing=num_inducing)
    X, y = toy()
    idata = result.to_inference_data(X[:NUM_PRED], y_pred=y[:NUM_PRED],
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
    chains, draws = result.num_chains, result.num_draws
    L = result.spec.num_latent(C)
    for group in ("posterior", "log_likelihood", "posterior_predictive", "observed_data",
                  "constant_data", "predictions", "predictions_constant_data"):
        assert group in idata.groups(), group
    post = idata.posterior
    assert post["f"].dims == ("chain", "draw", "obs", "latent")
    assert post["f"].shape == (chains, draws, N, L)
    for name in result.hypers:
        assert post[name].shape[:2] == (chains, draws), name
    assert post["kernel_lengthscale"].dims[2:] == ("feature",)
    if "inducing_inputs" in result.hypers:
        assert post["inducing_inputs"].dims[2:] == ("inducing", "feature")
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
    assert list(p["class"].values) == ["a", "b", "c"]
    assert idata.predictions["f"].shape == (chains, draws, NUM_PRED, L)
    np.testing.assert_array_equal(idata.predictions_constant_data["y"], toy()[1][:NUM_PRED])
    for group in idata.groups():
        assert idata[group].attrs["ppgpc_model"] == model
        assert idata[group].attrs["ppgpc_method"] == method


def test_sample_stats_record_the_method(exported):
    _, method, result, idata = exported
    chains, draws = result.num_chains, result.num_draws
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
        summary = az.summary(idata, var_names=["f", "kernel_variance"])
        loo = az.loo(idata, pointwise=True)
        rhat = az.rhat(idata, var_names=["f"])
    L = result.spec.num_latent(C)
    assert len(summary) == N * L + 1 and np.all(np.isfinite(summary["mean"]))
    assert np.isfinite(loo.elpd_loo) and loo.loo_i.shape == (N,)
    assert rhat["f"].shape == (N, L)
    if result.num_chains > 1:  # R-hat needs two chains; short MCMC of a tiny problem mixes
        assert np.nanmax(rhat["f"].values) < 1.5


def test_loo_compares_models_on_the_label_likelihood():
    """az.compare ranks models on comparable categorical log-likelihoods."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = az.compare({"ilr": fitted("ilr_gp", "exact").to_inference_data(),
                            "gpd": fitted("dirichlet_gp", "exact").to_inference_data()})
    assert set(table.index) == {"ilr", "gpd"}
    assert np.all(table["elpd_loo"] < 0) and np.all(table["elpd_loo"] > -N * np.log(C))


def test_point_estimates_are_repeated_over_the_draws():
    idata = fitted("ilr_gp", "exact").to_inference_data()
    variance = idata.posterior["kernel_variance"].values
    assert variance.shape == (1, 60) and np.ptp(variance) == 0


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
    full = result.to_inference_data()
    thinned = result.to_inference_data(thin=7)
    kept = np.arange(0, result.num_draws, 7)
    assert thinned.posterior.sizes["draw"] == len(kept)
    for name in thinned.posterior.data_vars:
        if result.predictive_kind == "inducing" and name in ("f", "u"):
            assert thinned.posterior[name].shape[1] == len(kept)
            continue
        np.testing.assert_array_equal(thinned.posterior[name].values,
                                      full.posterior[name].values[:, kept], err_msg=name)
    if method in ("svi", "cavi"):  # the ELBO trace is not per draw
        assert thinned.sample_stats["elbo"].shape == full.sample_stats["elbo"].shape
    else:
        np.testing.assert_array_equal(thinned.sample_stats["diverging"].values,
                                      full.sample_stats["diverging"].values[:, kept])
    assert result.thin(7).info["thinned_by"] == 7
    assert result.thin(1) is result


def test_export_over_the_size_limit_names_the_thin_that_fits():
    result = fitted(*_svi_case())
    per_draw = 8 * N * result.spec.num_latent(C) * result.num_chains
    with pytest.raises(ValueError, match=r"pass thin=4 \(keeps 15 draws"):
        result.to_inference_data(max_bytes=15 * per_draw)
    assert result.to_inference_data(thin=4, max_bytes=15 * per_draw).posterior.sizes["draw"] == 15
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
        result.to_inference_data(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="y_pred"):
        result.to_inference_data(np.zeros((3, 2)), y_pred=np.array([0, 1, 7]))


def test_unsupported_method_names_the_supported_ones():
    X, y = toy()
    with pytest.raises(ValueError, match=r"does not support method 'gibbs'.*\['exact', 'map'"):
        fit("ilr_gp", X, y, method="gibbs")
    with pytest.raises(ValueError, match="unknown method 'hmc'"):
        fit("logistic_softmax", X, y, method="hmc")
