"""Point estimates of a NumPyro model's latent sites: type-II maximum likelihood and MAP.

For a collapsed GP model (hyperparameter sites, the latent GP integrated out, an observed
target site) this maximises

    type-II ML:  log p(targets | theta)                    (``include_prior=False``)
    MAP:         log p(targets | theta) + log p(theta)     (``include_prior=True``)

over theta in its *constrained* space, parameterised through NumPyro's bijections to the
unconstrained space (so positive parameters are optimised on the log scale). No Jacobian
term enters: this is the mode of p(theta | targets), not of the unconstrained density.

The minimiser, ``minimize``, works on f(u) = -(that log density) over the flattened
unconstrained parameters u, and runs entirely on the device: one ``lax.while_loop``, no
value crossing to the host between iterations, so it can be jitted and vmapped (over
starting points, or over the data a model closes over: a whole type-II fit per target
vector, ``minimize_sites``).

* L-BFGS (the default; ``optax.lbfgs``, memory 10 as SciPy's L-BFGS-B): the two-loop
  recursion over the last pairs s_k = u_{k+1} - u_k, y_k = g_{k+1} - g_k gives the direction
  d_k = -H_k g_k, and the zoom line search (Nocedal & Wright, Algorithms 3.5-3.6) a step
  eta_k with
      f(u_k + eta d_k) <= f(u_k) + 1e-4 eta g_k' d_k,   |g(u_k + eta d_k)' d_k| <= 0.9 |g_k' d_k|;
  u_{k+1} = u_k + eta_k d_k, its value and gradient taken from the line search (one
  evaluation per line-search step, none repeated). The loop stops at the first of, checked
  after every iteration in this order (SciPy's L-BFGS-B tests and order):

  1. ``"gradient tolerance"``: max_i |g_{k+1,i}| <= ``tol`` (SciPy's ``pgtol``/``gtol``);
  2. ``"relative objective change"``: (f_k - f_{k+1}) / max(|f_k|, |f_{k+1}|, 1) <= ``ftol``
     (SciPy's factr * eps; its default, 2.22e-9, is ours);
  3. ``"max_iter"`` iterations;
  4. ``"line search failure"``: the line search found no step that lowers f (the iterate
     stays at u_k).

  1 and 2 count as converged. A non-finite value or gradient of f is read as f = +inf with
  a zero gradient, so the line search steps back from a point where the Cholesky failed
  instead of carrying NaN into the curvature pairs.
* Adam (``optimizer="adam"``, as in GPyTorch's examples): up to ``max_iter`` steps of
  ``optax.adam(learning_rate)``, stopping early at the gradient tolerance (converged) or at
  the first non-finite objective (``"non-finite objective"``; ``optimize_sites`` then
  raises with the number of steps taken).

``optimize_sites`` builds f from the model and calls one jitted function for the whole
optimisation. The model's data are traced arguments of it, so refitting on new targets of
the same shape (an epsilon grid search, a new seed) compiles nothing new; it compiles once
per model, ``include_prior``, ``optimizer`` and array shapes (``max_iter``, ``tol``,
``ftol`` and ``learning_rate`` are traced too). A per-iteration progress bar would need the
host inside the loop: L-BFGS writes a line as it starts and one as it ends (with
``progress_bar=True``); Adam with ``progress_bar=True`` runs in windows of
``ADAM_WINDOW`` steps (one jitted loop, compiled once) and updates the bar between them,
and with ``progress_bar=False`` it is a single device call.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax
from jax.flatten_util import ravel_pytree
from numpyro.distributions.transforms import biject_to
from numpyro.handlers import seed, substitute, trace

from ppgpc.progress import Timer, note
from ppgpc.validation import check_count, check_positive

__all__ = ["Minimum", "STOP_REASONS", "minimize", "minimize_sites", "OptimizationResult",
           "optimize_sites", "log_density_terms"]

STOP_REASONS = ("gradient tolerance", "relative objective change", "max_iter",
                "line search failure", "non-finite objective")
"""Why ``minimize`` stopped, indexed by ``Minimum.stop_reason``; the first two are convergence."""

_GRADIENT, _OBJECTIVE, _MAX_ITER, _LINE_SEARCH, _NON_FINITE = range(len(STOP_REASONS))
_RUNNING = -1
_OPTIMIZERS = ("lbfgs", "adam")
SCIPY_FTOL = 2.220446049250313e-09
"""SciPy's default relative objective tolerance of L-BFGS-B (factr = 1e7 times eps)."""
ADAM_WINDOW = 50
"""Adam steps per device call when ``optimize_sites`` shows a progress bar."""


class Minimum(NamedTuple):
    """Outcome of ``minimize`` (arrays, with a leading batch axis under ``jax.vmap``)."""

    x: jax.Array
    """(P,) the last accepted iterate."""
    value: jax.Array
    """f(x); +inf where f was not finite."""
    grad: jax.Array
    """(P,) the gradient of f at x (zero where f was not finite)."""
    num_iterations: jax.Array
    """L-BFGS iterations (accepted line-search steps) or Adam steps taken."""
    num_evaluations: jax.Array
    """Evaluations of f and its gradient, the one at ``x0`` included."""
    grad_norm: jax.Array
    """max_i |grad_i| (0 for P = 0)."""
    converged: jax.Array
    """Whether it stopped at the gradient tolerance or the relative objective change."""
    stop_reason: jax.Array
    """Index into ``STOP_REASONS``."""


class OptimizationResult(NamedTuple):
    """Outcome of ``optimize_sites`` (host values)."""

    params: dict
    """Optimal values of the latent sites, by site name, in the constrained space."""
    objective: float
    """The maximised log density (log marginal likelihood for type-II ML)."""
    num_iterations: int
    """L-BFGS iterations or Adam steps taken."""
    grad_norm: float
    """Largest absolute gradient entry (unconstrained space) at the end."""
    converged: bool
    """Stopped at the gradient tolerance or (L-BFGS) the relative objective change."""
    num_evaluations: int
    """Evaluations of the log density and its gradient."""
    stop_reason: str
    """One of ``STOP_REASONS``."""


# ---------------------------------------------------------------------------------------------
# The minimiser: pure init/step pairs over NamedTuple state, run by one lax.while_loop


def _finite_or_inf(fun: Callable) -> tuple[Callable, Callable]:
    """``fun`` with a non-finite value (or gradient) read as +inf with gradient 0.

    Returns ``(safe, value_and_grad)``: ``safe`` is differentiable through a custom JVP
    (tangent g' dx with the safe gradient g), so the line search, which differentiates it,
    never sees NaN; ``value_and_grad`` computes both directly.
    """

    def value_and_grad(x):
        value, grad = jax.value_and_grad(fun)(x)
        ok = jnp.isfinite(value) & jnp.all(jnp.isfinite(grad))
        return jnp.where(ok, value, jnp.inf), jnp.where(ok, grad, 0.0)

    @jax.custom_jvp
    def safe(x):
        return value_and_grad(x)[0]

    @safe.defjvp
    def _safe_jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        value, grad = value_and_grad(x)
        return value, jnp.vdot(grad, dx)

    return safe, value_and_grad


def _count(value) -> jax.Array:
    """An int32 scalar (counters and stop codes keep one dtype through the loops)."""
    return jnp.asarray(value, dtype=jnp.int32)


def _grad_norm(grad):
    return jnp.max(jnp.abs(grad), initial=0.0)


class _State(NamedTuple):
    """The loop state of both optimisers (Adam counts one evaluation per step)."""

    x: jax.Array
    value: jax.Array
    grad: jax.Array
    opt_state: optax.OptState
    num_iterations: jax.Array
    num_evaluations: jax.Array
    stop: jax.Array


def _stop_code(value, grad, tol, otherwise) -> jax.Array:
    """``_NON_FINITE`` for a non-finite f, else ``_GRADIENT`` at the tolerance, else
    ``otherwise``: the tests every evaluation of f faces first."""
    return _count(jnp.where(~jnp.isfinite(value), _NON_FINITE,
                            jnp.where(_grad_norm(grad) <= tol, _GRADIENT, otherwise)))


def _to_minimum(state: _State) -> Minimum:
    return Minimum(state.x, state.value, state.grad, state.num_iterations,
                   state.num_evaluations, _grad_norm(state.grad),
                   (state.stop == _GRADIENT) | (state.stop == _OBJECTIVE), state.stop)


def _lbfgs_init(value_and_grad, x0, max_iter, tol) -> _State:
    """Evaluate f at x0; stop at once if it is not finite or already at the tolerance."""
    value, grad = value_and_grad(x0)
    stop = _stop_code(value, grad, tol, jnp.where(max_iter <= 0, _MAX_ITER, _RUNNING))
    return _State(x0, value, grad, optax.lbfgs().init(x0), _count(0), _count(1), stop)


def _lbfgs_step(safe_fun, state: _State, max_iter, tol, ftol) -> _State:
    """One L-BFGS iteration and the stopping tests of the module docstring."""
    # 1. Direction and zoom line search; the line search leaves f and g at the new point in
    #    its state (what optax.value_and_grad_from_state reads; read here directly, since
    #    under vmap that function's lax.cond becomes a select that evaluates f every time).
    updates, opt_state = optax.lbfgs().update(state.grad, state.opt_state, state.x,
                                              value=state.value, grad=state.grad,
                                              value_fn=safe_fun)
    x = optax.apply_updates(state.x, updates)
    value = optax.tree.get(opt_state, "value")
    grad = optax.tree.get(opt_state, "grad")
    steps = optax.tree.get(opt_state, "num_linesearch_steps")
    stepsize = optax.tree.get(opt_state, "learning_rate")
    # 2. Accept the step only if it lowered f (a failed zoom may return its last trial).
    accepted = (stepsize > 0) & (value <= state.value)
    iterations = state.num_iterations + _count(accepted)
    # 3. Stopping tests, SciPy's order: gradient, relative decrease, iteration cap.
    change = (state.value - value) / jnp.maximum(jnp.maximum(jnp.abs(state.value),
                                                             jnp.abs(value)), 1.0)
    stop = jnp.where(~accepted, _LINE_SEARCH,
                     jnp.where(_grad_norm(grad) <= tol, _GRADIENT,
                               jnp.where(change <= ftol, _OBJECTIVE,
                                         jnp.where(iterations >= max_iter, _MAX_ITER,
                                                   _RUNNING))))
    keep = lambda new, old: jnp.where(accepted, new, old)  # noqa: E731
    return _State(keep(x, state.x), keep(value, state.value), keep(grad, state.grad),
                  opt_state, iterations, state.num_evaluations + _count(steps), _count(stop))


def _adam_init(value_and_grad, x0, tol, learning_rate) -> _State:
    value, grad = value_and_grad(x0)
    return _State(x0, value, grad, optax.adam(learning_rate).init(x0), _count(0), _count(1),
                  _stop_code(value, grad, tol, _RUNNING))


def _adam_step(value_and_grad, state: _State, tol, learning_rate) -> _State:
    """One Adam step, then f and g at the new point and the two early stops."""
    updates, opt_state = optax.adam(learning_rate).update(state.grad, state.opt_state)
    x = optax.apply_updates(state.x, updates)
    value, grad = value_and_grad(x)
    return _State(x, value, grad, opt_state, state.num_iterations + 1,
                  state.num_evaluations + 1, _stop_code(value, grad, tol, _RUNNING))


def _adam_run(value_and_grad, state: _State, limit, max_iter, tol,
              learning_rate) -> _State:
    """Adam steps until a stop or ``limit`` steps in all; ``max_iter`` marks the last."""
    state = lax.while_loop(
        lambda s: (s.stop == _RUNNING) & (s.num_iterations < limit),
        lambda s: _adam_step(value_and_grad, s, tol, learning_rate), state)
    capped = (state.stop == _RUNNING) & (state.num_iterations >= max_iter)
    return state._replace(stop=_count(jnp.where(capped, _MAX_ITER, state.stop)))


def minimize(fun: Callable[[jax.Array], jax.Array], x0: jax.Array, *, max_iter=500,
             tol=1e-6, ftol=SCIPY_FTOL, optimizer: str = "lbfgs",
             learning_rate=0.1) -> Minimum:
    """Minimise ``fun`` from ``x0`` on the device (pure: jit- and vmap-able).

    Args:
        fun: (P,) float vector -> scalar, differentiable by JAX. It may close over traced
            values (data under ``jax.vmap``).
        x0: (P,) starting point.
        max_iter: L-BFGS iteration cap, or the number of Adam steps (may be traced).
        tol: stop once max_i |grad_i| <= tol (SciPy's ``pgtol``).
        ftol: L-BFGS stops once the relative decrease of f in an iteration is <= ftol.
        optimizer: ``"lbfgs"`` or ``"adam"`` (static).
        learning_rate: Adam's step size (ignored by L-BFGS).

    Returns:
        A ``Minimum``; ``STOP_REASONS[stop_reason]`` says why it stopped (see the module
        docstring for the tests). Under ``jax.vmap`` each member stops on its own tests.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> f = lambda x, c: jnp.sum((x - c) ** 2)
        >>> cs = jnp.array([[1.0, 2.0], [-1.0, 0.5]])
        >>> best = jax.jit(jax.vmap(lambda c: minimize(lambda x: f(x, c), jnp.zeros(2))))(cs)
        >>> bool(jnp.allclose(best.x, cs, atol=1e-6))
        True
    """
    if optimizer not in _OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose from {list(_OPTIMIZERS)}")
    x0 = jnp.asarray(x0, dtype=jnp.result_type(float))
    safe, value_and_grad = _finite_or_inf(fun)
    if optimizer == "adam":
        state = _adam_init(value_and_grad, x0, tol, learning_rate)
        return _to_minimum(_adam_run(value_and_grad, state, max_iter, max_iter, tol,
                                     learning_rate))
    state = lax.while_loop(lambda s: s.stop == _RUNNING,
                           lambda s: _lbfgs_step(safe, s, max_iter, tol, ftol),
                           _lbfgs_init(value_and_grad, x0, max_iter, tol))
    return _to_minimum(state)


# ---------------------------------------------------------------------------------------------
# The NumPyro side: the objective of a model's latent sites


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


def _latent_site_names(model, args) -> list[str]:
    """The latent site names, from an abstract trace of the model (nothing is computed)."""
    names: list[str] = []
    jax.eval_shape(lambda a: names.extend(_latent_sites(model, a)), args)
    return names


def _transforms(model, args) -> dict:
    return {name: biject_to(site["fn"].support)
            for name, site in _latent_sites(model, args).items()}


@functools.partial(jax.jit, static_argnames=("model", "include_prior"))
def _negative_log_density(u: dict, args: tuple, model, include_prior: bool):
    transforms = _transforms(model, args)
    params = {name: transforms[name](value) for name, value in u.items()}
    return -log_density_terms(model, args, params, include_prior)


_value_and_grad = jax.jit(
    jax.value_and_grad(_negative_log_density), static_argnames=("model", "include_prior")
)


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


_SITES_STATIC = ("model", "include_prior")

_fit_sites = jax.jit(minimize_sites, static_argnames=_SITES_STATIC + ("optimizer",))


@functools.partial(jax.jit, static_argnames=_SITES_STATIC)
def _adam_sites_init(init_values, args, tol, learning_rate, *, model, include_prior):
    fun, x0, _ = _site_objective(model, init_values, args, include_prior)
    return _adam_init(_finite_or_inf(fun)[1], x0, tol, learning_rate)


@functools.partial(jax.jit, static_argnames=_SITES_STATIC)
def _adam_sites_window(state, init_values, args, limit, max_iter, tol, learning_rate, *,
                       model, include_prior):
    """Adam steps up to ``limit``; (state, constrained params, Minimum so far)."""
    fun, _, to_params = _site_objective(model, init_values, args, include_prior)
    state = _adam_run(_finite_or_inf(fun)[1], state, limit, max_iter, tol, learning_rate)
    return state, to_params(state.x), _to_minimum(state)


def _adam_with_progress(init_values, args, max_iter, tol, learning_rate, model,
                        include_prior):
    """Adam in windows of ``ADAM_WINDOW`` steps, a tqdm bar updated between them."""
    from tqdm.auto import tqdm

    static = dict(model=model, include_prior=include_prior)
    state = _adam_sites_init(init_values, args, tol, learning_rate, **static)
    limit, taken = 0, 0
    with tqdm(total=max_iter, desc="Adam", leave=False) as bar:
        while True:
            limit = min(limit + ADAM_WINDOW, max_iter)
            state, params, best = _adam_sites_window(state, init_values, args, limit,
                                                     max_iter, tol, learning_rate, **static)
            steps, stop = int(best.num_iterations), int(best.stop_reason)
            bar.update(steps - taken)
            bar.set_postfix(objective=f"{-float(best.value):.6g}", refresh=False)
            taken = steps
            if stop != _RUNNING:
                return params, best


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

    One jitted device call runs the whole optimisation (``minimize_sites``); it is compiled
    once per model, ``include_prior``, ``optimizer`` and array shapes, and the model's data
    are traced, so a refit on new data of the same shape compiles nothing.

    Args:
        model: NumPyro model called as ``model(*args)``; its latent sites are the parameters.
            It must be hashable (a module-level function): the compiled optimiser is cached
            on it.
        init_values: starting values by site name (constrained space); must name every
            latent site.
        args: the model's arguments (arrays and static pytrees such as kernels).
        include_prior: MAP (True) or type-II ML (False).
        max_iter: L-BFGS iteration cap, or the number of Adam steps.
        tol: gradient tolerance in the unconstrained space (L-BFGS-B's ``pgtol``: both
            optimisers stop once the largest gradient entry is below it).
        optimizer: ``"lbfgs"`` (runs to convergence, see the module docstring) or ``"adam"``
            (up to ``max_iter`` steps of ``optax.adam(learning_rate)``, returning the last
            iterate; a non-finite objective stops the run with an error).
        learning_rate: Adam's step size in the unconstrained space (ignored by L-BFGS).
        progress_bar: Adam shows the steps with the running objective (tqdm, stderr),
            updated every ``ADAM_WINDOW`` steps; L-BFGS runs as one device call, so it
            writes a line when it starts and one with its iterations and time when it ends
            (``ppgpc.progress``). False writes nothing.

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
    if optimizer not in _OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose from {list(_OPTIMIZERS)}")
    max_iter = check_count("max_iter", max_iter)   # Adam took no step for max_iter < 1
    learning_rate = check_positive("learning_rate", learning_rate)
    sites = _latent_site_names(model, args)
    missing = sorted(set(sites) - set(init_values))
    extra = sorted(set(init_values) - set(sites))
    if missing or extra:
        raise ValueError(
            f"init_values must name exactly the latent sites {sorted(sites)}; "
            f"missing {missing}, unknown {extra}"
        )
    init = {name: jnp.asarray(init_values[name], dtype=jnp.result_type(float))
            for name in sites}
    scalars = dict(max_iter=max_iter, tol=float(tol), ftol=SCIPY_FTOL,
                   learning_rate=learning_rate)
    timer = Timer()
    if optimizer == "adam" and progress_bar:
        params, best = _adam_with_progress(init, args, scalars["max_iter"], scalars["tol"],
                                           scalars["learning_rate"], model, include_prior)
    else:
        note(f"L-BFGS: {'type-II MAP' if include_prior else 'type-II ML'} of "
             f"{len(sites)} site(s) ...", progress_bar)
        params, best = _fit_sites(model, init, args, include_prior=include_prior,
                                  optimizer=optimizer, **scalars)
    best = jax.device_get(best)
    note(f"{optimizer}: {int(best.num_iterations)} iterations, objective "
         f"{-float(best.value):.6g}, {timer}", progress_bar)
    stop = STOP_REASONS[int(best.stop_reason)]
    if stop == "non-finite objective" and optimizer == "adam":
        raise ValueError(
            f"the log density became non-finite after {int(best.num_iterations)} Adam steps: "
            "the kernel matrix could not be factorised even with jitter, or a parameter left "
            "the region of finite density. Lower learning_rate or max_iter, or check the "
            "inputs for duplicates or extreme scales."
        )
    if not np.isfinite(best.value):
        raise ValueError(
            "the optimised log density is not finite: the kernel matrix could not be "
            "factorised even with jitter. Check the inputs for duplicates or extreme scales, "
            "or pass hyperparameters explicitly."
        )
    return OptimizationResult(
        params=params,
        objective=-float(best.value),
        num_iterations=int(best.num_iterations),
        grad_norm=float(best.grad_norm),
        converged=bool(best.converged),
        num_evaluations=int(best.num_evaluations),
        stop_reason=stop,
    )
