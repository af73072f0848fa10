"""Leave-one-out ELPD (``ppgpc.infer.elpd``): the exact closed form against brute-force refits
with the hyperparameters held fixed, ``az.compare`` on the results, and PSIS-LOO with the
pseudo-likelihood importance ratios against the exact value within its Monte Carlo error."""

from __future__ import annotations

import warnings

import arviz as az
import jax
import numpy as np
import pytest

from ppgpc.infer import exact_loo, fit, psis_loo, to_inference_data
from ppgpc.infer.loo import loo_latent, loo_nll
from ppgpc.models import get_spec

HYPERS = {"kernel_variance": 0.3, "kernel_lengthscale": [2.0, 2.0]}


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(40, 2))
    y = (X[:, 0] + rng.normal(size=40) > 0).astype(int)
    return X, y


@pytest.mark.parametrize("model, options", [("ilr_gp", {"epsilon": 0.9}),
                                            ("dirichlet_gp", {"alpha_eps": 0.05})])
def test_exact_loo_latent_equals_refits_with_given_hyperparameters(model, options):
    """For each i, ``fit(..., method="exact", hyperparameters=<the full fit's>)`` on all
    points but i predicts at x_i the latent moments of ``loo_latent``'s row i, to 1e-8."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(15, 2))
    y = rng.integers(0, 3, size=15)
    full = fit(model, X, y, method="exact", num_draws=1, model_options=options)
    hypers = {k: np.asarray(v[0, 0]) for k, v in full.hypers.items()}
    mean, var = (np.asarray(a) for a in loo_latent(full))
    spec = get_spec(model)
    for i in range(15):
        keep = np.arange(15) != i
        refit = fit(model, X[keep], y[keep], method="exact", num_draws=1,
                    model_options=options, hyperparameters=hypers, num_classes=3)
        post = spec.conjugate.condition(refit.data, refit.kernel, hypers)
        m, v = spec.conjugate.predict(refit.data, refit.kernel, hypers, post, X[i:i + 1])
        np.testing.assert_allclose(mean[i], m[0], rtol=0, atol=1e-8)
        np.testing.assert_allclose(var[i], v[0], rtol=0, atol=1e-8)


def test_exact_loo_is_the_loo_nll_and_az_compare_ranks_with_it(problem):
    X, y = problem
    ilr = fit("ilr_gp", X, y, method="exact", num_draws=1)
    gpd = fit("dirichlet_gp", X, y, method="exact", num_draws=1)
    key = jax.random.PRNGKey(4)
    a, b = exact_loo(ilr, key=key, num_draws=2048), exact_loo(gpd, key=key, num_draws=2048)
    mean, var = loo_latent(ilr)
    nll = float(loo_nll(key, get_spec("ilr_gp").log_link, mean, var, y, num_draws=2048)[0])
    assert a.elpd_loo == pytest.approx(-len(y) * nll, rel=1e-10)
    assert a.loo_i.shape == (len(y),) and a.warning is False and a.scale == "log"
    assert a.se == pytest.approx(np.sqrt(len(y) * np.var(a.loo_i.values)))
    assert a.p_loo > 0
    table = az.compare({"ilr": a, "gpd": b})
    assert set(table.index) == {"ilr", "gpd"}
    best = "ilr" if a.elpd_loo > b.elpd_loo else "gpd"
    assert table.index[0] == best and table.loc[best, "elpd_diff"] == 0.0
    with pytest.raises(ValueError, match="point hyperparameters"):
        exact_loo(fit("ilr_gp", X, y, method="nuts", form="latent", num_warmup=5,
                      num_samples=5, num_chains=1, progress_bar=False))


def _psis_se(result, elpd):
    """Monte Carlo sd bound of the PSIS elpd: per point, the delta-method sd of the
    self-normalised estimate log sum_s w_s p_s, sqrt(sum_s w_s^2 (p_s - p_hat)^2) / p_hat;
    the draws are shared by the points, so sum the sds (triangle inequality)."""
    from ppgpc.infer.elpd import _log_terms, training_latent
    import jax.numpy as jnp
    f = training_latent(result)
    hypers = {k: jnp.broadcast_to(v, f.shape[:2] + v.shape[2:]) for k, v in result.hypers.items()}
    log_ratio, loglik = _log_terms(result.spec.log_link, result.spec.conjugate.pseudo_log_lik,
                                   result.data, hypers, f, jnp.asarray(result.data.y))
    S, N = f.shape[0] * f.shape[1], f.shape[2]
    lw, _ = az.psislw(np.asarray(log_ratio).reshape(S, N).T, 1.0)
    w, p = np.exp(lw), np.exp(np.asarray(loglik).reshape(S, N).T)
    p_hat = np.sum(w * p, axis=1)
    return float(np.sum(np.sqrt(np.sum(w**2 * (p - p_hat[:, None])**2, axis=1)) / p_hat))


@pytest.mark.parametrize("model, options, hypers, old_is_off", [
    ("ilr_gp", {"epsilon": 0.9}, HYPERS, True),
    # here the categorical ratios' error (0.44) is inside the conservative bound
    ("dirichlet_gp", {"alpha_eps": 0.3}, None, False),
])
def test_psis_loo_agrees_with_exact_loo(problem, model, options, hypers, old_is_off):
    """4000 draws of the exact conjugate posterior: PSIS-LOO with the pseudo-likelihood
    ratios is within 4 Monte Carlo sds (its own, plus the exact value's through the link)
    of the exact elpd, with every Pareto k good; ``az.loo`` on the export (categorical
    ratios) is farther off than that for the ILR-GP."""
    X, y = problem
    result = fit(model, X, y, method="exact", num_draws=4000, model_options=options,
                 hyperparameters=hypers)
    exact = exact_loo(result, num_draws=16384)
    psis = psis_loo(result)
    assert not psis.warning and np.all(psis.pareto_k.values < psis.good_k)
    assert psis.n_samples == 4000
    mean, var = loo_latent(result)
    eps = np.random.default_rng(1).normal(size=(16384, 1, np.shape(mean)[1]))
    p = np.exp(np.asarray(result.spec.log_link(np.asarray(mean)[None]
                                              + np.sqrt(np.asarray(var))[None] * eps)))
    p = p[:, np.arange(len(y)), y]
    exact_se = float(np.sum(p.std(axis=0) / p.mean(axis=0)) / np.sqrt(16384))
    tol = 4 * (_psis_se(result, psis) + exact_se)
    assert abs(psis.elpd_loo - exact.elpd_loo) < tol
    if old_is_off:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            old = az.loo(to_inference_data(result))
        assert abs(old.elpd_loo - exact.elpd_loo) > tol
