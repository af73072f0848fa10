"""The inducing-point Gibbs sampler of the logistic-softmax GP (models/
logistic_softmax_gibbs_sparse.py, docs/records/gibbs.md "Inducing points"): the v block against its
Gaussian conditional, the level move against quadrature, the whole sweep against NUTS on
the same inducing-point posterior, its options' errors, and the fitted result."""

import dataclasses

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import MCMC, NUTS

import ppgpc
from arviz_versions import convert
from conftest import SMALL, assert_level_draws_match, compare_samplers, grid_moments, toy_problem
from ppgpc import LogisticSoftmaxGPClassifier
from ppgpc.gp.kernels import RBF
from ppgpc.infer import fit, to_inference_data
from ppgpc.models import logistic_softmax as lsm
from ppgpc.models.logistic_softmax import gibbs_inducing as lsm_gibbs_inducing

HYPERS = {"kernel_variance": 4.0, "kernel_lengthscale": np.array([1.3, 1.0])}


def test_v_block_matches_the_dense_gaussian_conditional(rng):
    """v^c | omega^c, n^c ~ N(P^-1 A^T kappa, P^-1), P = I + A^T diag(omega) A, computed
    here with dense inverses; z-scores of the mean and covariance of 40 000 draws."""
    A = rng.normal(size=(6, 3))
    omega = np.array([[0.0, 0.3], [0.5, 0.0], [1.2, 0.1], [0.0, 0.0], [0.2, 2.0], [0.7, 0.4]])
    kappa = np.array([[0.0, -0.5], [0.5, 0.0], [-1.0, 0.5], [0.0, 0.0], [0.5, -1.5], [-0.5, 0.5]])
    S = 40_000
    keys = jax.random.split(jax.random.PRNGKey(4), S)
    draws = np.asarray(jax.vmap(lambda k: lsm_gibbs_inducing.v_block(k, A, omega, kappa))(keys))
    assert draws.shape == (S, 3, 2)
    for c in range(2):
        Sigma = np.linalg.inv(np.eye(3) + A.T @ np.diag(omega[:, c]) @ A)
        mean = Sigma @ A.T @ kappa[:, c]
        x = draws[:, :, c]
        z = (x.mean(0) - mean) / np.sqrt(np.diag(Sigma) / S)
        assert np.max(np.abs(z)) < 4.5, z
        emp = np.cov(x.T)
        se = np.sqrt((Sigma**2 + np.outer(np.diag(Sigma), np.diag(Sigma))) / S)
        assert np.max(np.abs(emp - Sigma) / se) < 4.5
        # the data move the mean off the prior's 0 (a block ignoring them would fail)
        assert np.max(np.abs(mean) / np.sqrt(np.diag(Sigma) / S)) > 20


def test_inducing_level_block_samples_the_level_posterior_by_quadrature(rng):
    """The level move of v leaves p(m | d, y) propto N(m | 0, I / C) prod_i p(y_i | A (d + m))
    invariant: 4000 independent chains from prior draws of m (M = 2), 40 slice steps each,
    against the posterior mean and variance of each m_j by quadrature on a 2-D grid
    (z-scores of independent draws); the contrasts v - mean_c v stay as they were."""
    A = np.array([[1.5, 0.3], [-0.4, 1.2], [0.8, -0.9]])                # (N = 3, M = 2)
    d = np.array([[1.0, -0.5, -0.5], [-0.6, 0.9, -0.3]])               # (M, C) contrasts
    onehot = jnp.asarray(np.eye(3)[[0, 1, 1]])
    C, S = 3, 4000
    g = np.linspace(-8, 8, 801) * np.sqrt(1.0 / C)
    m1, m2 = np.meshgrid(g, g, indexing="ij")
    log_post = -0.5 * C * (m1**2 + m2**2)
    for i in range(3):
        f_i = (A[i] @ d)[None, None, :] + (A[i, 0] * m1 + A[i, 1] * m2)[..., None]
        log_post = log_post + np.asarray(lsm.log_link(jnp.asarray(f_i)))[
            ..., int(np.argmax(onehot[i]))]
    mean, var = grid_moments(log_post, m1, m2)

    def chain(key):
        k0, k1 = jax.random.split(key)
        start = jnp.asarray(d) + jax.random.normal(k0, (2, 1)) / np.sqrt(C)
        return lsm_gibbs_inducing.inducing_level_block(k1, start, jnp.asarray(A), onehot, num_steps=40)

    v = np.asarray(jax.vmap(chain)(jax.random.split(jax.random.PRNGKey(6), S)))
    assert_level_draws_match(v, d, mean, var)


# ------------------------------------------------------------ the whole sweep
N_POINTS, NUM_INDUCING = (14, 5) if SMALL else (20, 6)


def _problem():
    """Three separated blobs (labels 0, 1, 2, 0, ...) and inducing inputs beside the first
    points, so every class has some: at the full size the stride N // M = 3 chose only
    class-0 points, which left classes 1 and 2 at the prior (predictive probabilities
    within 0.01 of 1/3, where the training accuracy was decided by Monte Carlo noise)."""
    X, y = toy_problem(N_POINTS, 3, seed=3)
    Z = X[:NUM_INDUCING] + 0.1
    return X, y, {**HYPERS, "inducing_inputs": Z}


@pytest.fixture(scope="module")
def inducing_fit():
    X, y, hypers = _problem()
    result = fit("logistic_softmax", X, y, method="gibbs", num_inducing=NUM_INDUCING,
                 hyperparameters=hypers, num_warmup=200,
                 num_samples=1000 if SMALL else 2000, max_samples=1000 if SMALL else 2000,
                 num_chains=2, progress_bar=False,
                 seed=2)
    return result, X, y, hypers


def _nuts_on_the_inducing_model(X, y, hypers, num_samples: int):
    """NUTS on the non-augmented inducing-point model: v^c ~ N(0, I_M), f^c = A v^c,
    y_i ~ Categorical(log_link(f_i)) (A from the same ``inducing_matrix``)."""
    data = lsm.prepare(X, y, 3)
    A = lsm_gibbs_inducing.inducing_matrix(RBF(ard=True), {k: jnp.asarray(v) for k, v in hypers.items()},
                            data.X)

    def model():
        v = numpyro.sample("v", dist.Normal(0.0, 1.0).expand((NUM_INDUCING, 3)).to_event(2))
        numpyro.sample("y", dist.Categorical(logits=lsm.log_link(A @ v)), obs=data.y)

    mcmc = MCMC(NUTS(model), num_warmup=300, num_samples=num_samples, num_chains=2,
                chain_method="vectorized", progress_bar=False)
    mcmc.run(jax.random.PRNGKey(1))
    return np.asarray(mcmc.get_samples(group_by_chain=True)["v"])


@pytest.mark.slow
def test_inducing_gibbs_matches_nuts_on_the_inducing_posterior(inducing_fit):
    """The inducing-point sweep and NUTS on the non-augmented inducing-point model target
    the same posterior of v: posterior means and standard deviations agree within 4.5
    combined Monte Carlo standard errors, ArviZ's ``mcse_mean`` and ``mcse_sd`` of both
    (``conftest.compare_samplers``)."""
    gibbs, X, y, hypers = inducing_fit
    nuts = _nuts_on_the_inducing_model(X, y, hypers, 600 if SMALL else 1000)
    cmp = compare_samplers(np.asarray(gibbs.inducing), nuts)
    assert cmp.ess_a.min() > 100 and cmp.ess_b.min() > 100, (cmp.ess_a.min(), cmp.ess_b.min())
    worst_mean, worst_sd = float(np.max(np.abs(cmp.z_mean))), float(np.max(np.abs(cmp.z_sd)))
    assert worst_mean < 4.5, f"means differ: max |z_mean| = {worst_mean:.2f}"
    assert worst_sd < 4.5, f"standard deviations differ: max |z_sd| = {worst_sd:.2f}"
    # the data move the posterior: some means are far from the prior's 0
    se = cmp.sd_b / np.sqrt(cmp.ess_b)
    assert np.max(np.abs(cmp.mean_b) / se) > 20


def test_inducing_gibbs_result_holds_v_and_predicts(inducing_fit, tmp_path):
    """The fit is held as draws of v (predictive kind "inducing", no latent at the training
    inputs), with the inducing inputs among the point hyperparameters; it predicts (the
    mean of its predictive draws, and on these separated classes the label of every
    training point beyond Monte Carlo error), exports, saves and loads (predicting the
    same), and its chains agree (R-hat of v)."""
    result, X, y, hypers = inducing_fit
    assert result.predictive_kind == "inducing" and result.point_hypers
    assert result.latent is None
    assert result.inducing.shape == (2, result.num_draws, NUM_INDUCING, 3)
    np.testing.assert_allclose(np.asarray(result.hypers["inducing_inputs"])[0, 0],
                               hypers["inducing_inputs"])
    assert result.info.num_inducing == NUM_INDUCING
    assert result.info.hyperparameters == "given"
    probs = result.predict_proba(X)
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-12)
    # the prediction is the mean of the predictive draws, one per draw of v
    draws = np.asarray(result.predict_proba_draws(X))                 # (chain, draw, N, C)
    assert draws.shape == (2, result.num_draws, len(y), 3)
    np.testing.assert_allclose(probs, draws.mean((0, 1)), rtol=0, atol=1e-12)
    # every training point's label beats its strongest rival by more than 4.5 Monte Carlo
    # standard errors of the difference (ArviZ's mcse of the autocorrelated draws), so the
    # training accuracy of 1 is a property of the posterior, not of the draws' noise
    rows = np.arange(len(y))
    rival = np.where(np.eye(3, dtype=bool)[y], -np.inf, probs).argmax(1)
    gap = draws[..., rows, y] - draws[..., rows, rival]               # (chain, draw, N)
    mcse = np.asarray(az.mcse(convert({"gap": gap}))["gap"])
    z = gap.mean((0, 1)) / mcse
    assert np.all(z > 4.5), f"label minus rival in Monte Carlo s.e.: min {z.min():.2f}"
    idata = to_inference_data(result)
    assert "mean_count" in idata.sample_stats
    rhat = az.rhat(convert({"v": np.asarray(result.inducing)}))
    assert float(rhat["v"].max()) < 1.05
    loaded = ppgpc.load(ppgpc.save(result, tmp_path / "fit"))
    assert loaded.predictive_kind == "inducing"
    np.testing.assert_allclose(loaded.predict_proba(X[:4]), probs[:4], rtol=1e-10)


# ------------------------------------------------------------ the ways to ask, errors
@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
def test_bad_num_inducing_is_refused(bad):
    X, y = toy_problem(12, 3)
    with pytest.raises(ValueError, match="num_inducing"):
        fit("logistic_softmax", X, y, method="gibbs", num_inducing=bad, progress_bar=False)
    with pytest.raises(ValueError, match="num_inducing"):
        LogisticSoftmaxGPClassifier(num_inducing=bad, progress=False).fit(X, y)


def test_inducing_gibbs_settings_are_checked():
    X, y = toy_problem(12, 3)
    with pytest.raises(ValueError, match="exceeds the number of training points"):
        fit("logistic_softmax", X, y, method="gibbs", num_inducing=13, hyperparameters=HYPERS,
            progress_bar=False)
    with pytest.raises(ValueError, match="holds the kernel hyperparameters"):
        fit("logistic_softmax", X, y, method="gibbs", num_inducing=4,
            hyperparameters="sample", progress_bar=False)
    with pytest.raises(ValueError, match="holds the kernel hyperparameters"):
        LogisticSoftmaxGPClassifier(num_inducing=4, inference="gibbs", progress=False,
                                    inference_options={"hyperparameters": "sample"}).fit(X, y)
    with pytest.raises(ValueError, match="inducing_inputs must be a finite"):
        fit("logistic_softmax", X, y, method="gibbs", num_inducing=4,
            hyperparameters={**HYPERS, "inducing_inputs": np.zeros((3, 2))},
            progress_bar=False)
    with pytest.raises(ValueError, match="applies to inference='cavi' or 'gibbs'"):
        LogisticSoftmaxGPClassifier(num_inducing=4, inference="nuts", progress=False).fit(X, y)
    no_sampler = dataclasses.replace(
        lsm.SPEC, gibbs=lsm.SPEC.gibbs._replace(inducing_kernel=None))
    with pytest.raises(ValueError, match="has no inducing-point Gibbs sampler"):
        fit(no_sampler, X, y, method="gibbs", num_inducing=4, hyperparameters=HYPERS,
            progress_bar=False)


def test_estimator_default_inducing_gibbs_needs_no_exact_size():
    """``LogisticSoftmaxGPClassifier(num_inducing=M, inference="gibbs")`` with the defaults:
    the stochastic sparse CAVI's point (hyperparameters and learnt inducing inputs), then
    the sampler;
    N above ``max_exact_points`` is fine (nothing N x N), and it predicts."""
    X, y = toy_problem(40, 3, seed=1)
    labels = np.array(["a", "b", "c"])[y]
    clf = LogisticSoftmaxGPClassifier(
        num_inducing=6, inference="gibbs", max_exact_points=20, progress=False, seed=3,
        inference_options={"num_warmup": 50, "num_samples": 100, "max_samples": 100,
                           "num_chains": 1})
    clf.fit(X, labels)
    res = clf.result_
    assert res.predictive_kind == "inducing" and res.inducing.shape == (1, 100, 6, 3)
    assert res.info.hyperparameters.startswith("stochastic sparse CAVI ELBO")
    assert np.asarray(res.hypers["inducing_inputs"]).shape == (1, 1, 6, 2)
    assert clf.score(X, labels) > 0.9
    probs = clf.predict_proba(X[:5])
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-12)
