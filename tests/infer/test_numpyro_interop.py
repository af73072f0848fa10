"""The models as plain NumPyro models: one likelihood term per point, and ArviZ dims.

A user may run a model's ``latent_model`` with NumPyro's own ``MCMC`` and convert it with
``az.from_numpyro``; the per-point log-likelihood then comes from the model's plates, and
``ppgpc.infer.arviz_dims`` names the sites as ppgpc's own export does.
"""

from __future__ import annotations

import functools
import warnings

import arviz as az
import jax
import numpy as np
import pytest

from ppgpc.evaluation.arviz_objects import elpd_values
from numpyro import handlers
from numpyro.infer import MCMC, NUTS, log_likelihood
from scipy.special import expit, log_softmax
from scipy.stats import norm

from conftest import toy_problem
from ppgpc.gp.kernels import make_kernel
from ppgpc.infer import arviz_dims
from ppgpc.infer.dims import LATENT_SITE_DIMS
from ppgpc.models import dirichlet_gp, get_spec

N, C = 12, 3
KERNEL = make_kernel("rbf-ard")
OBSERVED = {"ilr_gp": "z", "dirichlet_gp": "ytilde", "logistic_softmax": "y",
            "softmax_svgp": "y"}
"""The observed site of each latent model."""


def _problem(model: str):
    X, y = toy_problem(N, C, seed=3)
    spec = get_spec(model)
    data = spec.prepare(X, y, C)
    fixed = {k: np.asarray(v) for k, v in spec.initial_hypers(data, KERNEL).items()}
    return spec, data, fixed, y


def _expected_pointwise(model: str, data, fixed, f: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(N,) log p(obs_i | f_i), written out with SciPy's densities."""
    if model == "ilr_gp":     # z_i ~ N(f_i, sigma^2 I_{C-1})
        return norm.logpdf(np.asarray(data.targets), f, np.sqrt(data.noise_var)).sum(axis=1)
    if model == "dirichlet_gp":   # ytilde_ic ~ N(f_ic, s2_ic)
        noise = np.asarray(dirichlet_gp.noise_var(data, fixed))
        return norm.logpdf(np.asarray(data.targets), f, np.sqrt(noise)).sum(axis=1)
    if model == "logistic_softmax":   # sigma(f_k) / sum_c sigma(f_c)
        sig = expit(f)
        return np.log(sig[np.arange(N), y] / sig.sum(axis=1))
    return log_softmax(f, axis=1)[np.arange(N), y]   # softmax SVGP


@pytest.mark.parametrize("model", list(OBSERVED))
def test_latent_models_observe_one_term_per_point(model):
    """NumPyro's log_likelihood of a latent model has one value per observation (the data
    plate), each equal to the point's own density given f_i, for two latent draws."""
    spec, data, fixed, y = _problem(model)
    latent = functools.partial(spec.latent.latent_model, data, KERNEL, fixed)
    L = spec.num_latent(C)
    white = np.random.default_rng(7).normal(size=(2, L, N))
    values = log_likelihood(latent, {"f_white": white})[OBSERVED[model]]
    assert values.shape == (2, N)
    for s in range(2):
        trace = handlers.trace(handlers.substitute(handlers.seed(latent, 0),
                                                   {"f_white": white[s]})).get_trace()
        f = np.asarray(trace["f"]["value"])
        assert f.shape == (N, L)
        np.testing.assert_allclose(values[s], _expected_pointwise(model, data, fixed, f, y),
                                   rtol=1e-10)
        site = trace[OBSERVED[model]]
        assert site["fn"].batch_shape == (N,)
        assert [frame.name for frame in site["cond_indep_stack"]] == ["data"]


@pytest.mark.parametrize("model", ["ilr_gp", "dirichlet_gp"])
def test_collapsed_models_observe_the_points_jointly(model):
    """The collapsed form is one MVN over the N points per latent: no per-point term (the
    docstrings say so; ppgpc's export computes the per-point likelihood from f instead)."""
    spec, data, fixed, _ = _problem(model)
    collapsed = functools.partial(spec.conjugate.collapsed_model, data, KERNEL)
    values = log_likelihood(collapsed, {k: v[None] for k, v in fixed.items()})
    (site,) = values
    assert values[site].shape == (1, spec.num_latent(C))


def test_plain_numpyro_nuts_gives_arviz_a_pointwise_log_likelihood():
    """MCMC(NUTS(latent_model)) then az.from_numpyro with ppgpc's dims: the log-likelihood
    has N observations along "obs", the sites are named as ppgpc's export names them, and
    az.loo runs on the N points."""
    spec, data, fixed, y = _problem("logistic_softmax")
    mcmc = MCMC(NUTS(functools.partial(spec.latent.latent_model, data, KERNEL, fixed)),
                num_warmup=60, num_samples=60, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0))
    idata = az.from_numpyro(mcmc, **arviz_dims("logistic_softmax", data, KERNEL))
    ll = idata.log_likelihood["y"]
    assert ll.dims == ("chain", "draw", "obs") and ll.shape == (1, 60, N)
    assert idata.posterior["f"].dims == ("chain", "draw", "obs", "latent")
    assert idata.posterior["f_white"].dims == ("chain", "draw", "latent", "obs")
    np.testing.assert_array_equal(idata.observed_data["y"].values, y)
    assert idata.observed_data["y"].dims == ("obs",)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # Pareto-k warnings on 12 points and 60 draws
        elpd = az.loo(idata, pointwise=True)
    assert elpd.n_data_points == N and elpd_values(elpd).elpd_i.shape == (N,)
    assert -N * np.log(C) * 3 < elpd_values(elpd).elpd < 0


def test_arviz_dims_name_the_hyperparameters_and_refuse_what_has_no_latent_form():
    spec, data, _, _ = _problem("dirichlet_gp")
    out = arviz_dims(spec, data, KERNEL, feature_names=["x0", "x1"])
    assert out["dims"]["kernel_lengthscale"] == ["feature"]        # ARD kernel
    assert out["dims"]["mean"] == ["latent"]
    assert out["dims"]["kernel_variance"] == []
    assert out["dims"]["ytilde"] == LATENT_SITE_DIMS["ytilde"] == ["obs", "latent"]
    assert list(out["coords"]["feature"]) == ["x0", "x1"]
    assert list(out["coords"]["obs"]) == list(range(N))
    assert list(out["coords"]["latent"]) == list(range(C))
    iso = arviz_dims("ilr_gp", get_spec("ilr_gp").prepare(data.X, data.y, C), make_kernel("rbf"))
    assert iso["dims"]["kernel_lengthscale"] == []                 # one lengthscale
    assert list(iso["coords"]["latent"]) == list(range(C - 1))
    with pytest.raises(ValueError, match="feature_names must have 2 entries"):
        arviz_dims(spec, data, KERNEL, feature_names=["x0"])
    with pytest.raises(ValueError, match="'ilr_gp_sparse' has no latent form"):
        arviz_dims("ilr_gp_sparse", data, KERNEL)
