"""Point estimates of a NumPyro model's latent sites: type-II maximum likelihood and MAP.

For a collapsed GP model (hyperparameter sites, the latent GP integrated out, an observed
target site) this maximises

    type-II ML:  log p(targets | theta)                    (``include_prior=False``)
    MAP:         log p(targets | theta) + log p(theta)     (``include_prior=True``)

over theta in its *constrained* space, parameterised through NumPyro's bijections to the
unconstrained space (so positive parameters are optimised on the log scale). No Jacobian
term enters: this is the mode of p(theta | targets), not of the unconstrained density.

``optimize_sites`` builds f from the model and calls one jitted function for the whole
optimisation. The model's data are traced arguments of it, so refitting on new targets of
the same shape (an epsilon grid search, a new seed) compiles nothing new; it compiles once
per model, ``include_prior``, ``optimizer`` and array shapes (``max_iter``, ``tol``,
``ftol`` and ``learning_rate`` are traced too). The optimiser's loop stops between
iterations when it reaches a traced ``limit`` (``ppgpc.infer.optimize.lbfgs_run``), so
with ``progress_bar=True`` the same program runs in the one loop of every method
(``ppgpc.runtime.loop``), in windows of about half a second, and a counter of iterations,
objective and gradient is updated between them; with
``progress_bar=False`` it is one device call. Both take the same steps bit for bit.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro.distributions.transforms import biject_to
from numpyro.handlers import seed, substitute, trace

from ppgpc.infer.optimize import (OPTIMIZERS, RUNNING, SCIPY_FTOL, STOP_REASONS, Minimum,
                                  OptimizationResult, adam_init, adam_run, finite_or_inf,
                                  lbfgs_init, lbfgs_run, minimize, to_minimum)
from ppgpc.runtime.programs import jit
from ppgpc.runtime import progress
from ppgpc.runtime.loop import Window, run_windows
from ppgpc.runtime.progress import Timer, note
from ppgpc.validation import check_count, check_positive

__all__ = ["minimize_sites", "optimize_sites", "log_density_terms"]


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
        if site["type"] != "sample" or not (site["is_observed"] or include_prior):
            continue
        lp = jnp.sum(site["fn"].log_prob(site["value"]))
        if site.get("scale") is not None:
            lp = lp * site["scale"]
        total = total + lp
    return total


def _latent_sites(model, args) -> dict:
    tr = trace(seed(model, 0)).get_trace(*args)
    return {name: site for name, site in tr.items()
            if site["type"] == "sample" and not site["is_observed"]}


def _latent_site_names(model, args) -> list[str]:
    """The latent site names, from an abstract trace of the model (nothing is computed)."""
    names: list[str] = []
    jax.eval_shape(lambda a: names.extend(_latent_sites(model, a)), args)
    return names


def _transforms(model, args) -> dict:
    return {name: biject_to(site["fn"].support)
            for name, site in _latent_sites(model, args).items()}


@functools.partial(jit, static_argnames=("model", "include_prior"))
def _negative_log_density(u: dict, args: tuple, model, include_prior: bool):
    transforms = _transforms(model, args)
    params = {name: transforms[name](value) for name, value in u.items()}
    return -log_density_terms(model, args, params, include_prior)


def _site_objective(model, init_values: dict, args: tuple, include_prior: bool):
    """(f, u0, to_params): f over the flat unconstrained sites, the start, and the map back."""
    transforms = _transforms(model, args)
    u0 = {name: transforms[name].inv(jnp.asarray(value, dtype=jnp.result_type(float)))
          for name, value in init_values.items()}
    x0, unravel = ravel_pytree(u0)

    def fun(x):
        return _negative_log_density(unravel(x), args, model, include_prior)

    def to_params(x):
        u = unravel(x)
        return {name: transforms[name](value) for name, value in u.items()}

    return fun, x0, to_params


def minimize_sites(model: Callable, init_values: dict, args: tuple = (), *,
                   include_prior: bool = False, max_iter=500, tol=1e-6, ftol=SCIPY_FTOL,
                   optimizer: str = "lbfgs", learning_rate=0.1) -> tuple[dict, Minimum]:
    """``minimize`` of a model's negative log density over its latent sites (pure).

    The device half of ``optimize_sites``, without its checks: jit- and vmap-able, e.g.
    over target vectors in ``args``. ``init_values`` must name every latent site.

    Returns:
        ``(params, minimum)``: the constrained optimum by site name, and the ``Minimum`` of
        f = -log density over the flattened unconstrained sites.
    """
    fun, x0, to_params = _site_objective(model, init_values, args, include_prior)
    best = minimize(fun, x0, max_iter=max_iter, tol=tol, ftol=ftol, optimizer=optimizer,
                    learning_rate=learning_rate)
    return to_params(best.x), best


_SITES_STATIC = ("model", "include_prior", "optimizer")

@functools.partial(jit, static_argnames=_SITES_STATIC)
def _sites_start(init_values, args, tol, learning_rate, *, model, include_prior, optimizer):
    """The optimiser's state at the start (flattened unconstrained sites): L-BFGS's
    evaluates nothing yet, Adam's evaluates f once."""
    fun, x0, _ = _site_objective(model, init_values, args, include_prior)
    if optimizer == "adam":
        return adam_init(finite_or_inf(fun), x0, tol, learning_rate)
    return lbfgs_init(x0)


@functools.partial(jit, static_argnames=_SITES_STATIC)
def _sites_window(state, init_values, args, limit, max_iter, tol, ftol, learning_rate, *,
                  model, include_prior, optimizer):
    """Iterations until a stop or ``limit`` in all: (state, constrained params, Minimum so
    far). ``limit`` is traced, so every window of a fit runs the same program."""
    fun, _, to_params = _site_objective(model, init_values, args, include_prior)
    value_and_grad = finite_or_inf(fun)
    if optimizer == "adam":
        state = adam_run(value_and_grad, state, limit, max_iter, tol, learning_rate)
    else:
        state = lbfgs_run(value_and_grad, state, limit, max_iter, tol, ftol)
    return state, to_params(state.x), to_minimum(state)


def _run_in_windows(init, args, scalars, static, progress_bar, label):
    """The optimisation in the one loop (``ppgpc.runtime.loop.run_windows``): one device
    call (``progress_bar`` False), or windows of about ``ppgpc.runtime.loop.WINDOW_SECONDS``
    with a counter of iterations, the objective and the largest gradient entry on stderr
    between them (shown once the fit has run a couple of seconds). The windows run the same
    program on the same state as one call, so the result is the same bit for bit."""
    max_iter = scalars["max_iter"]
    start = _sites_start(init, args, scalars["tol"], scalars["learning_rate"], **static)

    def window(carry, n):
        state, _, best = carry
        taken = 0 if best is None else int(best.num_iterations)
        state, params, best = _sites_window(state, init, args, taken + n, **scalars,
                                            **static)
        reason = int(best.stop_reason)
        return (state, params, best), Window(
            int(best.num_iterations) - taken,
            {"objective": f"{-float(best.value):.6g}",
             "max |grad|": f"{float(best.grad_norm):.1e}"},
            None if reason == RUNNING else STOP_REASONS[reason])

    (_, params, best), _ = run_windows(
        window, (start, None, None), cap=max_iter,
        size=None if progress_bar else max_iter, desc=label, unit="it",
        progress=progress_bar, cap_reason="max_iter", total=False)
    return params, best


def _initial_values(model: Callable, args: tuple, init_values: dict) -> dict:
    """The starting values of every latent site (float arrays, in the model's site order);
    ``init_values`` must name exactly those sites."""
    sites = _latent_site_names(model, args)
    missing = sorted(set(sites) - set(init_values))
    extra = sorted(set(init_values) - set(sites))
    if missing or extra:
        raise ValueError(f"init_values must name exactly the latent sites {sorted(sites)}; "
                         f"missing {missing}, unknown {extra}")
    return {name: jnp.asarray(init_values[name], dtype=jnp.result_type(float)) for name in sites}


def _stop_reason(best: Minimum, optimizer: str) -> str:
    """``STOP_REASONS`` of the host ``Minimum``, after the errors of a non-finite run: Adam's
    non-finite objective, or a non-finite optimum."""
    stop = STOP_REASONS[int(best.stop_reason)]
    if stop == "non-finite objective" and optimizer == "adam":
        raise ValueError(
            f"the log density became non-finite after {int(best.num_iterations)} Adam steps: "
            "the kernel matrix could not be factorised even with jitter, or a parameter left "
            "the region of finite density. Lower learning_rate or max_iter, or check the "
            "inputs for duplicates or extreme scales.")
    if not np.isfinite(best.value):
        raise ValueError(
            "the optimised log density is not finite: the kernel matrix could not be "
            "factorised even with jitter. Check the inputs for duplicates or extreme scales, "
            "or pass hyperparameters explicitly.")
    return stop


def optimize_sites(model: Callable, init_values: dict, *, args: tuple = (),
                   include_prior: bool = False, max_iter: int = 500, tol: float = 1e-6,
                   optimizer: str = "lbfgs", learning_rate: float = 0.1,
                   progress_bar: bool = False) -> OptimizationResult:
    """Maximise the (prior-less or posterior) log density over every latent site of ``model``.

    One jitted program runs the optimisation (in windows when ``progress_bar``); it is
    compiled once per model, ``include_prior``, ``optimizer`` and array shapes, and the
    model's data are traced, so a refit on new data of the same shape compiles nothing.

    Args:
        model: NumPyro model called as ``model(*args)``, its latent sites the parameters;
            hashable (a module-level function): the compiled optimiser is cached on it.
        init_values: starting values of every latent site by name (constrained space).
        args: the model's arguments (arrays and static pytrees such as kernels).
        include_prior: MAP (True) or type-II ML (False).
        max_iter: L-BFGS iteration cap, or the number of Adam steps.
        tol: gradient tolerance in the unconstrained space (L-BFGS-B's ``pgtol``: both
            optimisers stop once the largest gradient entry is below it).
        optimizer: ``"lbfgs"`` (to convergence, module docstring) or ``"adam"`` (up to
            ``max_iter`` steps of ``optax.adam(learning_rate)``, returning the last iterate;
            a non-finite objective stops the run with an error).
        learning_rate: Adam's step size in the unconstrained space (ignored by L-BFGS).
        progress_bar: show the iterations, objective and largest gradient entry on stderr
            between windows of about ``WINDOW_SECONDS`` (``ppgpc.runtime.progress``); the
            steps are the same either way.

    Raises:
        ValueError: ``init_values`` misses or adds sites, an unknown ``optimizer``, a
            ``max_iter`` below 1 or a non-positive ``learning_rate``, or the optimum is not
            finite (the Cholesky failed even with jitter).

    Example:
        >>> import jax.numpy as jnp, numpyro, numpyro.distributions as dist
        >>> def scale_model(x):
        ...     s = numpyro.sample("s", dist.LogNormal(0.0, 1.0))
        ...     numpyro.sample("x", dist.Normal(0.0, s).expand([x.shape[0]]), obs=x)
        >>> opt = optimize_sites(scale_model, {"s": 1.0}, args=(jnp.array([3.0, -3.0]),))
        >>> round(float(opt.params["s"]), 4), opt.stop_reason
        (3.0, 'gradient tolerance')
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose from {list(OPTIMIZERS)}")
    max_iter = check_count("max_iter", max_iter)   # Adam took no step for max_iter < 1
    learning_rate = check_positive("learning_rate", learning_rate)
    init = _initial_values(model, args, init_values)
    scalars = dict(max_iter=max_iter, tol=float(tol), ftol=SCIPY_FTOL,
                   learning_rate=learning_rate)
    timer, kind = Timer(), "type-II MAP" if include_prior else "type-II ML"
    params, best = _run_in_windows(
        init, args, scalars, dict(model=model, include_prior=include_prior, optimizer=optimizer),
        progress_bar, f"{'L-BFGS' if optimizer == 'lbfgs' else 'Adam'} ({kind})")
    best = jax.device_get(best)
    note(f"{optimizer}: {int(best.num_iterations)} iterations, objective "
         f"{-float(best.value):.6g}, {timer}",
         progress_bar and timer.seconds >= progress.COUNTER_DELAY)
    return OptimizationResult(params, -float(best.value), int(best.num_iterations),
                              float(best.grad_norm), bool(best.converged),
                              int(best.num_evaluations), _stop_reason(best, optimizer))
