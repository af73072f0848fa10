"""ILR-GP model module (docs/math.md section 1) through the driver."""

import functools

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy.stats import multivariate_normal

from arviz_versions import group_names, loo
from conftest import (
    SMALL,
    assert_exact_fit_classifies,
    assert_nuts_matches_gaussian_posterior,
    toy_problem,
)
from ppgpc.gp import simplex
from ppgpc.gp.kernels import RBF, gram
from ppgpc.infer import fit, supported_methods, to_inference_data
from ppgpc.models import ilr_gp


def test_collapsed_model_density_equals_direct_mvn():
    X, y = toy_problem(12, 3)
    data = ilr_gp.prepare(X, y, 3, epsilon=0.99, tau=0.05)
    kernel = RBF(ard=True)
    hypers = {"kernel_variance": jnp.asarray(3.0), "kernel_lengthscale": jnp.asarray([0.7, 1.4])}
    model = functools.partial(ilr_gp.collapsed_model, data, kernel)
    total, trace = log_density(model, (), {}, hypers)
    K = np.asarray(gram(kernel, {"variance": 3.0, "lengthscale": jnp.asarray([0.7, 1.4])},
                        jnp.asarray(X)))
    cov = K + data.noise_var * np.eye(12)
    expected = sum(multivariate_normal(np.zeros(12), cov).logpdf(np.asarray(data.targets)[:, d])
                   for d in range(2))
    z_site = trace["z"]
    assert float(jnp.sum(z_site["fn"].log_prob(z_site["value"]))) == pytest.approx(expected, rel=1e-10)
    priors = kernel.priors(2)
    expected_total = expected + float(priors["variance"].log_prob(3.0)) + float(
        priors["lengthscale"].log_prob(jnp.asarray([0.7, 1.4])))
    assert float(total) == pytest.approx(expected_total, rel=1e-10)


def test_prepare_targets_and_noise():
    X, y = toy_problem(9, 3)
    data = ilr_gp.prepare(X, y, 3, epsilon=0.999, tau=0.01)
    targets = np.asarray(simplex.ilr_class_targets(3, 0.999))
    np.testing.assert_allclose(data.targets, targets[y])
    assert np.sqrt(data.noise_var) == pytest.approx(simplex.proposition1_noise_std(3, 0.999, 0.01))
    data = ilr_gp.prepare(X, y, 3, epsilon=0.999, noise_std=0.5)
    assert data.noise_var == pytest.approx(0.25)


def test_supported_methods():
    assert set(supported_methods("ilr_gp")) == {"exact", "map", "nuts"}
    X, y = toy_problem(10, 2)
    with pytest.raises(ValueError, match="supports"):
        fit("ilr_gp", X, y, method="gibbs")
    with pytest.raises(TypeError, match="num_samples"):
        fit("ilr_gp", X, y, method="exact", num_samples=3)


@pytest.fixture(scope="module")
def exact_fit():
    X, y = toy_problem(30, 3)
    return fit("ilr_gp", X, y, method="exact", model_options={"epsilon": 0.99, "tau": 0.05},
               num_draws=400), X, y


def test_exact_fit_predicts_probabilities(exact_fit):
    result, X, y = exact_fit
    assert_exact_fit_classifies(result, X, y, num_classes=3, min_accuracy=0.9)
    assert result.info.cholesky_jitter == 0.0


def test_exact_predictive_probabilities_average_the_link_over_latent_draws():
    """p(y*|data) is E[softmax(V f*)], not softmax(V E[f*]): check against a direct Monte
    Carlo estimate from the predictive mean and variance, within its standard error."""
    X, y = toy_problem(30, 3)
    result = fit("ilr_gp", X, y, method="exact", model_options={"epsilon": 0.99, "tau": 0.05},
                 num_draws=5000)
    Xs = np.array([[0.3, 0.2], [3.0, -3.0]])
    hypers = {k: v[0, 0] for k, v in result.hypers.items()}
    post = ilr_gp.condition(result.data, result.kernel, hypers)
    mean, var = ilr_gp.predict(result.data, result.kernel, hypers, post, jnp.asarray(Xs))
    S = 200_000
    f = mean + jnp.sqrt(var) * jax.random.normal(jax.random.PRNGKey(9), (S,) + mean.shape)
    p = np.asarray(simplex.ilr_inverse(f))
    reference, se = p.mean(0), p.std(0) / np.sqrt(S)
    got = result.predict_proba(Xs)
    n_draws = result.num_draws
    tol = 5 * np.sqrt(se**2 + (p.std(0) / np.sqrt(n_draws)) ** 2)
    assert np.all(np.abs(got - reference) <= tol + 1e-12)
    plug_in = np.asarray(simplex.ilr_inverse(mean))
    assert np.any(np.abs(plug_in - reference) > 2 * tol)  # the plug-in is measurably different


def test_inference_data_groups_and_diagnostics(exact_fit):
    result, X, _ = exact_fit
    idata = to_inference_data(result, X[:5])
    for group in ("posterior", "posterior_predictive", "log_likelihood", "observed_data",
                  "predictions", "constant_data"):
        assert group in group_names(idata)
    assert idata.posterior["f"].dims == ("chain", "draw", "obs", "latent")
    assert idata.posterior["f"].shape == (4, 100, 30, 2)  # 400 independent draws, 4 chains
    # type-II point hyperparameters: one value in constant_data, not draws
    assert "kernel_lengthscale" not in idata.posterior
    assert idata.constant_data["kernel_lengthscale"].dims == ("feature",)
    assert idata.constant_data.attrs["point_estimate"] == result.info.hyperparameters
    assert idata.log_likelihood["y"].shape == (4, 100, 30)
    assert idata.predictions["p"].shape == (4, 50, 5, 3)  # 400 draws, every 2nd kept
    assert idata.posterior.attrs["ppgpc_model"] == "ilr_gp"
    # categorical log-likelihood of the observed labels
    ll = idata.log_likelihood["y"].values
    f = idata.posterior["f"].values
    expected = np.take_along_axis(np.asarray(simplex.ilr_log_inverse(f)),
                                  result.data.y[None, None, :, None], axis=-1)[..., 0]
    np.testing.assert_allclose(ll, expected)
    assert np.all(ll <= 0)
    assert np.isfinite(loo(idata).elpd)
    az.summary(idata, var_names=["f"])


@pytest.mark.slow
def test_nuts_on_the_latent_form_matches_the_closed_form_posterior():
    """The exact latent posterior N(K A^-1 Z, K - K A^-1 K) at the training inputs against
    NUTS on the latent form with the same (fixed) hyperparameters. Tolerances: ArviZ's Monte
    Carlo standard errors of each posterior mean and standard deviation, ``mcse_mean`` and
    ``mcse_sd`` (``conftest.assert_nuts_matches_gaussian_posterior``)."""
    X, y = toy_problem(16 if SMALL else 24, 3, seed=3)
    hypers = {"kernel_variance": 20.0, "kernel_lengthscale": np.array([1.2, 0.9])}
    options = {"epsilon": 0.99, "tau": 0.05}
    samples = 600 if SMALL else 1500
    nuts = fit("ilr_gp", X, y, method="nuts", form="latent", hyperparameters=hypers,
               model_options=options, num_warmup=400, num_samples=samples,
               max_samples=samples, num_chains=2,
               progress_bar=False, seed=1)
    data = nuts.data
    K = np.asarray(gram(nuts.kernel, {"variance": 20.0, "lengthscale": jnp.asarray([1.2, 0.9])},
                        data.X))
    N = K.shape[0]
    A = K + data.noise_var * np.eye(N)
    mean = K @ np.linalg.solve(A, np.asarray(data.targets))
    sd = np.sqrt(np.diag(K - K @ np.linalg.solve(A, K)))[:, None] * np.ones((1, 2))
    assert_nuts_matches_gaussian_posterior(nuts, mean, sd, min_ess=100, max_abs_z=4.5)
    idata = to_inference_data(nuts)
    assert {"diverging", "tree_depth"} <= set(idata.sample_stats.data_vars)
    assert float(az.rhat(idata, var_names=["f"])["f"].max()) < 1.05


@pytest.mark.slow
def test_nuts_over_hyperparameters_runs_and_predicts():
    X, y = toy_problem(20, 3, seed=4)
    samples = 100 if SMALL else 300
    result = fit("ilr_gp", X, y, method="nuts", num_warmup=samples, num_samples=samples,
                 max_samples=samples,
                 num_chains=2, progress_bar=False, model_options={"epsilon": 0.99})
    assert result.hypers["kernel_variance"].shape == (2, samples)
    assert result.latent.shape == (2, samples, 20, 2)
    probs = result.predict_proba(X[:4])
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-12)
    idata = to_inference_data(result, X[:4])
    assert idata.posterior["kernel_variance"].shape == (2, samples)
    az.summary(idata, var_names=["kernel_variance", "kernel_lengthscale"])
    assert np.isfinite(loo(idata).elpd)


def test_map_differs_from_ml_and_is_finite():
    X, y = toy_problem(20, 3, seed=5)
    ml = fit("ilr_gp", X, y, method="exact", num_draws=10)
    mp = fit("ilr_gp", X, y, method="map", num_draws=10)
    assert mp.info.hyperparameters == "type-II MAP"
    assert not np.allclose(ml.hypers["kernel_lengthscale"], mp.hypers["kernel_lengthscale"])


def test_predict_proba_uses_many_predictive_draws_even_when_few_were_stored():
    """A fit storing one training draw must still average the link over many predictive
    draws (the epsilon search relies on this): compare with a fit storing 5000 draws."""
    X, y = toy_problem(30, 3)
    options = {"epsilon": 0.99, "tau": 0.05}
    few = fit("ilr_gp", X, y, method="exact", model_options=options, num_draws=1)
    many = fit("ilr_gp", X, y, method="exact", model_options=options, num_draws=5000)
    Xs = np.array([[0.3, 0.2], [3.0, -3.0], [0.0, 0.0]])
    p_few, p_many = few.predict_proba(Xs), many.predict_proba(Xs)
    # both are Monte Carlo averages: >= 1000 and 5000 draws, each probability's s.e. <= 0.5/sqrt(n)
    tol = 5 * 0.5 * np.sqrt(1 / 1000 + 1 / 5000)
    assert np.max(np.abs(p_few - p_many)) < tol
    assert few.predict_latent(Xs).shape == (1, 1, 3, 2)  # exports still match the posterior


# ------------------------------------------------------------ learned noise scale
def test_learned_noise_scale_enters_the_density_as_a_factor_on_sigma_squared():
    """collapsed_model with learn_noise_scale: the z density is the MVN with s sigma^2 and
    the total adds the LogNormal(0, 1) prior of s (docs/math.md section 1, ILR paper section 5)."""
    X, y = toy_problem(12, 3)
    data = ilr_gp.prepare(X, y, 3, epsilon=0.99, tau=0.05, learn_noise_scale=True)
    kernel = RBF(ard=True)
    hypers = {"kernel_variance": jnp.asarray(3.0), "kernel_lengthscale": jnp.asarray([0.7, 1.4]),
              "noise_scale": jnp.asarray(2.5)}
    total, trace = log_density(functools.partial(ilr_gp.collapsed_model, data, kernel), (), {},
                               hypers)
    K = np.asarray(gram(kernel, {"variance": 3.0, "lengthscale": jnp.asarray([0.7, 1.4])},
                        jnp.asarray(X)))
    cov = K + 2.5 * data.noise_var * np.eye(12)
    expected = sum(multivariate_normal(np.zeros(12), cov).logpdf(np.asarray(data.targets)[:, d])
                   for d in range(2))
    z_site = trace["z"]
    assert float(jnp.sum(z_site["fn"].log_prob(z_site["value"]))) == pytest.approx(expected,
                                                                                   rel=1e-10)
    priors = kernel.priors(2)
    expected_total = (expected + float(priors["variance"].log_prob(3.0))
                      + float(priors["lengthscale"].log_prob(jnp.asarray([0.7, 1.4])))
                      + float(ilr_gp.NOISE_SCALE_PRIOR.log_prob(2.5)))
    assert float(total) == pytest.approx(expected_total, rel=1e-10)
    assert ilr_gp.initial_hypers(data, kernel)["noise_scale"] == 1.0
    assert "noise_scale" not in ilr_gp.initial_hypers(
        ilr_gp.prepare(X, y, 3, epsilon=0.99), kernel)


def test_type_ii_ml_recovers_a_noise_level_far_from_proposition_1():
    """Targets drawn from the ILR-GP prior with noise 9 sigma^2 (s = 9): type-II ML of s
    must land near 9, not at the Proposition 1 level s = 1. With N (C-1) = 2 x 150 noise
    residuals, the relative standard error of a variance estimate is about
    sqrt(2 / 300) = 0.08; the tolerance is 4 of those (s within 9 x (1 +- 0.33))."""
    gen = np.random.default_rng(11)
    N = 150
    X = gen.uniform(-2, 2, size=(N, 2))
    y = gen.integers(0, 3, size=N)
    data = ilr_gp.prepare(X, y, 3, epsilon=0.99, tau=0.05, learn_noise_scale=True)
    kernel = RBF(ard=True)
    K = np.asarray(gram(kernel, {"variance": 1.0, "lengthscale": jnp.asarray([1.0, 1.0])},
                        jnp.asarray(X)))
    cov = K + 9.0 * data.noise_var * np.eye(N)
    Z = np.linalg.cholesky(cov) @ gen.normal(size=(N, 2))
    data = data._replace(targets=jnp.asarray(Z))
    from ppgpc.infer.sites import optimize_sites

    opt = optimize_sites(ilr_gp.collapsed_model, ilr_gp.initial_hypers(data, kernel),
                         args=(data, kernel), include_prior=False)
    s = float(opt.params["noise_scale"])
    assert abs(s / 9.0 - 1.0) < 4 * np.sqrt(2.0 / (N * 2)), s


def test_sparse_bound_with_a_noise_scale_is_tight_at_the_training_inputs():
    """Collapsed-ILR's factor at Z = X (no K_mm jitter) equals the exact collapsed model's
    z density, both with noise s sigma^2: the scale reaches the sparse bound."""
    from ppgpc.gp import sparse

    X, y = toy_problem(12, 3)
    kernel = RBF(ard=True)
    hypers = {"kernel_variance": jnp.asarray(3.0), "kernel_lengthscale": jnp.asarray([0.7, 1.4]),
              "noise_scale": jnp.asarray(0.4)}
    base = ilr_gp.prepare(X, y, 3, epsilon=0.99, tau=0.05, learn_noise_scale=True)
    bound = sparse.collapsed_bound(kernel, {"variance": 3.0, "lengthscale": jnp.asarray([0.7, 1.4])},
                                   base.X, base.targets, base.X,
                                   ilr_gp.noise_var(base, hypers), kmm_jitter=0.0)
    _, trace = log_density(functools.partial(ilr_gp.collapsed_model, base, kernel), (), {}, hypers)
    exact = float(jnp.sum(trace["z"]["fn"].log_prob(trace["z"]["value"])))
    assert float(bound) == pytest.approx(exact, rel=1e-8)
    # the sparse model's factor is the bound at s sigma^2 (default K_mm jitter), not at sigma^2
    data = sparse.SparseData(base, base.X[:5])
    Zm = base.X[:5]
    _, strace = log_density(functools.partial(ilr_gp.sparse_collapsed_model, data, kernel), (), {},
                            {**hypers, "inducing_inputs": Zm})
    site = strace["collapsed_bound"]
    factor = float(site["fn"].log_prob(site["value"]))
    params = {"variance": 3.0, "lengthscale": jnp.asarray([0.7, 1.4])}
    scaled = float(sparse.collapsed_bound(kernel, params, base.X, base.targets, Zm,
                                          0.4 * base.noise_var))
    unscaled = float(sparse.collapsed_bound(kernel, params, base.X, base.targets, Zm,
                                            base.noise_var))
    assert factor == pytest.approx(scaled, rel=1e-12)
    assert abs(scaled - unscaled) > 1e-3 * abs(scaled)  # far beyond the 1e-12 match above
