"""The device-side minimiser behind the point estimates of ``ppgpc.infer.sites``.

The minimiser, ``minimize``, works on f(u) = -(that log density) over the flattened
unconstrained parameters u, and runs entirely on the device: one ``lax.while_loop``, no
value crossing to the host between iterations, so it can be jitted and vmapped (over
starting points, or over the data a model closes over: a whole type-II fit per target
vector, ``ppgpc.infer.sites.minimize_sites``).

* L-BFGS (the default; memory 10 as SciPy's L-BFGS-B): the two-loop recursion over the last
  pairs s_k = u_{k+1} - u_k, y_k = g_{k+1} - g_k (a pair kept only where s_k' y_k > 0) gives
  the direction d_k = -H_k g_k, with H_0 = (s'y / y'y) I from the newest pair (Nocedal &
  Wright, Algorithm 7.4); the first direction is -g_0, tried first at step 1 / |g_0| as
  SciPy does, every later one at step 1. The line search (Nocedal & Wright, Algorithms
  3.5-3.6: the step doubles until a bracket is found, then cubic interpolation between
  its ends, bisection where the cubic has no minimiser inside) finds a step eta_k with

      f(u_k + eta d_k) <= f(u_k) + 1e-4 eta g_k' d_k,   |g(u_k + eta d_k)' d_k| <= 0.9 |g_k' d_k|

  within 20 evaluations, or else takes the lowest step that met the first condition;
  u_{k+1} = u_k + eta_k d_k. The whole of it is one state machine in one
  ``lax.while_loop`` whose body evaluates f and its gradient once, at the current trial
  point, so that the compiled program holds one copy of the objective and its gradient
  (a line search with separate bracketing and zoom branches and a first evaluation outside
  the loop holds three, and XLA compiles each copy). The loop stops at the first of,
  checked after every iteration in this order (SciPy's L-BFGS-B tests and order):

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


__all__ = ["Minimum", "STOP_REASONS", "SCIPY_FTOL", "OPTIMIZERS", "RUNNING",
           "minimize", "OptimizationResult", "finite_or_inf", "to_minimum", "adam_init",
           "adam_run", "lbfgs_init", "lbfgs_run"]

STOP_REASONS = ("gradient tolerance", "relative objective change", "max_iter",
                "line search failure", "non-finite objective")
"""Why ``minimize`` stopped, indexed by ``Minimum.stop_reason``; the first two are convergence."""

_GRADIENT, _OBJECTIVE, _MAX_ITER, _LINE_SEARCH, _NON_FINITE = range(len(STOP_REASONS))
RUNNING = -1
"""``Minimum.stop_reason`` of a run that has not stopped yet (a window of Adam steps)."""
OPTIMIZERS = ("lbfgs", "adam")
"""The ``optimizer`` settings of ``minimize``."""
SCIPY_FTOL = 2.220446049250313e-09
"""SciPy's default relative objective tolerance of L-BFGS-B (factr = 1e7 times eps)."""


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


def finite_or_inf(fun: Callable) -> Callable:
    """``x -> (f(x), grad f(x))`` with a non-finite value (or gradient) read as +inf with
    gradient 0, so that the optimisers never carry NaN into their state."""

    def value_and_grad(x):
        value, grad = jax.value_and_grad(fun)(x)
        ok = jnp.isfinite(value) & jnp.all(jnp.isfinite(grad))
        return jnp.where(ok, value, jnp.inf), jnp.where(ok, grad, 0.0)

    return value_and_grad


def _count(value) -> jax.Array:
    """An int32 scalar (counters and stop codes keep one dtype through the loops)."""
    return jnp.asarray(value, dtype=jnp.int32)


def _grad_norm(grad):
    return jnp.max(jnp.abs(grad), initial=0.0)


class _State(NamedTuple):
    """Adam's loop state (one evaluation per step)."""

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
    """The ``Minimum`` of an optimiser state: its iterate, value, gradient and counts, the
    gradient's max-norm and whether it stopped converged."""
    return Minimum(state.x, state.value, state.grad, state.num_iterations,
                   state.num_evaluations, _grad_norm(state.grad),
                   (state.stop == _GRADIENT) | (state.stop == _OBJECTIVE), state.stop)


MEMORY = 10
"""Curvature pairs L-BFGS keeps (SciPy's L-BFGS-B default, m = 10)."""
ARMIJO, CURVATURE = 1e-4, 0.9
"""The strong Wolfe constants c1, c2 of the line search (Nocedal & Wright's for quasi-Newton
methods, SciPy's and optax's)."""
MAX_LINE_SEARCH = 20
"""Evaluations one line search may take (SciPy's L-BFGS-B ``maxls``)."""
_INIT, _BRACKET, _ZOOM = 0, 1, 2


class _LbfgsState(NamedTuple):
    """L-BFGS with its line search as one state machine: every loop iteration evaluates f
    and its gradient once, at x + t d (``_lbfgs_iteration``)."""

    x: jax.Array            # (P,) the last accepted iterate u_k
    value: jax.Array        # f(u_k)
    grad: jax.Array         # (P,) g_k
    direction: jax.Array    # (P,) d_k
    slope: jax.Array        # g_k' d_k (< 0)
    s: jax.Array            # (MEMORY, P) curvature pairs s_i, ring buffer
    y: jax.Array            # (MEMORY, P) y_i
    rho: jax.Array          # (MEMORY,) 1 / y_i' s_i, 0 in an empty slot
    pairs: jax.Array        # pairs stored so far (the next goes to slot pairs % MEMORY)
    phase: jax.Array        # _INIT, _BRACKET or _ZOOM
    step: jax.Array         # the trial step t
    lo_step: jax.Array      # the lowest step found so far satisfying the Armijo condition
    lo_value: jax.Array
    lo_slope: jax.Array
    lo_grad: jax.Array      # (P,)
    hi_step: jax.Array      # the other end of the zoom interval (phase _ZOOM)
    hi_value: jax.Array
    hi_slope: jax.Array
    trials: jax.Array       # evaluations of the current line search
    num_iterations: jax.Array
    num_evaluations: jax.Array
    stop: jax.Array


def _two_loop(state: _LbfgsState, grad) -> jax.Array:
    """-H_k g by the two-loop recursion over the stored pairs (Nocedal & Wright, Algorithm
    7.4), newest first, with H_0 = (s'y / y'y) I from the newest pair; an empty slot has
    rho = 0 and changes nothing."""
    newest = (state.pairs - 1) % MEMORY

    def backward(i, carry):
        q, alphas = carry
        j = (newest - i) % MEMORY
        alpha = state.rho[j] * jnp.vdot(state.s[j], q)
        return q - alpha * state.y[j], alphas.at[j].set(alpha)

    q, alphas = lax.fori_loop(0, MEMORY, backward, (grad, jnp.zeros(MEMORY, grad.dtype)))
    y_new = state.y[newest]
    gamma = jnp.where(state.pairs > 0,
                      jnp.vdot(state.s[newest], y_new) / jnp.maximum(jnp.vdot(y_new, y_new),
                                                                    jnp.finfo(grad.dtype).tiny),
                      1.0)
    r = gamma * q

    def forward(i, r):
        j = (newest - (MEMORY - 1 - i)) % MEMORY
        beta = state.rho[j] * jnp.vdot(state.y[j], r)
        return r + (alphas[j] - beta) * state.s[j]

    return -lax.fori_loop(0, MEMORY, forward, r)


def _cubic_step(a, fa, ga, b, fb, gb):
    """The minimiser of the cubic through (a, fa, ga) and (b, fb, gb) (Nocedal & Wright,
    (3.59)), kept inside the middle 80% of [a, b]; bisection where the cubic has none there
    (or an end is not finite)."""
    d1 = ga + gb - 3.0 * (fa - fb) / (a - b)
    d2 = jnp.sign(b - a) * jnp.sqrt(jnp.maximum(d1 * d1 - ga * gb, 0.0))
    t = b - (b - a) * (gb + d2 - d1) / (gb - ga + 2.0 * d2)
    low, high = jnp.minimum(a, b), jnp.maximum(a, b)
    margin = 0.1 * (high - low)
    inside = jnp.isfinite(t) & (t >= low + margin) & (t <= high - margin) \
        & (d1 * d1 - ga * gb >= 0.0)
    return jnp.where(inside, t, 0.5 * (a + b))


def lbfgs_init(x0) -> _LbfgsState:
    """The state whose first iteration evaluates f at x0 (step 0 along a zero direction)."""
    zero, vec = jnp.zeros((), x0.dtype), jnp.zeros_like(x0)
    mem = jnp.zeros((MEMORY, x0.shape[0]), x0.dtype)
    return _LbfgsState(x0, zero, vec, vec, zero, mem, mem, jnp.zeros(MEMORY, x0.dtype),
                       _count(0), _count(_INIT), zero, zero, zero, zero, vec, zero, zero, zero,
                       _count(0), _count(0), _count(0), _count(RUNNING))


def _new_search(state: _LbfgsState, x, value, grad, direction, step) -> _LbfgsState:
    """Start a line search from x along ``direction`` at trial step ``step``."""
    slope = jnp.vdot(grad, direction)
    return state._replace(x=x, value=value, grad=grad, direction=direction, slope=slope,
                          phase=_count(_BRACKET), step=step, lo_step=jnp.zeros_like(step),
                          lo_value=value, lo_slope=slope, lo_grad=grad, trials=_count(0))


def _line_search_trial(state: _LbfgsState, value, grad):
    """(wolfe, exhausted, the search moved on) after f and g at x + t d, t = ``state.step``:
    hi takes a t that is too high; else t becomes lo, and the old lo becomes hi where the
    slope at t points back to it (hi is at +infinity while bracketing)."""
    t = state.step
    slope = jnp.vdot(grad, state.direction)
    zooming = state.phase == _ZOOM
    armijo = value <= state.value + ARMIJO * t * state.slope
    high = ~armijo | (value >= state.lo_value)
    wolfe = ~high & (jnp.abs(slope) <= -CURVATURE * state.slope)
    move_lo = ~high & ~wolfe
    flip = move_lo & jnp.where(zooming, slope * (state.hi_step - state.lo_step) >= 0,
                               slope >= 0)
    hi_step = jnp.where(high, t, jnp.where(flip, state.lo_step, state.hi_step))
    hi_value = jnp.where(high, value, jnp.where(flip, state.lo_value, state.hi_value))
    hi_slope = jnp.where(high, slope, jnp.where(flip, state.lo_slope, state.hi_slope))
    lo_step = jnp.where(move_lo, t, state.lo_step)
    lo_value = jnp.where(move_lo, value, state.lo_value)
    lo_slope = jnp.where(move_lo, slope, state.lo_slope)
    now_zooming = zooming | high | flip
    next_step = jnp.where(now_zooming,
                          _cubic_step(lo_step, lo_value, lo_slope, hi_step, hi_value, hi_slope),
                          2.0 * t)
    trials = state.trials + 1
    searching = state._replace(
        phase=_count(jnp.where(now_zooming, _ZOOM, _BRACKET)), step=next_step,
        lo_step=lo_step, lo_value=lo_value, lo_slope=lo_slope,
        lo_grad=jnp.where(move_lo, grad, state.lo_grad), hi_step=hi_step, hi_value=hi_value,
        hi_slope=hi_slope, trials=_count(trials))
    return wolfe, ~wolfe & (trials >= MAX_LINE_SEARCH), searching


def _store_pair(state: _LbfgsState, s_k, y_k) -> _LbfgsState:
    """The pair (s_k, y_k) (P,) stored in slot ``pairs % MEMORY`` with rho = 1 / s'y, where
    s'y > eps y'y (keeping H_k positive definite); otherwise the state as it is."""
    sy = jnp.vdot(s_k, y_k)
    store = sy > jnp.finfo(sy.dtype).eps * jnp.vdot(y_k, y_k)
    slot = state.pairs % MEMORY
    return state._replace(
        s=jnp.where(store, state.s.at[slot].set(s_k), state.s),
        y=jnp.where(store, state.y.at[slot].set(y_k), state.y),
        rho=jnp.where(store, state.rho.at[slot].set(1.0 / jnp.where(store, sy, 1.0)),
                      state.rho),
        pairs=_count(state.pairs + store))


def _take_step(state: _LbfgsState, searching: _LbfgsState, wolfe, value, grad, max_iter,
               tol, ftol) -> _LbfgsState:
    """The next search from the step taken (t where it met the Wolfe conditions, else the
    lowest Armijo step), with its pair stored, its direction and its stop code."""
    new_value = jnp.where(wolfe, value, searching.lo_value)
    new_grad = jnp.where(wolfe, grad, searching.lo_grad)
    x_new = state.x + jnp.where(wolfe, state.step, searching.lo_step) * state.direction
    memory = _store_pair(state, x_new - state.x, new_grad - state.grad)
    direction = _two_loop(memory, new_grad)
    direction = jnp.where(jnp.vdot(direction, new_grad) < 0, direction, -new_grad)
    iterations = state.num_iterations + 1
    change = (state.value - new_value) / jnp.maximum(
        jnp.maximum(jnp.abs(state.value), jnp.abs(new_value)), 1.0)
    stop = jnp.where(_grad_norm(new_grad) <= tol, _GRADIENT,
                     jnp.where(change <= ftol, _OBJECTIVE,
                               jnp.where(iterations >= max_iter, _MAX_ITER, RUNNING)))
    return _new_search(memory, x_new, new_value, new_grad, direction,
                       jnp.ones_like(state.step))._replace(num_iterations=_count(iterations),
                                                           stop=_count(stop))


def _lbfgs_iteration(value_and_grad, state: _LbfgsState, max_iter, tol, ftol) -> _LbfgsState:
    """One evaluation of f and g at x + t d, then the line search's next move (Nocedal &
    Wright, Algorithms 3.5 and 3.6, as one state machine): accept t (strong Wolfe), narrow
    or open the bracket and choose the next t, or, once a step is accepted, store the pair,
    test the stopping rules of the module docstring and take the next direction; a search
    that ran out with no Armijo step at all stops as a line-search failure."""
    value, grad = value_and_grad(state.x + state.step * state.direction)
    counted = {"num_evaluations": state.num_evaluations + 1}
    # the first evaluation, at x0: steepest descent, first step min(1, 1 / |g|) (SciPy's)
    started = _new_search(state, state.x, value, grad, -grad, jnp.minimum(
        1.0, 1.0 / jnp.maximum(jnp.linalg.norm(grad), jnp.finfo(grad.dtype).tiny)))._replace(
        stop=_count(_stop_code(value, grad, tol, jnp.where(max_iter <= 0, _MAX_ITER, RUNNING))),
        **counted)
    wolfe, exhausted, searching = _line_search_trial(state, value, grad)
    stepped = _take_step(state, searching, wolfe, value, grad, max_iter, tol, ftol)
    failed = exhausted & (searching.lo_step <= 0)
    done = (wolfe | exhausted) & ~failed
    after = jax.tree.map(lambda a, b, c: jnp.where(done, a, jnp.where(failed, b, c)),
                         stepped._replace(**counted),
                         state._replace(stop=_count(_LINE_SEARCH), **counted),
                         searching._replace(**counted))
    return jax.tree.map(lambda a, b: jnp.where(state.phase == _INIT, a, b), started, after)


def lbfgs_run(value_and_grad, state: _LbfgsState, limit, max_iter, tol, ftol) -> _LbfgsState:
    """L-BFGS iterations from ``state`` until a stop, or until ``limit`` iterations in all
    have been taken (counted from the start, ``lbfgs_init``), whichever comes first.

    The loop halts between iterations only, where the state holds the next search direction
    and nothing else in flight, so runs resumed window by window (``limit`` raised each
    time) take exactly the steps of one run with ``limit = max_iter``: the same program
    with the same state, bit for bit. ``max_iter`` is the stopping rule, ``limit`` only the
    window's end.
    """
    return lax.while_loop(
        lambda s: (s.stop == RUNNING) & (s.num_iterations < limit),
        lambda s: _lbfgs_iteration(value_and_grad, s, max_iter, tol, ftol), state)


def adam_init(value_and_grad, x0, tol, learning_rate) -> _State:
    """Adam's state at ``x0`` (one evaluation of ``value_and_grad``), stopped already where
    the gradient there is within ``tol`` or the value is not finite (``adam_run`` steps it)."""
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


def adam_run(value_and_grad, state: _State, limit, max_iter, tol, learning_rate) -> _State:
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
    value_and_grad = finite_or_inf(fun)
    if optimizer == "adam":
        state = adam_init(value_and_grad, x0, tol, learning_rate)
        return to_minimum(adam_run(value_and_grad, state, max_iter, max_iter, tol, learning_rate))
    return to_minimum(lbfgs_run(value_and_grad, lbfgs_init(x0), max_iter, max_iter, tol, ftol))
