"""Logistic-softmax GP (MATH.md section 3): link, Gibbs conditionals, Gibbs against NUTS on
the plain model, CAVI, ArviZ export and the estimator."""

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import SMALL, toy_problem
from ppgpc import LogisticSoftmaxGPClassifier
from ppgpc.infer import fit, supported_methods
from ppgpc.kernels import RBF, gram
from ppgpc.models import logistic_softmax as lsm
from ppgpc.polyagamma import polyagamma_mean

HYPERS = {"kernel_variance": 4.0, "kernel_lengthscale": np.array([1.3, 1.0])}


def _jax_hypers():
    return {k: jnp.asarray(v) for k, v in HYPERS.items()}


def test_log_link_is_normalised_stable_and_matches_the_definition():
    f = jnp.array([[0.3, -1.2, 2.0], [1e3, -1e3, 0.0], [-800.0, -900.0, -850.0]])
    logp = lsm.log_link(f)
    assert bool(jnp.all(jnp.isfinite(logp)))
    np.testing.assert_allclose(jnp.exp(logp).sum(-1), 1.0, atol=1e-12)
    sig = 1 / (1 + np.exp(-np.asarray(f[0])))
    np.testing.assert_allclose(np.exp(logp[0]), sig / sig.sum(), rtol=1e-12)
    # all logits very negative: sigma(f) ~ e^f, the link tends to softmax(f)
    np.testing.assert_allclose(jnp.exp(logp[2]), jax.nn.softmax(f[2]), rtol=1e-9)


def test_supported_methods():
    assert {"gibbs", "cavi", "nuts"} <= set(supported_methods("logistic_softmax"))
    assert "gibbs" not in supported_methods("ilr_gp")


def test_f_block_matches_the_dense_gaussian_conditional(rng):
    """f^c | omega^c, n^c ~ N(Sigma kappa, Sigma), Sigma = (K^-1 + diag omega)^-1, computed
    here with dense inverses; z-scores of the sample mean and covariance against it."""
    X = rng.normal(size=(6, 2))
    K = np.asarray(gram(RBF(), {"variance": 2.0, "lengthscale": jnp.asarray([1.0, 1.0])},
                        jnp.asarray(X)))
    K = K + 1e-6 * np.eye(6)
    chol = np.linalg.cholesky(K)
    omega = np.array([[0.0, 0.3], [0.5, 0.0], [1.2, 0.1], [0.0, 0.0], [0.2, 2.0], [0.7, 0.4]])
    kappa = np.array([[0.0, -0.5], [0.5, 0.0], [-1.0, 0.5], [0.0, 0.0], [0.5, -1.5], [-0.5, 0.5]])
    S = 40_000
    keys = jax.random.split(jax.random.PRNGKey(3), S)
    draws = np.asarray(jax.vmap(lambda k: lsm.f_block(k, K, chol, omega, kappa))(keys))
    for c in range(2):
        Sigma = np.linalg.inv(np.linalg.inv(K) + np.diag(omega[:, c]))
        mean = Sigma @ kappa[:, c]
        x = draws[:, :, c]
        z = (x.mean(0) - mean) / np.sqrt(np.diag(Sigma) / S)
        assert np.max(np.abs(z)) < 4.5
        emp = np.cov(x.T)
        se = np.sqrt((Sigma**2 + np.outer(np.diag(Sigma), np.diag(Sigma))) / S)
        assert np.max(np.abs(emp - Sigma) / se) < 4.5


@pytest.mark.parametrize("collapse", [False, True])
def test_lambda_n_omega_blocks_have_the_right_conditional_means(collapse):
    """One sweep from a fixed state, many keys: E[lambda | n] = (1 + sum n) / C (or
    1 / sum_c sigma(f_c) collapsed), E[n | f] = E[lambda] sigma(-f), and
    E[omega - E(omega | n, f)] = 0 with the closed-form Polya-Gamma mean."""
    X, y = toy_problem(4, 3)
    data = lsm.prepare(X, y, 3)
    init, step = lsm.gibbs_kernel(data, RBF(), _jax_hypers(), collapse_lambda=collapse)
    state = init(jax.random.PRNGKey(0))._replace(
        f=jnp.array([[1.0, -0.5, 0.0], [-2.0, 0.5, 3.0], [0.0, 0.0, 0.0], [2.5, -3.0, 1.0]]),
        n=jnp.array([[0.0, 1, 0], [2, 0, 1], [0, 0, 0], [5, 1, 0]]))
    S = 5000
    new, _ = jax.vmap(lambda k: step(k, state))(jax.random.split(jax.random.PRNGKey(1), S))
    f = np.asarray(state.f)
    sig = 1 / (1 + np.exp(-f))
    e_lam = 1 / sig.sum(1) if collapse else (1 + np.asarray(state.n).sum(1)) / 3
    lam = np.asarray(new.lam)
    assert np.max(np.abs(lam.mean(0) - e_lam) / (lam.std(0) / np.sqrt(S))) < 4.5
    n = np.asarray(new.n)
    assert np.allclose(n, np.round(n)) and n.min() >= 0
    e_n = e_lam[:, None] * (1 - sig)
    assert np.max(np.abs(n.mean(0) - e_n) / (n.std(0) / np.sqrt(S) + 1e-12)) < 4.5
    resid = np.asarray(new.omega) - np.asarray(polyagamma_mean(data.onehot + n, f))
    assert np.max(np.abs(resid.mean(0)) / (resid.std(0) / np.sqrt(S) + 1e-12)) < 4.5
    assert np.all(np.asarray(new.omega)[(np.asarray(data.onehot) + n) == 0] == 0)


@pytest.fixture(scope="module")
def gibbs_fit():
    X, y = toy_problem(14 if SMALL else 20, 3, seed=3)
    samples = 1000 if SMALL else 2000
    result = fit("logistic_softmax", X, y, method="gibbs", hyperparameters=HYPERS,
                 num_warmup=200, num_samples=samples, num_chains=2, progress_bar=False, seed=2)
    return result, X, y


@pytest.mark.slow
def test_gibbs_matches_nuts_on_the_plain_model(gibbs_fit):
    """The augmented Gibbs sampler and NUTS on the non-augmented likelihood target the same
    posterior of f: means agree within the Monte Carlo standard errors sd / sqrt(ESS) of both
    (ArviZ bulk ESS), standard deviations within about sd / sqrt(2 ESS) of both."""
    gibbs, X, y = gibbs_fit
    nuts = fit("logistic_softmax", X, y, method="nuts", form="latent", hyperparameters=HYPERS,
               num_warmup=300, num_samples=600 if SMALL else 1000, num_chains=2,
               progress_bar=False, seed=1)
    N = X.shape[0]
    out = []
    for res in (gibbs, nuts):
        s = az.summary(res.to_inference_data(), var_names=["f"], round_to="none")
        out.append([s[k].values.reshape(N, 3) for k in ("mean", "sd", "ess_bulk")])
    (m1, s1, e1), (m2, s2, e2) = out
    assert e1.min() > 100 and e2.min() > 100
    sd = 0.5 * (s1 + s2)
    z_mean = (m1 - m2) / np.sqrt(sd**2 / e1 + sd**2 / e2)
    z_sd = (s1 - s2) / np.sqrt(sd**2 / (2 * e1) + sd**2 / (2 * e2))
    assert np.max(np.abs(z_mean)) < 4.5, np.max(np.abs(z_mean))
    assert np.max(np.abs(z_sd)) < 4.5, np.max(np.abs(z_sd))


def test_gibbs_result_exports_to_arviz(gibbs_fit):
    result, X, _ = gibbs_fit
    assert result.predictive_kind == "latent" and result.point_hypers
    assert result.latent.shape[:2] == (2, result.num_draws)
    idata = result.to_inference_data(X[:3])
    assert idata.posterior["f"].dims == ("chain", "draw", "obs", "latent")
    assert "mean_count" in idata.sample_stats
    az.summary(idata, var_names=["f"])
    assert float(az.rhat(idata, var_names=["f"])["f"].max()) < 1.05
    assert np.isfinite(az.loo(idata).elpd_loo)
    probs = result.predict_proba(X)
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-12)


@pytest.mark.parametrize("num_inducing", [None, 8])
def test_cavi_elbo_never_decreases(num_inducing):
    X, y = toy_problem(20, 3, seed=5)
    data = lsm.prepare(X, y, 3)
    res = lsm.cavi(data, RBF(), _jax_hypers(), num_inducing=num_inducing, learn_hypers=False,
                   learn_inducing=False, max_iter=40, tol=0.0)
    assert len(res.elbo) == 40 and np.all(np.isfinite(res.elbo))
    assert np.all(np.diff(res.elbo) >= -1e-9 * np.abs(res.elbo[1:])), np.diff(res.elbo).min()
    assert res.elbo[-1] - res.elbo[0] > 0.1


def test_cavi_predictive_is_close_to_gibbs(gibbs_fit):
    """Mean-field VI versus the exact posterior (same hyperparameters): the predictive
    probabilities agree in the decision and to within 0.15; the mean-field factorisation of
    lambda from f makes CAVI less confident (measured gap about 0.1 on this problem)."""
    gibbs, X, y = gibbs_fit
    cavi = fit("logistic_softmax", X, y, method="cavi", hyperparameters=HYPERS, num_draws=1000)
    assert cavi.info["hyperparameters"] == "given"
    Xs = np.array([[0.0, 0.0], [2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7], [0.5, 0.5]])
    p_g, p_c = gibbs.predict_proba(Xs), cavi.predict_proba(Xs)
    assert np.max(np.abs(p_g - p_c)) < 0.15, np.abs(p_g - p_c)
    assert np.array_equal(p_g[1:4].argmax(1), p_c[1:4].argmax(1))
    assert cavi.sample_stats["elbo"].shape[0] == 1


def test_estimator_conventions():
    X, y = toy_problem(20, 3, seed=7)
    labels = np.array(["a", "b", "c"])[y]
    clf = LogisticSoftmaxGPClassifier(inference="cavi", seed=0,
                                      inference_options={"hyperparameters": HYPERS})
    clf.fit(X, labels)
    assert list(clf.classes_) == ["a", "b", "c"]
    probs = clf.predict_proba(X[:5])
    assert probs.shape == (5, 3)
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-12)
    assert clf.score(X, labels) > 0.8
    assert set(clf.predict(X[:5])) <= {"a", "b", "c"}
    with pytest.raises(ValueError, match="inference"):
        LogisticSoftmaxGPClassifier(inference="exact").fit(X, labels)
