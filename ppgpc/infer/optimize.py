"""Point estimates of a NumPyro model's latent sites: type-II maximum likelihood and MAP.

For a collapsed GP model (hyperparameter sites, the latent GP integrated out, an observed
target site) this maximises

    type-II ML:  log p(targets | theta)                    (``include_prior=False``)
    MAP:         log p(targets | theta) + log p(theta)     (``include_prior=True``)

over theta in its *constrained* space, parameterised through NumPyro's bijections to the
unconstrained space (so positive parameters are optimised on the log scale). No Jacobian
term enters: this is the mode of p(theta | targets), not of the unconstrained density.
The optimiser is SciPy's L-BFGS-B on the flattened unconstrained parameters (the default),
or a fixed number of Adam steps (``optimizer="adam"``, as in GPyTorch's examples), driven by
one jitted value-and-gradient function. The model's data enter that function as traced
arguments, so refitting on new targets of the same shape (an epsilon grid search, a new
seed) reuses the compiled code.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.optimize
from jax.flatten_util import ravel_pytree
from numpyro.distributions.transforms import biject_to
from numpyro.handlers import seed, substitute, trace

__all__ = ["OptimizationResult", "optimize_sites", "log_density_terms"]


class OptimizationResult(NamedTuple):
    """Outcome of ``optimize_sites``."""

    params: dict
    """Optimal values of the latent sites, by site name, in the constrained space."""
    objective: float
    """The maximised log density (log marginal likelihood for type-II ML)."""
    num_iterations: int
    """L-BFGS iterations or Adam steps taken."""
    grad_norm: float
    """Largest absolute gradient entry (unconstrained space) at the end."""
    converged: bool
    """Whether L-BFGS-B reported convergence; for Adam, whether ``grad_norm <= tol``."""


def log_density_terms(model: Callable, args: tuple, params: dict, include_prior: bool):
    """Sum of log densities of the observed sites, plus the latent sites' if asked for.

    Args:
        model: a NumPyro model, called as ``model(*args)``.
        args: its arguments.
        params: values for every latent sample site, by name.
        include_prior: add the log prior of the latent sites.
    """
    tr = trace(substitute(seed(model, 0), data=params)).get_trace(*args)
    total = jnp.zeros(())
    for site in tr.values():
        if site["type"] != "sample":
            continue
        if not (site["is_observed"] or include_prior):
            continue
        lp = jnp.sum(site["fn"].log_prob(site["value"]))
        if site.get("scale") is not None:
            lp = lp * site["scale"]
        total = total + lp
    return total


def _latent_sites(model, args) -> dict:
    tr = trace(seed(model, 0)).get_trace(*args)
    return {
        name: site
        for name, site in tr.items()
        if site["type"] == "sample" and not site["is_observed"]
    }


def _transforms(model, args) -> dict:
    return {name: biject_to(site["fn"].support) for name, site in _latent_sites(model, args).items()}


@functools.partial(jax.jit, static_argnames=("model", "include_prior"))
def _negative_log_density(u: dict, args: tuple, model, include_prior: bool):
    transforms = _transforms(model, args)
    params = {name: transforms[name](value) for name, value in u.items()}
    return -log_density_terms(model, args, params, include_prior)


_value_and_grad = jax.jit(
    jax.value_and_grad(_negative_log_density), static_argnames=("model", "include_prior")
)


def optimize_sites(
    model: Callable,
    init_values: dict,
    *,
    args: tuple = (),
    include_prior: bool = False,
    max_iter: int = 500,
    tol: float = 1e-6,
    optimizer: str = "lbfgs",
    learning_rate: float = 0.1,
    progress_bar: bool = False,
) -> OptimizationResult:
    """Maximise the (prior-less or posterior) log density over every latent site of ``model``.

    Args:
        model: NumPyro model called as ``model(*args)``; its latent sites are the parameters.
            It must be hashable (a module-level function): the compiled objective is cached
            on it.
        init_values: starting values by site name (constrained space); must name every
            latent site.
        args: the model's arguments (arrays and static pytrees such as kernels).
        include_prior: MAP (True) or type-II ML (False).
        max_iter: L-BFGS-B iteration cap, or the number of Adam steps.
        tol: gradient tolerance in the unconstrained space (L-BFGS-B's ``gtol``; Adam stops
            early once the largest gradient entry is below it).
        optimizer: ``"lbfgs"`` (SciPy's L-BFGS-B, runs to convergence) or ``"adam"``
            (``max_iter`` steps of ``optax.adam(learning_rate)``, returning the last
            iterate; a non-finite objective stops the run with an error).
        learning_rate: Adam's step size in the unconstrained space (ignored by L-BFGS).
        progress_bar: show the Adam steps with the running objective (tqdm, stderr).

    Raises:
        ValueError: ``init_values`` misses or adds sites, an unknown ``optimizer`` or a
            non-positive ``learning_rate``, or the optimum is not finite (the Cholesky
            failed even with jitter).
    """
    if optimizer not in _OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose from {list(_OPTIMIZERS)}")
    if optimizer == "adam" and not learning_rate > 0:
        raise ValueError(f"learning_rate must be positive, got {learning_rate}")
    sites = _latent_sites(model, args)
    missing = sorted(set(sites) - set(init_values))
    extra = sorted(set(init_values) - set(sites))
    if missing or extra:
        raise ValueError(
            f"init_values must name exactly the latent sites {sorted(sites)}; "
            f"missing {missing}, unknown {extra}"
        )
    transforms = _transforms(model, args)
    u0 = {
        name: transforms[name].inv(jnp.asarray(init_values[name], dtype=jnp.float64))
        for name in sites
    }
    flat0, unravel = ravel_pytree(u0)

    def fun(flat):
        value, grad = _value_and_grad(unravel(jnp.asarray(flat)), args, model, include_prior)
        value, grad = float(value), np.asarray(ravel_pytree(grad)[0], dtype=np.float64)
        if not np.isfinite(value) or not np.all(np.isfinite(grad)):
            return np.inf, np.zeros_like(grad)  # makes the line search step back
        return value, grad

    if optimizer == "lbfgs":
        res = scipy.optimize.minimize(
            fun, np.asarray(flat0, dtype=np.float64), jac=True, method="L-BFGS-B",
            options={"maxiter": max_iter, "gtol": tol},
        )
        x, num_iterations, converged = res.x, int(res.nit), bool(res.success)
    else:
        x, num_iterations = _adam(fun, np.asarray(flat0, dtype=np.float64), max_iter, tol,
                                  learning_rate, progress_bar)
    value, grad = fun(x)
    if optimizer == "adam":
        converged = bool(np.isfinite(value) and np.max(np.abs(grad), initial=0.0) <= tol)
    if not np.isfinite(value):
        raise ValueError(
            "the optimised log density is not finite: the kernel matrix could not be "
            "factorised even with jitter. Check the inputs for duplicates or extreme scales, "
            "or pass hyperparameters explicitly."
        )
    u_opt = unravel(jnp.asarray(x))
    return OptimizationResult(
        params={name: transforms[name](u_opt[name]) for name in u_opt},
        objective=-value,
        num_iterations=num_iterations,
        grad_norm=float(np.max(np.abs(grad))) if grad.size else 0.0,
        converged=converged,
    )


_OPTIMIZERS = ("lbfgs", "adam")


def _adam(fun, x0: np.ndarray, num_steps: int, tol: float, learning_rate: float,
          progress_bar: bool) -> tuple[np.ndarray, int]:
    """``num_steps`` Adam steps on ``fun`` (value, gradient) from ``x0``; (last x, steps)."""
    from tqdm.auto import tqdm

    adam = optax.adam(learning_rate)
    state = adam.init(jnp.asarray(x0))
    x = x0
    steps = tqdm(range(num_steps), desc="Adam", disable=not progress_bar, leave=False)
    taken = 0
    for _ in steps:
        value, grad = fun(x)
        if not np.isfinite(value):
            raise ValueError(
                f"the log density became non-finite after {taken} Adam steps: the kernel "
                "matrix could not be factorised even with jitter, or a parameter left the "
                "region of finite density. Lower learning_rate or max_iter, or check the "
                "inputs for duplicates or extreme scales."
            )
        if np.max(np.abs(grad), initial=0.0) <= tol:
            break
        updates, state = adam.update(jnp.asarray(grad), state)
        x = np.asarray(x + np.asarray(updates), dtype=np.float64)
        taken += 1
        steps.set_postfix(objective=f"{-value:.6g}", refresh=False)
    return x, taken
