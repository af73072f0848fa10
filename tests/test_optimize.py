"""Type-II ML / MAP point estimates (``ppgpc.infer.optimize``): L-BFGS-B and Adam."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from conftest import toy_problem
from ppgpc.infer import fit
from ppgpc.infer.optimize import optimize_sites

X_SCALE = np.random.default_rng(4).normal(scale=2.5, size=200)


def scale_model(x):
    """x_i ~ N(0, s^2): the type-II ML optimum is s = sqrt(mean(x^2)), in closed form."""
    s = numpyro.sample("s", dist.LogNormal(0.0, 1.0))
    numpyro.sample("x", dist.Normal(0.0, s).expand([x.shape[0]]), obs=x)


@pytest.mark.parametrize("optimizer, options", [
    ("lbfgs", {}),
    ("adam", {"learning_rate": 0.05, "max_iter": 3000}),
])
def test_both_optimisers_reach_the_closed_form_maximum(optimizer, options):
    """The maximum likelihood scale is sqrt(mean x^2); both optimisers stop within 1e-5 of
    it (an optimisation tolerance: the objective is deterministic)."""
    x = jnp.asarray(X_SCALE)
    opt = optimize_sites(scale_model, {"s": 1.0}, args=(x,), optimizer=optimizer,
                         tol=1e-8, **options)
    want = float(np.sqrt(np.mean(X_SCALE ** 2)))
    assert float(opt.params["s"]) == pytest.approx(want, rel=1e-5)
    assert opt.num_iterations > 0


def test_adam_stops_at_the_gradient_tolerance_and_reports_convergence():
    x = jnp.asarray(X_SCALE)
    opt = optimize_sites(scale_model, {"s": 1.0}, args=(x,), optimizer="adam",
                         learning_rate=0.05, max_iter=20_000, tol=1e-3)
    assert opt.converged and opt.grad_norm <= 1e-3
    assert opt.num_iterations < 20_000
    short = optimize_sites(scale_model, {"s": 1.0}, args=(x,), optimizer="adam",
                           learning_rate=0.05, max_iter=5, tol=1e-3)
    assert short.num_iterations == 5 and not short.converged


def capped_scale_model(x):
    """``scale_model`` with zero density for s >= 2: its optimum, sqrt(mean x^2) = 2.5,
    lies past the cap, so a long step lands where the log density is -inf."""
    s = numpyro.sample("s", dist.LogNormal(0.0, 1.0))
    numpyro.factor("cap", jnp.where(s < 2.0, 0.0, -jnp.inf))
    numpyro.sample("x", dist.Normal(0.0, s).expand([x.shape[0]]), obs=x)


def test_adam_stops_with_a_clear_error_at_a_non_finite_objective():
    x = jnp.asarray(X_SCALE)
    with pytest.raises(ValueError, match=r"became non-finite after [1-9]\d* Adam steps"):
        optimize_sites(capped_scale_model, {"s": 1.0}, args=(x,), optimizer="adam",
                       learning_rate=0.5, max_iter=200)


def test_bad_optimizer_options_name_the_problem():
    x = jnp.asarray(X_SCALE)
    with pytest.raises(ValueError, match="unknown optimizer 'bfgs'"):
        optimize_sites(scale_model, {"s": 1.0}, args=(x,), optimizer="bfgs")
    with pytest.raises(ValueError, match="learning_rate must be positive"):
        optimize_sites(scale_model, {"s": 1.0}, args=(x,), optimizer="adam", learning_rate=0.0)


def test_adam_type_ii_ml_of_ilr_gp_reaches_the_lbfgs_optimum():
    """On a small ILR-GP problem, 2000 Adam steps reach L-BFGS's log marginal likelihood to
    within 1e-3 nats, and the driver records which optimiser ran."""
    X, y = toy_problem(40, 3)
    lbfgs = fit("ilr_gp", X, y, method="exact", num_draws=10)
    adam = fit("ilr_gp", X, y, method="exact", num_draws=10, optimizer="adam",
               learning_rate=0.05, max_iter=2000)
    assert lbfgs.info["optimizer"] == "lbfgs" and adam.info["optimizer"] == "adam"
    assert adam.info["log_marginal_likelihood"] == pytest.approx(
        lbfgs.info["log_marginal_likelihood"], abs=1e-3)
    with pytest.raises(TypeError, match="unknown option"):
        fit("ilr_gp", X, y, method="exact", adam_steps=10)
