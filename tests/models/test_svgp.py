"""Softmax SVGP / Uncollapsed-ILR (models/svgp/) and driver method "svi".

Statistical checks compare the mean of many independent ELBO estimates with a value known
independently (Gauss-Hermite quadrature plus the closed-form Gaussian KL, or Titsias's
collapsed bound), with a tolerance of 4.5 Monte Carlo standard errors (independent draws,
so the ESS is the number of draws).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer import TraceMeanField_ELBO

import ppgpc
from arviz_versions import group_names
from ppgpc import SoftmaxSVGPClassifier
from ppgpc.gp import simplex, sparse
from ppgpc.gp.kernels import RBF, gram
from ppgpc.infer import fit
from ppgpc.models.svgp import variational as svgp_schedule
from ppgpc.models import svgp

from conftest import SMALL, toy_problem

KERNEL = RBF(ard=True)
NUM_ESTIMATES = 2000


@functools.lru_cache(maxsize=None)
def _elbo_sampler(batch_size):
    """A jitted (keys, data, params) -> ELBO estimates, one per key (TraceMeanField_ELBO)."""
    elbo = TraceMeanField_ELBO()

    def one(key, data, params):
        return -elbo.loss(key, params, svgp.model, svgp.guide, data, KERNEL, batch_size)

    return jax.jit(jax.vmap(one, in_axes=(0, None, None)))


def _elbo_draws(data, params, batch_size, num, seed=0):
    """``num`` independent ELBO estimates of the model and guide at ``params``."""
    keys = jax.random.split(jax.random.PRNGKey(seed), num)
    return np.asarray(_elbo_sampler(batch_size)(keys, data, params))


def _assert_mean_close(draws, target):
    se = draws.std(ddof=1) / np.sqrt(draws.size)
    assert abs(draws.mean() - target) < 4.5 * se + 1e-9, (draws.mean(), target, se)


# ------------------------------------------------------------- a known binary case
@pytest.fixture(scope="module")
def binary_case():
    """C = 2 with the ILR link (L = 1): E_q[log p(y | w f)] is a 1-D Gaussian integral."""
    return _binary_case_data()


def _binary_case_data():
    gen = np.random.default_rng(3)
    N, M, D = 30, 5, 2
    X = gen.normal(size=(N, D))
    y = (X[:, 0] + 0.5 * gen.normal(size=N) > 0).astype(int)
    data = svgp.prepare(X, y, 2, link="ilr", num_inducing=M, seed=1)
    R = np.tril(0.3 * gen.normal(size=(1, M, M)), -1) + np.diag(gen.uniform(0.3, 0.9, M))
    params = {
        "kernel_variance": jnp.asarray(1.7),
        "kernel_lengthscale": jnp.asarray([0.9, 1.4]),
        "inducing_inputs": data.inducing_init + 0.1,
        "mixing": jnp.asarray([[1.3]]),
        "q_mean": jnp.asarray(gen.normal(size=(1, M))),
        "q_scale_tril": jnp.asarray(R),
    }
    return data, params


def _numpy_q_marginals_and_kl(kmm_jitter, kernel_params, Z, X, m, R):
    """One latent in plain NumPy: the marginals of q(f(X)) for whitened q(v) = N(m, R R^T)
    at inducing inputs Z, and KL(q(v) || N(0, I)).

    Returns mean (N,) = a^T m, variance (N,) = k(x, x) - |a|^2 + |R^T a|^2 with
    a = L_mm^-1 K_mn, and the closed-form Gaussian KL."""
    Z, X = np.asarray(Z), np.asarray(X)
    m, R = np.asarray(m), np.asarray(R)
    variance = float(kernel_params["variance"])
    Kmm = (np.asarray(gram(KERNEL, kernel_params, jnp.asarray(Z)))
           + kmm_jitter * variance * np.eye(len(Z)))
    Kmn = np.asarray(gram(KERNEL, kernel_params, jnp.asarray(Z), jnp.asarray(X)))
    A = np.linalg.solve(np.linalg.cholesky(Kmm), Kmn)                       # (M, N)
    mean = A.T @ m
    var = variance - np.sum(A * A, 0) + np.sum((R.T @ A) ** 2, 0)
    kl = 0.5 * (m @ m + np.sum(R * R) - len(m)) - np.sum(np.log(np.abs(np.diag(R))))
    return mean, var, kl


def _analytic_elbo(data, params):
    """sum_i E_q[log p(y_i | w f_i)] by 80-point Gauss-Hermite minus the closed-form KL."""
    kp = {"variance": params["kernel_variance"], "lengthscale": params["kernel_lengthscale"]}
    mean, var, kl = _numpy_q_marginals_and_kl(
        data.kmm_jitter, kp, params["inducing_inputs"], data.X,
        params["q_mean"][0], params["q_scale_tril"][0])
    w = float(params["mixing"][0, 0])
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    g = w * (mean[:, None] + np.sqrt(var)[:, None] * nodes[None, :])       # (N, nodes)
    logp = np.asarray(simplex.ilr_log_inverse(jnp.asarray(g)[..., None]))  # (N, nodes, 2)
    y = np.asarray(data.y)
    ell = (logp[np.arange(len(y)), :, y] @ weights) / np.sqrt(2 * np.pi)
    return float(np.sum(ell) - kl)


def _with_estimator(data, ell_estimator):
    return dataclasses.replace(data, ell_estimator=ell_estimator)


@pytest.mark.parametrize("ell_estimator", svgp.ELL_ESTIMATORS)
@pytest.mark.parametrize("batch_size", [None, 10])
def test_elbo_estimator_is_unbiased_full_and_minibatch(binary_case, batch_size, ell_estimator):
    """Full-batch and minibatch (N/B-scaled) estimates both average to the analytic ELBO,
    with f drawn from q's marginals (local reparameterisation) or through one v."""
    data, params = binary_case
    data = _with_estimator(data, ell_estimator)
    target = _analytic_elbo(data, params)
    _assert_mean_close(_elbo_draws(data, params, batch_size, NUM_ESTIMATES), target)


def test_marginal_estimator_has_lower_variance_than_the_joint_one(binary_case):
    """On minibatches of 10, the marginal estimator's variance is below the joint one's by
    more than its sampling error: the sample variances of 2000 independent estimates have
    relative standard errors of about sqrt(2 / 2000) = 3% (more with heavy tails), and the
    ratio is required to be below 0.8."""
    data, params = binary_case
    joint = _elbo_draws(_with_estimator(data, "joint"), params, 10, NUM_ESTIMATES)
    marginal = _elbo_draws(_with_estimator(data, "marginal"), params, 10, NUM_ESTIMATES)
    assert marginal.var() < 0.8 * joint.var(), (marginal.var(), joint.var())


def test_marginal_moments_equal_the_moments_of_joint_draws(binary_case):
    """mean a^T m and variance resid + |R^T a|^2 equal the moments of f = a^T v + sqrt(resid) e
    with v ~ q(v), computed here in closed form from S = R R^T."""
    data, params = binary_case
    gen = np.random.default_rng(0)
    L, M, B = 3, 5, 7
    a = jnp.asarray(gen.normal(size=(M, B)))
    resid = jnp.asarray(gen.uniform(0.1, 0.5, B))
    m = jnp.asarray(gen.normal(size=(L, M)))
    R = jnp.asarray(np.tril(gen.normal(size=(L, M, M))))
    mean, var = svgp.marginal_moments(a, resid, m, R)
    S = np.einsum("lij,lkj->lik", R, R)
    assert np.allclose(mean, np.asarray(a).T @ np.asarray(m).T, rtol=1e-12)
    want = np.asarray(resid)[:, None] + np.einsum("mb,lmk,kb->bl", a, S, a)
    assert np.allclose(var, want, rtol=1e-12)


@pytest.mark.parametrize("ell_estimator", svgp.ELL_ESTIMATORS)
def test_elbo_is_exact_without_variational_variance(binary_case, ell_estimator):
    """With q(v) almost a point mass and every input an inducing input (5 distinct inputs,
    each repeated 6 times, so no conditional variance), every estimate equals
    sum_i log p(y_i | w a_i^T m) - KL: the estimator has no bias to hide."""
    data, params = binary_case
    data = _with_estimator(data, ell_estimator)
    Z = np.asarray(data.X[:5])
    data0 = dataclasses.replace(data, X=jnp.asarray(np.tile(Z, (6, 1))),
                                inducing_init=jnp.asarray(Z), kmm_jitter=0.0)
    params0 = {**params, "inducing_inputs": jnp.asarray(Z),
               "q_mean": jnp.linspace(-1.0, 1.0, 5)[None],
               "q_scale_tril": 1e-7 * jnp.eye(5)[None]}
    draws = _elbo_draws(data0, params0, None, NUM_ESTIMATES)  # same shapes: no recompile
    target = _analytic_elbo(data0, params0)
    assert np.allclose(draws, target, rtol=1e-5)


@pytest.mark.parametrize("ell_estimator", svgp.ELL_ESTIMATORS)
def test_gaussian_link_with_m_equal_n_matches_collapsed_bound_at_its_optimum(ell_estimator):
    """M = N, Z = X, Gaussian link: at the optimal q(v) (closed form in whitened
    coordinates, S = (I + A A^T / s2)^-1, m = S A y / s2) the bound equals Titsias's
    collapsed bound; moving q away from it lowers the bound."""
    gen = np.random.default_rng(5)
    N, L, s2 = 12, 2, 0.1
    X = np.sort(gen.uniform(-3, 3, size=(N, 1)), axis=0)
    Y = np.stack([np.sin(X[:, 0]), np.cos(X[:, 0])], 1) + 0.3 * gen.normal(size=(N, L))
    kp = {"variance": jnp.asarray(1.2), "lengthscale": jnp.asarray([1.1])}
    data = svgp.prepare_regression(X, Y, s2, X, kmm_jitter=0.0, ell_estimator=ell_estimator)
    K = np.asarray(gram(KERNEL, kp, jnp.asarray(X)))
    A = np.linalg.cholesky(K).T                               # L_m^-1 K_mn with Z = X
    S = np.linalg.inv(np.eye(N) + A @ A.T / s2)
    m = (S @ A @ Y / s2).T                                    # (L, N)
    params = {"kernel_variance": kp["variance"], "kernel_lengthscale": kp["lengthscale"],
              "inducing_inputs": jnp.asarray(X), "mixing": jnp.eye(L),
              "q_mean": jnp.asarray(m),
              "q_scale_tril": jnp.asarray(np.broadcast_to(np.linalg.cholesky(S), (L, N, N)))}
    bound = float(sparse.collapsed_bound(KERNEL, kp, jnp.asarray(X), jnp.asarray(Y),
                                         jnp.asarray(X), s2, kmm_jitter=0.0))
    draws = _elbo_draws(data, params, None, NUM_ESTIMATES)
    _assert_mean_close(draws, bound)
    moved = _elbo_draws(data, {**params, "q_mean": params["q_mean"] + 0.2}, None, 200)
    se = moved.std(ddof=1) / np.sqrt(moved.size)
    assert moved.mean() < bound - 5 * se - 0.1


# ------------------------------------------------------------------- errors
def test_bad_options_raise_clear_errors():
    X, y = toy_problem(30, 3)
    with pytest.raises(ValueError, match="num_inducing M = 40 exceeds .* N = 30"):
        svgp.prepare(X, y, 3, num_inducing=40)
    with pytest.raises(ValueError, match="unknown link 'probit'"):
        svgp.prepare(X, y, 3, link="probit")
    with pytest.raises(ValueError, match="unknown ell_estimator 'local'"):
        svgp.prepare(X, y, 3, ell_estimator="local")
    with pytest.raises(ValueError, match="likelihood_samples must be a positive integer"):
        svgp.prepare(X, y, 3, likelihood_samples=0)
    with pytest.raises(ValueError, match="kernel_prior must be True or False"):
        svgp.prepare(X, y, 3, kernel_prior="yes")
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="initial_lengthscale must be finite and positive"):
            svgp.prepare(X, y, 3, initial_lengthscale=bad)
    with pytest.raises(ValueError, match="initial_variance must be a positive number"):
        svgp.prepare(X, y, 3, initial_variance="1")
    for removed in ({"initial_lengthscale": -0.5}, {"ell_estimator": "local"}):
        with pytest.raises(TypeError, match="unexpected keyword argument"):
            SoftmaxSVGPClassifier(num_inducing=5, **removed)  # driver/prepare options now
    with pytest.raises(ValueError, match="unknown link 'probit'"):
        SoftmaxSVGPClassifier(link="probit").fit(X, y)
    with pytest.raises(ValueError, match="batch_size B = 50 exceeds .* N = 30"):
        fit("softmax_svgp", X, y, method="svi", batch_size=50,
            model_options={"num_inducing": 5})
    with pytest.raises(ValueError, match="unknown optimizer 'adagrad'"):
        fit("softmax_svgp", X, y, method="svi", optimizer="adagrad",
            model_options={"num_inducing": 5})
    with pytest.raises(ValueError, match="unknown schedule"):
        fit("softmax_svgp", X, y, method="svi", schedule="linear",
            model_options={"num_inducing": 5})


# ------------------------------------------------------------- fits and predictions
@pytest.fixture(scope="module")
def fitted():
    """SVGPC on string labels (well-separated blobs), small M and B, few steps."""
    X, y = toy_problem(90, 3, seed=2)
    labels = np.array(["a", "b", "c"])[y]
    clf = SoftmaxSVGPClassifier(num_inducing=8, seed=1, inference_options={
        "batch_size": 30, "max_iter": 400, "learning_rate": 0.03, "num_draws": 64,
        "tol": None})
    return clf.fit(X, labels), X, labels


def test_predictions_shapes_and_normalisation(fitted):
    clf, X, labels = fitted
    probs = clf.predict_proba(X[:17])
    assert probs.shape == (17, 3)
    assert np.all(probs >= 0) and np.allclose(probs.sum(1), 1.0)
    assert set(clf.predict(X)) <= {"a", "b", "c"}
    assert clf.score(X, labels) > 0.9
    draws = clf.result_.predict_proba_draws(X[:4])
    assert draws.shape == (1, 64, 4, 3)
    assert np.allclose(np.sum(draws, -1), 1.0)


def test_elbo_trace_and_inducing_result(fitted):
    clf, X, _ = fitted
    res = clf.result_
    assert (res.data.ell_estimator, res.data.likelihood_samples) == ("marginal", 10)
    assert res.predictive_kind == "inducing" and res.latent is None
    assert res.inducing.shape == (1, 64, 8, 3)
    assert res.hypers["inducing_inputs"].shape == (1, 1, 8, 2)
    assert res.hypers["mixing"].shape == (1, 1, 3, 3)
    trace = res.sample_stats["elbo"]
    assert trace.shape == (1, 400) and res.info.svi.steps == 400
    assert trace[0, -100:].mean() > trace[0, :100].mean() + 10
    assert np.isclose(res.info.svi.elbo, trace[0, -100:].mean())
    assert res.log_likelihood().shape == (1, 64, 90)


def test_inference_data_export(fitted):
    clf, X, _ = fitted
    idata = clf.to_inference_data(X[:7])
    post = idata.posterior
    assert post["v"].dims == ("chain", "draw", "inducing", "latent")
    assert post["u"].shape == (4, 16, 8, 3)  # 64 independent draws as 4 chains
    # the SVI optimum of the inducing inputs is one point, not draws
    assert idata.constant_data["inducing_inputs"].dims == ("inducing", "feature")
    assert idata.constant_data.attrs["point_estimate"].startswith("SVI ELBO")
    assert post["f"].dims == ("chain", "draw", "obs", "latent")   # computed on demand
    assert idata.log_likelihood["y"].shape == (4, 16, 90)
    assert np.allclose(idata.log_likelihood["y"].values.reshape(1, 64, 90),
                       clf.result_.log_likelihood())
    assert idata.predictions["p"].shape == (4, 16, 7, 3)
    assert idata.sample_stats["elbo"].shape == (1, 400)


@pytest.mark.slow
def test_uncollapsed_ilr_estimator():
    """SoftmaxSVGPClassifier(link="ilr") is the SVGP model with the inverse ILR (what
    ILRGPClassifier(inference="uncollapsed") was)."""
    X, y = toy_problem(60 if SMALL else 120, 3, seed=4)
    clf = SoftmaxSVGPClassifier(link="ilr", num_inducing=8,
                          inference_options={"batch_size": 30, "max_iter": 300,
                                             "learning_rate": 0.03, "num_draws": 32})
    clf.fit(X, y)
    res = clf.result_
    assert res.spec.name == "ilr_gp_uncollapsed" and not hasattr(clf, "epsilon_")
    assert res.inducing.shape == (1, 32, 8, 2) and res.hypers["mixing"].shape == (1, 1, 2, 2)
    probs = clf.predict_proba(X)
    assert probs.shape == (len(y), 3) and np.allclose(probs.sum(1), 1.0)
    assert clf.score(X, y) > 0.9


@pytest.mark.slow
def test_nuts_on_the_full_softmax_gp():
    """The full (non-sparse) model runs under NUTS in latent form for small N."""
    X, y = toy_problem(24, 2, seed=6)
    hypers = {"kernel_variance": 2.0, "kernel_lengthscale": np.array([1.5, 1.5])}
    n = 40 if SMALL else 200
    res = fit("softmax_svgp", X, y, method="nuts", form="latent", hyperparameters=hypers,
              num_warmup=n, num_samples=n, max_samples=n, num_chains=1, progress_bar=False,
              model_options={"num_inducing": 1})
    assert res.latent.shape == (1, n, 24, 2) and res.predictive_kind == "latent"
    probs = res.predict_proba(X)
    assert probs.shape == (24, 2) and np.allclose(probs.sum(1), 1.0)
    assert np.mean(probs.argmax(1) == y) > 0.9


@pytest.mark.slow
def test_estimator_nuts_takes_hyperparameters_from_a_preliminary_svi_fit():
    """``inference="nuts"`` without hyperparameters: an SVI fit supplies them, and the NUTS
    options in ``inference_options`` go to NUTS only (they once leaked into the SVI fit)."""
    X, y = toy_problem(24, 2, seed=6)
    n = 40 if SMALL else 200
    clf = SoftmaxSVGPClassifier(
        inference="nuts", num_inducing=4,
        inference_options={"num_warmup": n, "num_samples": n, "max_samples": n, "num_chains": 1})
    clf.fit(X, y)
    res = clf.result_
    assert res.method == "nuts" and res.latent.shape == (1, n, 24, 2)
    assert set(res.hypers) >= {"kernel_variance", "kernel_lengthscale"}
    assert clf.score(X, y) > 0.9


# ------------------------------------------------- type-II MAP of the kernel (prior)
def _lognormal_logpdf(x, mu, sigma):
    x = np.asarray(x, dtype=float)
    z = (np.log(x) - mu) / sigma
    return -0.5 * z * z - np.log(x * sigma * np.sqrt(2 * np.pi))


def _rbf_log_prior(params, D):
    """sum of log LogNormal(0, 1.5) over the variances and log LogNormal(log sqrt(D), 1)
    over the lengthscales (``RBF.priors``), in NumPy."""
    return float(np.sum(_lognormal_logpdf(params["kernel_variance"], 0.0, 1.5))
                 + np.sum(_lognormal_logpdf(params["kernel_lengthscale"],
                                            0.5 * np.log(D), 1.0)))


@pytest.mark.parametrize("batch_size", [None, 10])
@pytest.mark.parametrize("layout", ["shared", "per_latent"])
def test_kernel_prior_adds_the_unscaled_log_prior_to_the_elbo(layout, batch_size):
    """With ``kernel_prior=True`` every ELBO estimate, key by key, gains exactly the kernel's
    log prior at the current hyperparameters (summed over latents with per-latent kernels),
    and it is not scaled by N / B under minibatches."""
    if layout == "shared":
        data, params = _binary_case_data()
    else:
        X, Y, s2, params = _gaussian_case_per_latent(np.random.default_rng(13))
        data = svgp.prepare_regression(X, Y, s2, params["inducing_inputs"], kmm_jitter=1e-6,
                                       shared_kernel=False)
    with_prior = dataclasses.replace(data, kernel_prior=True)
    plain = _elbo_draws(data, params, batch_size, 20, seed=4)
    mapped = _elbo_draws(with_prior, params, batch_size, 20, seed=4)
    expected = _rbf_log_prior(params, data.X.shape[1])
    assert np.allclose(mapped - plain, expected, rtol=1e-10, atol=1e-8), (mapped - plain,
                                                                           expected)


def test_kernel_prior_holds_an_irrelevant_input_lengthscale_near_the_prior():
    """On blobs with a third input of pure noise, type-II ML lets that input's lengthscale
    run away (more than 2 prior s.d. above the prior median sqrt(D)); type-II MAP keeps it
    within 2 s.d., and the relevant inputs still classify. The setting is saved and
    loaded with the estimator."""
    X, y = toy_problem(90, 3, seed=2)
    X = np.column_stack([X, np.random.default_rng(5).normal(size=len(y))])
    median = np.sqrt(X.shape[1])
    fits = {}
    for prior in (False, True):
        clf = SoftmaxSVGPClassifier(num_inducing=8, seed=1, kernel_prior=prior,
                                    inference_options={"batch_size": 30, "max_iter": 400,
                                                       "learning_rate": 0.03,
                                                       "num_draws": 32, "tol": None})
        fits[prior] = clf.fit(X, y)
    noise_scale = {prior: float(np.asarray(clf.result_.hypers["kernel_lengthscale"])
                                .reshape(-1)[2]) for prior, clf in fits.items()}
    assert np.log(noise_scale[False] / median) > 2.0, noise_scale
    assert abs(np.log(noise_scale[True] / median)) < 2.0, noise_scale
    assert fits[True].result_.data.kernel_prior and not fits[False].result_.data.kernel_prior
    assert fits[True].result_.info.hyperparameters == "SVI ELBO (type-II MAP)"
    assert fits[False].result_.info.hyperparameters == "SVI ELBO (type-II ML)"
    assert fits[True].score(X, y) > 0.9


def test_kernel_prior_exports_and_round_trips(tmp_path):
    X, y = toy_problem(45, 3, seed=2)
    clf = SoftmaxSVGPClassifier(num_inducing=5, seed=1, kernel_prior=True,
                                inference_options={"batch_size": 15, "max_iter": 50,
                                                   "num_draws": 8, "tol": None}).fit(X, y)
    idata = clf.to_inference_data(X, y)
    assert {"posterior", "log_likelihood", "sample_stats"} <= set(group_names(idata))
    loaded = SoftmaxSVGPClassifier.load(clf.save(tmp_path / "svgp_map"))
    assert loaded.kernel_prior and loaded.result_.data.kernel_prior
    assert np.array_equal(loaded.predict_proba(X), clf.predict_proba(X))


@pytest.mark.parametrize("per_latent", [False, True])
def test_svi_starts_the_kernel_where_asked(per_latent):
    """The kernel sites start at sqrt(D) and variance 1 by default, and at the given values
    everywhere (every input, every latent) with ``initial_lengthscale`` /
    ``initial_variance``: in the model, and in the guide of the joint estimator, which
    reads them too."""
    from numpyro import handlers

    X, y = toy_problem(30, 3)
    L, D = 3, X.shape[1]
    shape = (L, D) if per_latent else (D,)
    for options, (ell, var) in (({}, (np.sqrt(D), 1.0)),
                                ({"initial_lengthscale": 0.693, "initial_variance": 0.25},
                                 (0.693, 0.25))):
        data = svgp.prepare(X, y, 3, num_inducing=4, shared_kernel=not per_latent,
                            shared_inducing=not per_latent, ell_estimator="joint", **options)
        for site_fn in (svgp.guide, svgp.model):
            trace = handlers.trace(handlers.seed(site_fn, 0)).get_trace(data, KERNEL)
            lengthscale = np.asarray(trace["kernel_lengthscale"]["value"])
            variance = np.asarray(trace["kernel_variance"]["value"])
            assert lengthscale.shape == shape
            assert np.allclose(lengthscale, ell, rtol=1e-12)
            assert np.allclose(variance, var, rtol=1e-12)


def test_initial_lengthscale_is_a_prepare_option_that_round_trips(tmp_path):
    """The start (a prepare option, reached through the driver since it left the estimator)
    reaches the fit (one step at learning rate ~0 leaves the lengthscales at it) and is
    saved and loaded with the fit."""
    X, y = toy_problem(45, 3, seed=2)
    res = fit("softmax_svgp", X, y, method="svi", batch_size=15, max_iter=1,
              learning_rate=0.01, num_draws=4, tol=None,
              model_options={"num_inducing": 5, "seed": 1, "initial_lengthscale": 0.5,
                             "initial_variance": 2.0})
    assert res.data.initial_lengthscale == 0.5
    assert np.allclose(np.asarray(res.hypers["kernel_lengthscale"]), 0.5, rtol=1e-3)
    loaded = ppgpc.load(ppgpc.save(res, tmp_path / "svgp_start"))
    assert loaded.data.initial_lengthscale == 0.5 and loaded.data.initial_variance == 2.0
    assert np.array_equal(loaded.predict_proba(X), res.predict_proba(X))


def _softmax_case_per_latent(seed=21, N=30, M=4, C=3, D=2):
    """Softmax link, a kernel and inducing inputs per latent, a full (non-diagonal) W."""
    gen = np.random.default_rng(seed)
    X, y = toy_problem(N, C, seed=seed)
    data = svgp.prepare(X, y, C, num_inducing=M, shared_kernel=False, shared_inducing=False)
    R = (np.tril(0.3 * gen.normal(size=(C, M, M)), -1)
         + gen.uniform(0.3, 0.9, (C, M))[..., None] * np.eye(M))
    params = {
        "kernel_variance": jnp.asarray(gen.uniform(0.5, 2.0, C)),
        "kernel_lengthscale": jnp.asarray(gen.uniform(0.5, 2.0, (C, D))),
        "inducing_inputs": data.inducing_init + 0.1 * gen.normal(size=(C, M, D)),
        "mixing": jnp.asarray(np.eye(C) + 0.4 * gen.normal(size=(C, C))),
        "q_mean": jnp.asarray(gen.normal(size=(C, M))),
        "q_scale_tril": jnp.asarray(R),
    }
    return data, params


def _mixed_log_prior(params, D):
    """``_rbf_log_prior`` with each variance replaced by var_l |W[:, l]|^2, in NumPy."""
    W = np.asarray(params["mixing"])
    amplitudes = np.asarray(params["kernel_variance"]) * np.sum(W * W, axis=0)
    return _rbf_log_prior({**params, "kernel_variance": amplitudes}, D)


@pytest.mark.parametrize("batch_size", [None, 10])
def test_mixed_variance_prior_scores_the_amplitudes_after_mixing(batch_size):
    """With ``variance_prior_on="mixed"`` every ELBO estimate, key by key, gains the kernel
    log prior with each latent's variance replaced by var_l |W[:, l]|^2 (per-latent
    kernels; and with a shared kernel, one amplitude per latent from the one variance)."""
    data, params = _softmax_case_per_latent()
    plain = _elbo_draws(data, params, batch_size, 20, seed=4)
    mixed = dataclasses.replace(data, kernel_prior=True, variance_prior_on="mixed")
    gained = _elbo_draws(mixed, params, batch_size, 20, seed=4) - plain
    assert np.allclose(gained, _mixed_log_prior(params, 2), rtol=1e-10, atol=1e-8)
    shared, shared_params = _binary_case_data()
    shared_params = {**shared_params, "mixing": jnp.asarray([[0.6]])}
    plain = _elbo_draws(shared, shared_params, batch_size, 20, seed=4)
    mixed = dataclasses.replace(shared, kernel_prior=True, variance_prior_on="mixed")
    gained = _elbo_draws(mixed, shared_params, batch_size, 20, seed=4) - plain
    expected = _mixed_log_prior(shared_params, 2)
    assert np.allclose(gained, expected, rtol=1e-10, atol=1e-8)
    assert not np.isclose(expected, _rbf_log_prior(shared_params, 2))


def test_w_and_the_variances_share_one_scale_which_only_the_mixed_prior_sees():
    """(W diag(s), var / s^2) and (W, var) give equal ELBO estimates key by key: the
    likelihood and the KL see one amplitude. The mixed-amplitude prior is equal along that
    ridge too; the prior on the kernel variances is not, so it changes with a scale the
    likelihood cannot see."""
    data, params = _softmax_case_per_latent()
    s = jnp.asarray([0.3, 2.0, 5.0])
    moved = {**params, "mixing": params["mixing"] * s[None, :],
             "kernel_variance": params["kernel_variance"] / s**2}
    for options in ({}, {"kernel_prior": True, "variance_prior_on": "mixed"}):
        case = dataclasses.replace(data, **options)
        np.testing.assert_allclose(_elbo_draws(case, moved, 10, 20, seed=7),
                                   _elbo_draws(case, params, 10, 20, seed=7), rtol=1e-9)
    on_kernel = dataclasses.replace(data, kernel_prior=True)
    shift = (_elbo_draws(on_kernel, moved, 10, 20, seed=7)
             - _elbo_draws(on_kernel, params, 10, 20, seed=7))
    expected = _rbf_log_prior(moved, 2) - _rbf_log_prior(params, 2)
    assert abs(expected) > 1.0
    assert np.allclose(shift, expected, rtol=1e-8)


def test_variance_prior_on_is_a_prepare_option_that_round_trips(tmp_path):
    """The setting (a prepare option, reached through the driver since it left the
    estimator) reaches the fitted data, the fit stays finite and it is saved and loaded with
    the fit; a bad value or "mixed" without the prior raise."""
    X, y = toy_problem(45, 3, seed=2)
    res = fit("softmax_svgp", X, y, method="svi", batch_size=15, max_iter=30, num_draws=8,
              tol=None, model_options={"num_inducing": 5, "seed": 1, "kernel_prior": True,
                                       "variance_prior_on": "mixed"})
    assert res.data.variance_prior_on == "mixed"
    assert np.all(np.isfinite(res.predict_proba(X)))
    loaded = ppgpc.load(ppgpc.save(res, tmp_path / "svgp_mixed"))
    assert loaded.data.variance_prior_on == "mixed"
    assert np.array_equal(loaded.predict_proba(X), res.predict_proba(X))
    with pytest.raises(ValueError, match="unknown variance_prior_on 'latent'"):
        svgp.prepare(X, y, 3, kernel_prior=True, variance_prior_on="latent")
    with pytest.raises(ValueError, match="variance_prior_on='mixed' .* needs kernel_prior"):
        svgp.prepare(X, y, 3, num_inducing=5, variance_prior_on="mixed")


# ------------------------------------------ per-latent kernels and inducing inputs
def _gaussian_case_per_latent(gen, N=30, M=4, L=3, D=2, s2=0.3):
    """Gaussian link, W = I, every latent with its own kernel and inducing inputs."""
    X = gen.normal(size=(N, D))
    Y = np.stack([np.sin(X[:, 0]), X[:, 1], X[:, 0] * X[:, 1]], 1)[:, :L]
    Y = Y + 0.3 * gen.normal(size=(N, L))
    Z = gen.normal(size=(L, M, D))
    R = (np.tril(0.3 * gen.normal(size=(L, M, M)), -1)
         + gen.uniform(0.3, 0.9, (L, M))[..., None] * np.eye(M))
    params = {
        "kernel_variance": jnp.asarray(gen.uniform(0.5, 2.0, L)),
        "kernel_lengthscale": jnp.asarray(gen.uniform(0.5, 2.0, (L, D))),
        "inducing_inputs": jnp.asarray(Z),
        "mixing": jnp.eye(L),
        "q_mean": jnp.asarray(gen.normal(size=(L, M))),
        "q_scale_tril": jnp.asarray(R),
    }
    return X, Y, s2, params


def _gaussian_elbo_per_latent(data, params):
    """sum_ic E_q[log N(y_ic | f_c(x_i), s2)] - sum_c KL, one latent at a time in NumPy:
    E_q[log N(y | f, s2)] = log N(y | mean, s2) - var / (2 s2) for q(f) = N(mean, var)."""
    X, Y, s2 = np.asarray(data.X), np.asarray(data.targets), data.noise_var
    total = 0.0
    for c in range(Y.shape[1]):
        kp = {"variance": params["kernel_variance"][c],
              "lengthscale": params["kernel_lengthscale"][c]}
        mean, var, kl = _numpy_q_marginals_and_kl(
            data.kmm_jitter, kp, params["inducing_inputs"][c], X,
            params["q_mean"][c], params["q_scale_tril"][c])
        ell = np.sum(-0.5 * np.log(2 * np.pi * s2) - ((Y[:, c] - mean) ** 2 + var) / (2 * s2))
        total += ell - kl
    return float(total)


@pytest.mark.parametrize("ell_estimator", svgp.ELL_ESTIMATORS)
@pytest.mark.parametrize("batch_size", [None, 10])
def test_per_latent_elbo_is_unbiased(ell_estimator, batch_size):
    """With a kernel and inducing inputs per latent, full-batch and minibatch estimates
    average to the analytic ELBO computed latent by latent (Gaussian link, where the
    expected log-likelihood is closed-form)."""
    X, Y, s2, params = _gaussian_case_per_latent(np.random.default_rng(11))
    data = svgp.prepare_regression(X, Y, s2, params["inducing_inputs"], kmm_jitter=1e-6,
                                   ell_estimator=ell_estimator, shared_kernel=False)
    assert (data.shared_kernel, data.shared_inducing) == (False, False)
    _assert_mean_close(_elbo_draws(data, params, batch_size, NUM_ESTIMATES),
                       _gaussian_elbo_per_latent(data, params))


def test_per_latent_layout_with_equal_latents_equals_the_shared_one(ell_estimator="marginal"):
    """Per-latent kernels and inducing inputs all set to the shared values give the same
    ELBO estimates, key by key, as the shared layout (the batched algebra is the shared
    one, latent by latent)."""
    X, Y, s2, params = _gaussian_case_per_latent(np.random.default_rng(12))
    L = Y.shape[1]
    Z = params["inducing_inputs"][0]
    shared = {**params, "kernel_variance": params["kernel_variance"][0],
              "kernel_lengthscale": params["kernel_lengthscale"][0], "inducing_inputs": Z}
    per_latent = {**params, "kernel_variance": jnp.full(L, shared["kernel_variance"]),
                  "kernel_lengthscale": jnp.tile(shared["kernel_lengthscale"], (L, 1)),
                  "inducing_inputs": jnp.tile(Z, (L, 1, 1))}
    one = svgp.prepare_regression(X, Y, s2, Z, 1e-6, ell_estimator)
    each = svgp.prepare_regression(X, Y, s2, per_latent["inducing_inputs"], 1e-6,
                                   ell_estimator, shared_kernel=False)
    a = _elbo_draws(one, shared, 10, 50)
    b = _elbo_draws(each, per_latent, 10, 50)
    assert np.allclose(a, b, rtol=1e-10, atol=1e-8)


def test_per_latent_marginal_moments():
    """The per-latent form of ``marginal_moments`` (a (L, M, B)) against the closed form."""
    gen = np.random.default_rng(1)
    L, M, B = 3, 5, 7
    a = gen.normal(size=(L, M, B))
    resid = gen.uniform(0.1, 0.5, (L, B))
    m = gen.normal(size=(L, M))
    R = np.tril(gen.normal(size=(L, M, M)))
    mean, var = svgp.marginal_moments(jnp.asarray(a), jnp.asarray(resid), jnp.asarray(m),
                                      jnp.asarray(R))
    S = np.einsum("lij,lkj->lik", R, R)
    assert np.allclose(mean, np.einsum("lmb,lm->bl", a, m), rtol=1e-12)
    assert np.allclose(var, resid.T + np.einsum("lmb,lmk,lkb->bl", a, S, a), rtol=1e-12)


@pytest.fixture(scope="module")
def fitted_per_latent():
    """SVGPC with a kernel and inducing inputs per latent, on well-separated blobs."""
    X, y = toy_problem(90, 3, seed=2)
    clf = SoftmaxSVGPClassifier(num_inducing=6, seed=1, shared_kernel=False,
                                shared_inducing=False,
                                inference_options={"batch_size": 30, "max_iter": 400,
                                                   "learning_rate": 0.03, "num_draws": 32,
                                                   "tol": None})
    return clf.fit(X, y), X, y


def test_per_latent_fit_predict_export_and_round_trip(fitted_per_latent, tmp_path):
    clf, X, y = fitted_per_latent
    res = clf.result_
    assert res.hypers["kernel_variance"].shape == (1, 1, 3)
    assert res.hypers["kernel_lengthscale"].shape == (1, 1, 3, 2)
    Z = np.asarray(res.hypers["inducing_inputs"])
    assert Z.shape == (1, 1, 3, 6, 2)
    assert not np.allclose(Z[0, 0, 0], Z[0, 0, 1])          # each latent moved its own
    probs = clf.predict_proba(X)
    assert probs.shape == (90, 3) and np.allclose(probs.sum(1), 1.0)
    assert clf.score(X, y) > 0.9
    idata = clf.to_inference_data()
    post, point = idata.posterior, idata.constant_data    # point hyperparameters: no draws
    assert point["inducing_inputs"].dims == ("latent", "inducing", "feature")
    assert point["kernel_lengthscale"].dims == ("latent", "feature")
    assert point["kernel_variance"].dims == ("latent",)
    # u_c = L_mm,c v_c, each latent at its own inducing inputs
    c = 2
    kp = {"variance": res.hypers["kernel_variance"][0, 0, c],
          "lengthscale": res.hypers["kernel_lengthscale"][0, 0, c]}
    Kmm = np.asarray(gram(KERNEL, kp, jnp.asarray(Z[0, 0, c])))
    Lm = np.linalg.cholesky(Kmm + res.data.kmm_jitter * float(kp["variance"]) * np.eye(6))
    u = post["u"].values  # 4 chains of S / 4 draws, in order: back to the fit's one chain
    u = u.reshape((1, -1) + u.shape[2:])
    assert np.allclose(u[0, :, :, c],
                       np.asarray(res.inducing)[0, :, :, c] @ Lm.T, rtol=1e-8, atol=1e-10)
    loaded = SoftmaxSVGPClassifier.load(clf.save(tmp_path / "svgp"))
    assert (loaded.shared_kernel, loaded.shared_inducing) == (False, False)
    assert np.array_equal(loaded.predict_proba(X[:10]), clf.predict_proba(X[:10]))


def test_per_latent_kernels_refuse_the_full_gp_nuts():
    X, y = toy_problem(24, 2, seed=6)
    with pytest.raises(ValueError, match="use shared_kernel=True"):
        SoftmaxSVGPClassifier(inference="nuts", shared_kernel=False).fit(X, y)


# ------------------------------------------- Price's theorem for the variance gradients
@pytest.mark.parametrize("link,C", [("softmax", 3), ("ilr", 4)])
def test_log_likelihood_curvature_is_the_hessian_diagonal(link, C):
    """``log_likelihood_curvature`` against the diagonal of the autodiff Hessian of
    log p(y | W f) in f, with a non-identity W, for both links and every class."""
    gen = np.random.default_rng(2)
    L = svgp.num_latent(C, link)
    data = svgp.prepare(gen.normal(size=(20, 2)), np.arange(20) % C, C, link=link,
                        num_inducing=4)
    W = jnp.asarray(np.eye(L) + 0.4 * gen.normal(size=(L, L)))
    f = jnp.asarray(1.5 * gen.normal(size=(3, 5, L)))
    got = svgp.log_likelihood_curvature(data, f, W)
    log_link = svgp.LOG_LINKS[link]
    for s in range(3):
        for b in range(5):
            for y in range(C):
                hess = jax.hessian(lambda x: log_link(W @ x)[y])(f[s, b])
                np.testing.assert_allclose(got[s, b], np.diag(hess), rtol=1e-10, atol=1e-12)
    assert np.all(np.asarray(got) <= 1e-15)


@pytest.fixture(scope="module")
def softmax_case():
    """C = 3, softmax link, a non-identity W and a q(v) away from the prior."""
    gen = np.random.default_rng(21)
    N, M, D, C = 30, 5, 2, 3
    X = gen.normal(size=(N, D))
    y = np.argmax(X @ gen.normal(size=(D, C)) + 0.5 * gen.normal(size=(N, C)), axis=1)
    data = svgp.prepare(X, y, C, num_inducing=M, seed=1)
    R = np.tril(0.3 * gen.normal(size=(C, M, M)), -1) + np.stack(
        [np.diag(gen.uniform(0.3, 0.9, M)) for _ in range(C)])
    params = {"kernel_variance": jnp.asarray(1.7), "kernel_lengthscale": jnp.asarray([0.9, 1.4]),
              "inducing_inputs": data.inducing_init + 0.1,
              "mixing": jnp.asarray(np.eye(C) + 0.3 * gen.normal(size=(C, C))),
              "q_mean": jnp.asarray(gen.normal(size=(C, M))), "q_scale_tril": jnp.asarray(R)}
    return data, params


def _gradient_draws(data, params, batch_size, num, seed=0):
    """``num`` independent estimates of the ELBO's gradient in every parameter."""
    elbo = TraceMeanField_ELBO()

    def one(key):
        return jax.grad(lambda p: -elbo.loss(key, p, svgp.model, svgp.guide, data, KERNEL,
                                             batch_size))(params)

    keys = jax.random.split(jax.random.PRNGKey(seed), num)
    return jax.tree_util.tree_map(np.asarray, jax.jit(jax.vmap(one))(keys))


@pytest.mark.parametrize("batch_size", [None, 10])
def test_price_gradients_are_unbiased_and_less_noisy_for_the_variances(softmax_case,
                                                                      batch_size):
    """Both gradient estimators are unbiased for the same ELBO gradient, so their means over
    2000 independent draws agree, entry by entry, within 4.5 standard errors of the
    difference. Price's estimate of the q_scale_tril gradient (which reaches the loss
    only through the marginal variances) has a smaller total variance than the
    reparameterisation one (ratio below 0.8; the sample variances have relative errors of
    a few per cent)."""
    data, params = softmax_case
    marginal = _gradient_draws(_with_estimator(data, "marginal"), params, batch_size,
                               NUM_ESTIMATES)
    price = _gradient_draws(_with_estimator(data, "price"), params, batch_size,
                            NUM_ESTIMATES, seed=1)
    for name in params:
        a, b = marginal[name], price[name]
        se = np.sqrt(a.var(0, ddof=1) / len(a) + b.var(0, ddof=1) / len(b))
        gap = np.abs(a.mean(0) - b.mean(0))
        assert np.all(gap <= 4.5 * se + 1e-9), (name, np.max(gap / (se + 1e-12)))
    tril = np.tril(np.ones(params["q_scale_tril"].shape[-2:], bool))
    var_price = price["q_scale_tril"][..., tril].var(0).sum()
    var_marginal = marginal["q_scale_tril"][..., tril].var(0).sum()
    assert var_price < 0.8 * var_marginal, (var_price, var_marginal)


def test_price_estimator_needs_no_change_to_the_elbo_value(softmax_case):
    """Same keys, same draws: the ELBO estimates of "price" and "marginal" are equal (the
    Price term has value 0)."""
    data, params = softmax_case
    a = _elbo_draws(_with_estimator(data, "marginal"), params, 10, 50)
    b = _elbo_draws(_with_estimator(data, "price"), params, 10, 50)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-10)


# ------------------------------------------------------------- the validation monitor
@pytest.mark.parametrize("case", ["softmax_case", "binary_case"])
def test_validation_log_predictive_matches_the_fitted_predictive(case, request):
    """``validation_log_predictive`` (draws from q's marginal at each point) estimates the
    same p(y_i | x_i) as the classifier's predictive (joint draws of v, then the SVGP
    conditional): the per-draw probabilities of one point have the same law under both, so
    their means agree within 4.5 standard errors of the difference, sd * sqrt(2 / S), with
    sd the per-draw spread of the reference draws. Softmax link (C = 3, non-identity W) and
    inverse-ILR link (C = 2)."""
    data, params = request.getfixturevalue(case)
    S = 40000
    gen = np.random.default_rng(5)
    Xv = jnp.asarray(gen.normal(size=(12, 2)))
    yv = jnp.asarray(gen.integers(0, data.num_classes, 12))
    log_p = svgp.validation_log_predictive(jax.random.PRNGKey(0), params, data, KERNEL, Xv, yv,
                                           num_draws=S)
    assert log_p.shape == (12,)
    k_v, k_f = jax.random.split(jax.random.PRNGKey(1))
    m, R = params["q_mean"], params["q_scale_tril"]
    v = m[None] + jnp.einsum("lij,slj->sli", R, jax.random.normal(k_v, (S,) + m.shape))
    hypers = {k: params[k] for k in ("kernel_variance", "kernel_lengthscale",
                                     "inducing_inputs", "mixing")}
    eps = jax.random.normal(k_f, (S, 12, data.num_latent))
    mixed = svgp.inducing_latent(data, KERNEL, hypers, jnp.swapaxes(v, -1, -2), Xv, eps)
    log_link = svgp.LOG_LINKS[data.link]
    p_draws = np.exp(np.asarray(log_link(mixed)))[:, np.arange(12), np.asarray(yv)]  # (S, n)
    reference = p_draws.mean(0)
    se = p_draws.std(0, ddof=1) * np.sqrt(2.0 / S)
    assert np.all(np.abs(np.exp(np.asarray(log_p)) - reference) < 4.5 * se + 1e-12), (
        np.exp(np.asarray(log_p)), reference, se)


def test_validation_log_predictive_chunks_equal_one_pass(softmax_case, monkeypatch):
    """Scoring in chunks (the last one padded) gives the values of a single chunk: the
    padding rows are dropped, and each chunk's draws are its own."""
    data, params = softmax_case
    gen = np.random.default_rng(6)
    Xv, yv = gen.normal(size=(10, 2)), gen.integers(0, 3, 10)
    key = jax.random.PRNGKey(2)
    whole = np.asarray(svgp.validation_log_predictive(key, params, data, KERNEL, Xv, yv, 20000))
    monkeypatch.setattr("ppgpc.models.svgp.scoring.VALIDATION_CHUNK", 4)
    chunked = np.asarray(svgp.validation_log_predictive(key, params, data, KERNEL, Xv, yv, 20000))
    assert chunked.shape == (10,)
    # different draws per chunk: agreement to Monte Carlo error (relative s.e. of a mean of
    # 20000 probabilities of spread < their mean is < 1%; 5% is > 5 s.e.)
    assert np.allclose(np.exp(chunked), np.exp(whole), rtol=0.05)
    assert not np.array_equal(chunked, whole)


def _svi_with_validation(X, y, Xv, yv, *, max_iter, **options):
    return fit("softmax_svgp", X, y, method="svi", num_classes=3, kernel=KERNEL,
               model_options={"num_inducing": 8, "seed": 1}, seed=3, max_iter=max_iter,
               batch_size=30, learning_rate=0.05, schedule="constant", tol=None,
               window=50, num_draws=16, progress_bar=False, validation_data=(Xv, yv),
               **options)


@pytest.fixture(scope="module")
def adversarial_validation():
    """Blobs, and validation points whose labels are shifted by one class: the better the
    fit, the worse their NLL, so the best iterate is an early one."""
    X, y = toy_problem(90, 3, seed=2)
    Xv, yv = toy_problem(30, 3, seed=7)
    return X, y, Xv, (yv + 1) % 3


def test_restore_best_returns_the_iterate_of_lowest_validation_nll(adversarial_validation):
    """With a constant learning rate, a run stopped at ``best_step`` follows the same path
    (same keys), so the restored result equals it bit for bit: the same hyperparameters
    and the same draws of q(v)."""
    X, y, Xv, yv = adversarial_validation
    full = _svi_with_validation(X, y, Xv, yv, max_iter=400)
    info = full.info
    trace = np.asarray(info.validation.nll)
    assert info.validation.steps == tuple(range(50, 401, 50))
    assert info.validation.best_step == info.validation.steps[int(np.argmin(trace))]
    assert info.validation.best_nll == trace.min()
    assert info.validation.restored_best and info.validation.best_step < 400
    assert trace[-1] > trace.min() + 0.1
    short = _svi_with_validation(X, y, Xv, yv, max_iter=info.validation.best_step)
    for name in full.hypers:
        np.testing.assert_array_equal(full.hypers[name], short.hypers[name])
    np.testing.assert_array_equal(full.inducing, short.inducing)
    assert full.sample_stats["elbo"].shape == (1, 400)  # the trace covers the whole run
    last = _svi_with_validation(X, y, Xv, yv, max_iter=400, restore_best=False)
    assert not last.info.validation.restored_best
    assert not np.array_equal(last.inducing, full.inducing)
    assert last.info.validation.nll == info.validation.nll


def test_the_monitor_only_observes(adversarial_validation):
    """A monitored run that keeps its last iterate is the unmonitored run: scoring the
    held-out points uses a key of its own and leaves the optimiser's state and keys alone,
    so adding ``validation_data`` changes neither the hyperparameters nor the draws of q(v)."""
    X, y, Xv, yv = adversarial_validation
    monitored = _svi_with_validation(X, y, Xv, yv, max_iter=200, restore_best=False)
    plain = fit("softmax_svgp", X, y, method="svi", num_classes=3, kernel=KERNEL,
                model_options={"num_inducing": 8, "seed": 1}, seed=3, max_iter=200,
                batch_size=30, learning_rate=0.05, schedule="constant", tol=None,
                window=50, num_draws=16, progress_bar=False)
    assert plain.info.validation is None and plain.info.svi.stopped_on == "max_iter"
    for name in plain.hypers:
        np.testing.assert_array_equal(monitored.hypers[name], plain.hypers[name])
    np.testing.assert_array_equal(monitored.inducing, plain.inducing)
    np.testing.assert_array_equal(monitored.sample_stats["elbo"], plain.sample_stats["elbo"])


def test_the_monitor_key_is_none_of_the_fit_keys():
    """The held-out draws must not reuse the initialisation's or q(v)'s normals: the
    monitor's key differs from both halves of the run key's split (``fold_in(key, 1)``
    equals ``split(key)[1]`` under JAX's partitionable threefry)."""
    from ppgpc.infer import svi as svi_module
    for seed in range(5):
        key = jax.random.PRNGKey(seed)
        k_val = np.asarray(jax.random.key_data(jax.random.fold_in(
            key, svi_module._VALIDATION_STREAM)))
        for k in jax.random.split(key):
            assert not np.any(np.asarray(jax.random.key_data(k)) == k_val)


def test_validation_patience_stops_the_run(adversarial_validation):
    X, y, Xv, yv = adversarial_validation
    result = _svi_with_validation(X, y, Xv, yv, max_iter=2000, validation_patience=2)
    info = result.info
    assert info.svi.stopped_on == "validation"
    assert info.svi.steps == info.validation.best_step + 2 * 50 < 2000
    assert result.sample_stats["elbo"].shape == (1, info.svi.steps)


def test_bad_validation_data_raises_clear_errors(adversarial_validation):
    X, y, Xv, yv = adversarial_validation
    cases = [((Xv[:, :1], yv), r"shape \(n, 2\)"),
             ((np.where(np.arange(60).reshape(30, 2) == 3, np.nan, Xv), yv), "NaN"),
             ((Xv, yv[:-1]), r"shape \(30,\)"),
             ((Xv, yv + 3), r"0\.\.2"),
             ((Xv, yv.astype(float)), "integer"),
             (Xv, "pair")]
    for validation_data, message in cases:
        with pytest.raises(ValueError, match=message):
            fit("softmax_svgp", X, y, method="svi", num_classes=3, kernel=KERNEL,
                model_options={"num_inducing": 8}, max_iter=10, progress_bar=False,
                validation_data=validation_data)
    spec = dataclasses.replace(svgp.SPEC, svi=svgp.SPEC.svi._replace(
        validation_log_predictive=None))
    with pytest.raises(ValueError, match="no held-out predictive"):
        fit(spec, X, y, method="svi", num_classes=3, kernel=KERNEL,
            model_options={"num_inducing": 8}, max_iter=10, progress_bar=False,
            validation_data=(Xv, yv))


def test_estimator_validation_fraction_holds_out_a_stratified_share():
    X, y = toy_problem(90, 3, seed=2)
    clf = SoftmaxSVGPClassifier(num_inducing=8, seed=1, inference_options={
        "batch_size": 30, "max_iter": 200, "validation_fraction": 0.2, "num_draws": 16,
        "tol": None})
    clf.fit(X, y)
    info = clf.result_.info
    assert info.validation.size == 18
    assert clf.result_.data.X.shape[0] == 72
    assert np.bincount(np.asarray(clf.result_.data.y)).tolist() == [24, 24, 24]
    assert len(info.validation.nll) == 2 and info.validation.best_nll < np.log(3)
    for bad in (0.0, 0.6, True, "0.1"):
        with pytest.raises(ValueError, match="validation_fraction"):
            SoftmaxSVGPClassifier(num_inducing=8, inference_options={
                "validation_fraction": bad}).fit(X, y)
    with pytest.raises(ValueError, match="not both"):
        SoftmaxSVGPClassifier(num_inducing=8, inference_options={
            "validation_fraction": 0.2, "validation_data": (X, y)}).fit(X, y)


def test_default_steps_depend_on_whether_a_step_sees_every_point():
    """max_iter / learning_rate left at None: full-batch SVI takes at most FULL_BATCH_STEPS
    (2000 at 0.1), minibatch SVI at most MINIBATCH_STEPS (5000 at 0.01), each stopping
    earlier when its ELBO settles (``tol=None``: every step); given values win."""
    X, y = toy_problem(30, 3, seed=9)
    full = SoftmaxSVGPClassifier(num_inducing=5, inference_options={"tol": None}).fit(X, y)
    assert full.result_.info.svi.steps == svgp_schedule.FULL_BATCH_STEPS[0] == 2000
    assert full.score(X, y) > 0.9
    settled = SoftmaxSVGPClassifier(num_inducing=5).fit(X, y)
    assert settled.result_.info.svi.stopped_on == "elbo"
    assert settled.result_.info.svi.steps < 2000 and settled.score(X, y) > 0.9
    mini = SoftmaxSVGPClassifier(num_inducing=5, inference_options={"batch_size": 10,
                                                                     "tol": None}).fit(X, y)
    assert mini.result_.info.svi.steps == svgp_schedule.MINIBATCH_STEPS[0] == 5000
    given = SoftmaxSVGPClassifier(num_inducing=5, inference_options={
        "max_iter": 100, "learning_rate": 0.05}).fit(X, y)
    assert given.result_.info.svi.steps == 100


def test_default_batch_is_every_point_up_to_full_batch_points():
    """Without a batch_size, a step sees every point up to FULL_BATCH_POINTS (640) training
    points, with the full-batch schedule, and minibatches of 256 above, with theirs: the
    model's schedule, which the driver fills in (``schedule_options``) for the estimator and
    for ``ppgpc.infer.fit`` alike; a given batch picks the schedule by whether it covers
    every point, and given steps win. A model without a schedule gets the driver's."""
    import dataclasses

    from ppgpc.infer.svi import SVIOptions, schedule_options
    from ppgpc.models import get_spec

    spec = get_spec("softmax_svgp")
    limit = svgp_schedule.FULL_BATCH_POINTS
    assert limit == 640

    def schedule(spec, n, **given):
        out = schedule_options(spec, SVIOptions(**given), n)
        return out.batch_size, out.max_iter, out.learning_rate

    assert schedule(spec, limit) == (limit, 2000, 0.1)
    assert schedule(spec, limit + 1) == (256, 5000, 0.01)
    assert schedule(spec, 30, batch_size=30) == (30, 2000, 0.1)
    assert schedule(spec, 30, batch_size=10) == (10, 5000, 0.01)
    assert schedule(spec, 30, max_iter=7, learning_rate=0.5) == (30, 7, 0.5)
    plain = dataclasses.replace(spec, svi=spec.svi._replace(default_options=None))
    assert schedule(plain, limit) == (256, 5000, 0.01)
    with pytest.raises(ValueError, match="exceeds the number of training points"):
        schedule(spec, 30, batch_size=31)


def test_identity_mixing_holds_w_at_the_identity(tmp_path):
    """``learn_mixing=False``: W is no parameter of the model, the fit reports W = I and
    predicts softmax of the latent draws unmixed; a non-boolean value is refused."""
    import numpyro

    X, y = toy_problem(40, 3, seed=3)
    for learn, has_param in [(True, True), (False, False)]:
        data = svgp.prepare(X, y, 3, num_inducing=10, learn_mixing=learn)
        trace = numpyro.handlers.trace(numpyro.handlers.seed(svgp.model, 0)).get_trace(
            data, KERNEL)
        assert ("mixing" in trace) == has_param
    res = fit("softmax_svgp", X, y, method="svi", max_iter=300, num_draws=16, seed=1,
              progress_bar=False, model_options={"num_inducing": 10, "learn_mixing": False})
    np.testing.assert_array_equal(np.asarray(res.hypers["mixing"][0, 0]), np.eye(3))
    probs = res.predict_proba(X)
    assert probs.shape == (40, 3) and np.mean(probs.argmax(1) == y) > 0.9
    ppgpc.save(res, tmp_path / "fit")                   # the option survives a save and load
    again = ppgpc.load(tmp_path / "fit")
    assert again.data.learn_mixing is False
    np.testing.assert_allclose(again.predict_proba(X), probs, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="learn_mixing must be True or False"):
        svgp.prepare(X, y, 3, learn_mixing="no")
