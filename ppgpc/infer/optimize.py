"""The device-side minimiser behind the point estimates of ``ppgpc.infer.sites``.

The minimiser, ``minimize``, works on f(u) = -(that log density) over the flattened
unconstrained parameters u, and runs entirely on the device: one ``lax.while_loop``, no
value crossing to the host between iterations, so it can be jitted and vmapped (over
starting points, or over the data a model closes over: a whole type-II fit per target
vector, ``ppgpc.infer.sites.minimize_sites``).

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
  the first non-finite objective (``"non-finite objective"``; ``ppgpc.infer.sites.optimize_sites``
  then raises with the number of steps taken).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax import lax


__all__ = ["Minimum", "STOP_REASONS", "SCIPY_FTOL", "ADAM_WINDOW", "OPTIMIZERS", "RUNNING",
           "minimize", "OptimizationResult", "finite_or_inf", "to_minimum", "adam_init",
           "adam_run"]

STOP_REASONS = ("gradient tolerance", "relative objective change", "max_iter",
                "line search failure", "non-finite objective")
"""Why ``minimize`` stopped, indexed by ``Minimum.stop_reason``; the first two are convergence."""

_GRADIENT, _OBJECTIVE, _MAX_ITER, _LINE_SEARCH, _NON_FINITE = range(len(STOP_REASONS))
RUNNING = -1
OPTIMIZERS = ("lbfgs", "adam")
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


def finite_or_inf(fun: Callable) -> tuple[Callable, Callable]:
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


def to_minimum(state: _State) -> Minimum:
    return Minimum(state.x, state.value, state.grad, state.num_iterations,
                   state.num_evaluations, _grad_norm(state.grad),
                   (state.stop == _GRADIENT) | (state.stop == _OBJECTIVE), state.stop)


def _lbfgs_init(value_and_grad, x0, max_iter, tol) -> _State:
    """Evaluate f at x0; stop at once if it is not finite or already at the tolerance."""
    value, grad = value_and_grad(x0)
    stop = _stop_code(value, grad, tol, jnp.where(max_iter <= 0, _MAX_ITER, RUNNING))
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
                                                   RUNNING))))
    keep = lambda new, old: jnp.where(accepted, new, old)  # noqa: E731
    return _State(keep(x, state.x), keep(value, state.value), keep(grad, state.grad),
                  opt_state, iterations, state.num_evaluations + _count(steps), _count(stop))


def adam_init(value_and_grad, x0, tol, learning_rate) -> _State:
    value, grad = value_and_grad(x0)
    return _State(x0, value, grad, optax.adam(learning_rate).init(x0), _count(0), _count(1),
                  _stop_code(value, grad, tol, RUNNING))


def _adam_step(value_and_grad, state: _State, tol, learning_rate) -> _State:
    """One Adam step, then f and g at the new point and the two early stops."""
    updates, opt_state = optax.adam(learning_rate).update(state.grad, state.opt_state)
    x = optax.apply_updates(state.x, updates)
    value, grad = value_and_grad(x)
    return _State(x, value, grad, opt_state, state.num_iterations + 1,
                  state.num_evaluations + 1, _stop_code(value, grad, tol, RUNNING))


def adam_run(value_and_grad, state: _State, limit, max_iter, tol,
              learning_rate) -> _State:
    """Adam steps until a stop or ``limit`` steps in all; ``max_iter`` marks the last."""
    state = lax.while_loop(
        lambda s: (s.stop == RUNNING) & (s.num_iterations < limit),
        lambda s: _adam_step(value_and_grad, s, tol, learning_rate), state)
    capped = (state.stop == RUNNING) & (state.num_iterations >= max_iter)
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
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose from {list(OPTIMIZERS)}")
    x0 = jnp.asarray(x0, dtype=jnp.result_type(float))
    safe, value_and_grad = finite_or_inf(fun)
    if optimizer == "adam":
        state = adam_init(value_and_grad, x0, tol, learning_rate)
        return to_minimum(adam_run(value_and_grad, state, max_iter, max_iter, tol,
                                     learning_rate))
    state = lax.while_loop(lambda s: s.stop == RUNNING,
                           lambda s: _lbfgs_step(safe, s, max_iter, tol, ftol),
                           _lbfgs_init(value_and_grad, x0, max_iter, tol))
    return to_minimum(state)


# ---------------------------------------------------------------------------------------------
# The NumPyro side: the objective of a model's latent sites
