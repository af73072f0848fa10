"""MCMC that runs as long as its own convergence check needs.

Chains are stepped in compiled windows of ``WINDOW`` transitions (one ``lax.scan`` per
chain): on a CPU one program per chain, the chains side by side, one per core
(``ppgpc.runtime.chains``); on an accelerator all chains in one program (``over_chains``).
When the draws per chain reach a checkpoint (``CHECKPOINTS``: 100, 200, 300, 500, 800,
...; and the floor a user asked for), the rank-normalised R-hat and the bulk and tail ESS
of the draws so far are computed
(``ppgpc.infer.convergence.chain_check``), and the run stops as soon as they pass (R-hat
below ``RHAT_MAX`` = 1.01, ESS of at least ``ESS_PER_CHAIN_MIN`` = 100 per chain; Vehtari
et al. 2021, section 4), or at the cap. The same chains continue from window to window:
nothing is warmed up twice and nothing compiles again.

Two samplers share the loop (``sample_windows``):

* NUTS (``run_nuts``): NumPyro's multinomial NUTS trajectory (``build_tree``) on a
  potential built inside the compiled program from the model's arguments: the data, the
  kernel, fixed hyperparameters and, where the hyperparameters are fixed, the Cholesky
  factor of the prior computed once before the run (so no gradient recomputes it). The
  programs are built once per process for a model function and a setting of NUTS
  (``_nuts_programs``) and take the data as arguments, so every data set of a bucket's
  shape reuses them. Warm-up adapts the step size and a diagonal (or dense) mass matrix
  from the draws on nutpie's schedule (``ppgpc.infer.adaptation``) inside the same window
  program: the transition index and the warm-up length are values of the chains' state, so
  a new ``num_warmup`` compiles nothing. ``num_warmup`` is the most warm-up: between
  windows the host reads the adaptation, and once it has settled (the mass matrix and the
  acceptance stable over two consecutive windows, ``ppgpc.infer.adaptation.warmup_settled``)
  it lowers the state's warm-up length so that the next window is the last, the schedule's
  step-size-only phase at its end.
* A model's own Gibbs sampler (``ppgpc.infer.gibbs``): its pure ``init``/``step`` pair, the
  same windows.

Sample statistics are named as ArviZ names them (diverging, n_steps, tree_depth,
acceptance_rate, energy, lp, step_size for NUTS).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.flatten_util import ravel_pytree
from numpyro.infer import init_to_median, init_to_value
from numpyro.infer.hmc_util import (
    IntegratorState,
    build_tree,
    euclidean_kinetic_energy,
    velocity_verlet,
)
from numpyro.infer.util import constrain_fn, initialize_model, potential_energy

from ppgpc.infer.adaptation import (
    INITIAL_STEP_SIZE,
    Adaptation,
    adaptation_init,
    adaptation_update,
    find_step_size,
    momentum,
    restart_step_size,
    warmup_settled,
    warmup_window,
)
from ppgpc.infer.convergence import ChainCheck, chain_check
from ppgpc.infer.records import SamplerInfo
from ppgpc.runtime.chains import chain_windows
from ppgpc.runtime.programs import jit
from ppgpc.runtime.loop import Window, run_windows

__all__ = ["MCMCOutput", "run_nuts", "sample_windows", "over_chains",
           "chain_keys", "WINDOW", "DEFAULT_MAX_SAMPLES", "draw_limits", "CHECKPOINTS",
           "checkpoints"]

SETTLED_END = True
"""NUTS's warm-up ends once its adaptation has settled, at most ``num_warmup`` transitions
(``_SettledWarmup``); False: it runs ``num_warmup`` transitions (what
``benchmarks/nuts_ess_rate.py`` compares against)."""

WINDOW = 100
"""Transitions (draws per chain) of one compiled window; every checkpoint is a whole number
of windows after the warm-up (when the warm-up is one)."""

DEFAULT_MAX_SAMPLES = 2000
"""Draws per chain at which a run stops whether or not its check passed (it then warns)."""


class MCMCOutput(NamedTuple):
    """Draws and statistics of an MCMC run, every array shaped (chain, draw, ...)."""

    samples: dict
    """Sample and deterministic sites by name."""
    sample_stats: dict
    """ArviZ names: diverging, tree_depth, n_steps, acceptance_rate, energy, lp, step_size."""
    sampler: SamplerInfo
    """How the run went: draws kept, warm-up, why it stopped, divergences."""
    check: ChainCheck | None
    """The loop's last check of the draws ``checked`` returned (None: it never ran)."""


def draw_limits(num_samples, max_samples) -> tuple[int, int]:
    """(floor, cap) of the draws per chain: ``num_samples`` (None: one window of
    ``WINDOW``) is the floor, ``max_samples`` (None: ``DEFAULT_MAX_SAMPLES``) the cap,
    raised to the floor when it is lower."""
    floor = WINDOW if num_samples is None else int(num_samples)
    cap = DEFAULT_MAX_SAMPLES if max_samples is None else int(max_samples)
    return floor, max(cap, floor)


CHECKPOINTS = (100, 200, 300, 500, 800, 1200, 2000, 3000, 5000, 8000)
"""Draws per chain at which a run checks convergence (besides its floor and cap), growing
by about half each time: a run keeps one of these few numbers of draws, so the programs
that read its draws (predictions, exports) compile for a handful of shapes, not for every
window; and it overshoots the draws its check needs by at most about half."""


def checkpoints(floor: int, cap: int) -> tuple[int, ...]:
    """The draws per chain at which a run with this floor and cap checks convergence."""
    return tuple(sorted({c for c in CHECKPOINTS if floor <= c <= cap} | {floor, cap}))


def chain_keys(key: jax.Array, num_chains: int) -> jax.Array:
    """(num_chains,) keys, chain c's ``fold_in(key, c)``."""
    return jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(num_chains))


def over_chains(fn: Callable, states):
    """``fn`` applied to every chain's state (leading axis), all in one program: one chain
    after another (``lax.map``) on a CPU, where a batch of NUTS chains waits at every
    transition for its longest trajectory and batching gains little (docs/records/speed.md;
    a CPU runs this program only where the per-chain one cannot run side by side,
    ``ppgpc.runtime.chains``); vmapped on an accelerator."""
    if jax.default_backend() == "cpu":
        return lax.map(fn, states)
    return jax.vmap(fn)(states)


def _whole(transitions: int) -> int:
    """Transitions of the whole windows that run ``transitions``."""
    return -(-transitions // WINDOW) * WINDOW


def _concat(chunks: list) -> dict:
    return {k: np.concatenate([c[k] for c in chunks], axis=1) for k in chunks[0]}


def _first(tree: dict, count: int) -> dict:
    """The first ``count`` draws of every (chain, draw, ...) array of ``tree``."""
    return {k: v[:, :count] for k, v in tree.items()}


def _after(tree, start: int, stop: int):
    """Draws ``start:stop`` of every (chain, draw, ...) array of ``tree``, on the host."""
    return {k: np.asarray(v)[:, start:stop] for k, v in jax.device_get(tree).items()}


def sample_windows(window_fn: Callable, states, args, *, num_warmup: int, num_samples,
                   max_samples, checked: Callable[[dict], dict], desc: str,
                   progress: bool, chain_fn: Callable | None = None,
                   settle: Callable | None = None
                   ) -> tuple[dict, dict, SamplerInfo, ChainCheck | None]:
    """Run ``window_fn`` until the chains pass their check.

    The transitions form one stream per chain: the first ``num_warmup`` are discarded, the
    rest are draws. When the draws reach a checkpoint (``checkpoints``: the floor, the
    ``CHECKPOINTS`` between floor and cap, the cap), the convergence check
    (``ppgpc.infer.convergence.chain_check``) runs on the draws up to it, while the device
    already runs the next window; when it passes, or at the cap, the run keeps exactly the
    checkpoint's draws. On a CPU, when ``chain_fn`` is given, the chains' windows run side
    by side, one chain per core (``ppgpc.runtime.chains``); the draws are those of the
    chains run one after another.

    Args:
        window_fn: ``(states, args) -> (states, (draws, stats))``, ``WINDOW`` transitions of
            every chain; draws and stats are dicts of (chain, WINDOW, ...) arrays.
        states: the chains' states (a pytree with a leading chain axis).
        args: the data the program takes as its argument.
        num_warmup: transitions discarded first.
        num_samples, max_samples: floor and cap of the kept draws per chain
            (``draw_limits``).
        checked: ``draws -> {name: (chain, draw, ...)}``, what the check looks at.
        desc, progress: the progress bar's label and whether to show it.
        chain_fn: ``(state, args) -> (state, (draws, stats))``, the window of one chain
            (no chain axis, jitted), run per chain on a CPU (None: ``window_fn``
            everywhere; ``ppgpc.runtime.chains.chain_windows`` says when it is not used).
        settle: ``(states, stats, done) -> states or None``, asked after every warm-up
            window that ends ``done`` transitions in while more than one warm-up window is
            left (``stats`` that window's statistics on the host): states whose warm-up
            ends after the next window, or None to go on (None: the warm-up is
            ``num_warmup``). NUTS's ``_SettledWarmup``.

    Returns:
        (draws, stats, sampler, check): the kept draws and statistics by name, how the run
        ended (its ``SamplerInfo``, divergences aside, its warm-up the one run) and its
        last ``ChainCheck``.
    """
    floor, cap = draw_limits(num_samples, max_samples)
    stops = list(checkpoints(floor, cap))
    num_warmup = int(num_warmup)
    draws, stats = [], []
    done = drawn = 0          # transitions run, draws kept so far
    kept = last = pending = None  # the last checkpoint and its check; the window running

    def window(_, __):
        # the chains' states travel in ``pending``, the window already started
        nonlocal done, drawn, kept, last, pending, num_warmup
        states, (d, s) = pending()
        start_draw = min(max(num_warmup - done, 0), WINDOW)
        done += WINDOW
        if start_draw < WINDOW:
            draws.append(_after(d, start_draw, WINDOW))
            stats.append(_after(s, start_draw, WINDOW))
            drawn += WINDOW - start_draw
        elif settle is not None and done + WINDOW < num_warmup:
            shortened = settle(states, _after(s, 0, WINDOW), done)
            if shortened is not None:
                states, num_warmup = shortened, done + WINDOW
        # the next window runs while the host checks the draws
        pending = start(states, args) if drawn < cap else None
        if start_draw == WINDOW:  # warm-up only
            jax.block_until_ready(d)
        postfix, stop = {}, None
        while stops and drawn >= stops[0]:
            kept = stops.pop(0)
            last = chain_check(checked(_first(_concat(draws), kept)))
            ess = min(last.min_ess_bulk, last.min_ess_tail)
            postfix = {"R-hat": f"{last.max_rhat:.3f}", "ESS": f"{ess:.0f}"}
            if last.mixed:
                stop, stops[:] = "converged", []
        if stop is None and not stops:
            stop = "max_samples"
        return None, Window(WINDOW, postfix, stop,
                            None if stop or not stops else _whole(num_warmup + stops[0]))

    with chain_windows(window_fn, chain_fn, states, args) as (states, start):
        pending = start(states, args)
        try:
            _, stopped = run_windows(
                window, None, cap=num_warmup + cap + WINDOW, size=WINDOW, desc=desc,
                unit="draw", progress=progress, cap_reason="max_samples",
                total=_whole(num_warmup + stops[0]))
        finally:
            if pending is not None:
                # let the next window finish before anything else runs: two programs with
                # batched LAPACK calls at once can deadlock XLA's CPU pool (jaxlib 0.10;
                # docs/records/speed.md)
                jax.block_until_ready(pending())
    draws, stats = _first(_concat(draws), kept), _first(_concat(stats), kept)
    sampler = SamplerInfo(num_draws=int(kept), stop_reason=stopped.reason,
                          num_warmup=num_warmup)
    return draws, stats, sampler, last


# ------------------------------------------------------------------ NUTS
def _model_potential(model, *args):
    return functools.partial(_potential, model, args)


def _potential(model, args, z):
    return potential_energy(model, args, {}, z)


class NUTSState(NamedTuple):
    """One chain's NUTS state between transitions."""

    i: jax.Array
    """() transitions made (warm-up included)."""
    z: dict
    """Unconstrained values by site name."""
    potential_energy: jax.Array
    """() -log density (up to a constant) at ``z``."""
    z_grad: dict
    """Its gradient, by site name."""
    num_warmup: jax.Array
    """() warm-up transitions: a value of the state, so that no program depends on it."""
    adapt: Adaptation
    """Step size and mass matrix (``ppgpc.infer.adaptation``)."""
    rng_key: jax.Array


class _SettledWarmup:
    """``sample_windows``'s ``settle`` for NUTS: after each warm-up window, the chains'
    ``WarmupWindow``; when the adaptation settled between the window before and this one
    (``ppgpc.infer.adaptation.warmup_settled``), the states with their warm-up length
    lowered to end after the next window: the schedule (``ppgpc.infer.adaptation.schedule``)
    of that length has its step-size-only phase in that window (the mass matrix goes on
    taking draws until it starts). The warm-up ends on a window's end, so the draws fill
    whole windows and reach each checkpoint at one; it never ends before three windows
    (the first settled comparison is after the second)."""

    def __init__(self, target_accept: float):
        self.target_accept = target_accept
        self.last = None

    def __call__(self, states, stats: dict, done: int):
        each = states if isinstance(states, list) else [states]
        host = jax.device_get([(s.adapt.inverse_mass, s.adapt.front.count) for s in each])
        if isinstance(states, list):
            inverse_mass, count = (np.stack([h[k] for h in host]) for k in (0, 1))
        else:
            (inverse_mass, count), = host
        now = warmup_window(inverse_mass, count, stats["step_size"], stats["acceptance_rate"])
        before, self.last = self.last, now
        if before is None or not warmup_settled(before, now, self.target_accept):
            return None
        shorten = lambda s: s._replace(num_warmup=jnp.full_like(s.num_warmup, done + WINDOW))
        return [shorten(s) for s in states] if isinstance(states, list) else shorten(states)


def _leapfrog_accept(step_fn, z, pe, z_grad, r, inverse_mass, step_size):
    """min(1, exp(-dH)) of one leapfrog step of ``step_size`` from (z, r); 0 where dH is not
    finite."""
    before = pe + euclidean_kinetic_energy(inverse_mass, r)
    after = step_fn(step_size, inverse_mass, IntegratorState(z, r, pe, z_grad))
    delta = after.potential_energy + euclidean_kinetic_energy(inverse_mass, after.r) - before
    return jnp.where(jnp.isfinite(delta), jnp.exp(jnp.minimum(-delta, 0.0)), 0.0)


def _search(step_fn, unravel, z, pe, z_grad, key, target_accept, adapt):
    """``find_step_size`` at z with a fresh momentum and ``adapt``'s mass matrix."""
    r = unravel(momentum(adapt, key))
    accept_of = functools.partial(_leapfrog_accept, step_fn, z, pe, z_grad, r,
                                  adapt.inverse_mass)
    return find_step_size(accept_of, INITIAL_STEP_SIZE, target_accept)


def _leapfrog(model: Callable, args):
    """The velocity Verlet step of ``model(*args)``'s potential."""
    return velocity_verlet(_model_potential(model, *args), euclidean_kinetic_energy)[1]


def _transition(model: Callable, target_accept: float, max_tree_depth: int,
                state: "NUTSState", args) -> tuple["NUTSState", dict]:
    """One NUTS transition of one chain (``_nuts_programs``) and its statistics: the
    multinomial trajectory at the state's step size and inverse mass matrix, then, while
    ``i < num_warmup``, the adaptation's update from the new draw."""
    step_fn = _leapfrog(model, args)
    key, k_momentum, k_tree, k_jitter, k_search = jax.random.split(state.rng_key, 5)
    x, unravel = ravel_pytree(state.z)
    adapt = state.adapt
    r = unravel(momentum(adapt, k_momentum))
    tree = build_tree(step_fn, euclidean_kinetic_energy,
                      IntegratorState(state.z, r, state.potential_energy, state.z_grad),
                      adapt.inverse_mass, adapt.step_size, k_tree,
                      max_tree_depth=max_tree_depth)
    accept = tree.sum_accept_probs / tree.num_proposals
    z, pe, z_grad = tree.z_proposal, tree.z_proposal_pe, tree.z_proposal_grad
    x_new = ravel_pytree(z)[0]

    def adapt_fn(a):
        search = functools.partial(_search, step_fn, unravel, z, pe, z_grad, k_search,
                                   target_accept)
        return adaptation_update(a, state.i, state.num_warmup, x_new, jnp.any(x_new != x),
                                 accept, k_jitter, target_accept, search)

    new_adapt, searched = lax.cond(state.i < state.num_warmup, adapt_fn,
                                   lambda a: (a, jnp.zeros((), jnp.int32)), adapt)
    new = NUTSState(state.i + 1, z, pe, z_grad, state.num_warmup, new_adapt, key)
    stats = {"diverging": tree.diverging, "n_steps": tree.num_proposals + searched,
             "acceptance_rate": accept, "energy": tree.z_proposal_energy,
             "lp": -pe, "step_size": adapt.step_size}
    return new, stats


@functools.lru_cache(maxsize=64)
def _nuts_programs(model: Callable, target_accept: float, max_tree_depth: int,
                   dense_mass: bool, keep: tuple | None):
    """(init, window, chain) programs of NUTS on ``model(*args)`` for one setting, built once
    per process; all take the model's arguments as an argument, and the warm-up length is a
    value of the chains' state, so that no setting of it compiles a program.

    ``init(keys, args, init_values, num_warmup)``: (chain,) keys -> the chains'
    ``NUTSState``, started at ``init_values`` (constrained values by site name) or, when
    that is empty, at the prior medians, with the adaptation's initial mass matrix and a
    searched step size (``ppgpc.infer.adaptation``). ``window(states, args)``: ``WINDOW``
    transitions of every chain, returning the states and ``(draws, stats)``: the constrained
    and deterministic sites (those in ``keep`` when given) and the per-transition
    statistics, each (chain, WINDOW, ...). ``chain(state, args)``: the same window of one
    chain, without the chain axis (run per chain, side by side, on a CPU:
    ``ppgpc.runtime.chains``).

    A transition is NumPyro's multinomial NUTS trajectory (``build_tree``, Hoffman & Gelman
    2014 with Betancourt's multinomial sampling) at the state's step size and inverse mass
    matrix; while ``i < num_warmup`` the draw then updates them
    (``ppgpc.infer.adaptation.adaptation_update``, from the draws' variance).
    """

    def init_one(key, args, init_values, num_warmup):
        k_params, k_search, k_kernel = jax.random.split(key, 3)
        strategy = init_to_value(values=init_values) if init_values else init_to_median()
        z, pe, z_grad = initialize_model(k_params, model, init_strategy=strategy,
                                         model_args=args).param_info
        x, unravel = ravel_pytree(z)
        adapt = adaptation_init(x, ravel_pytree(z_grad)[0], dense_mass)
        step, _ = _search(_leapfrog(model, args), unravel, z, pe, z_grad, k_search, target_accept, adapt)
        return NUTSState(jnp.zeros((), num_warmup.dtype), z, pe, z_grad, num_warmup,
                         restart_step_size(adapt, step), k_kernel)

    @jit
    def init(keys, args, init_values, num_warmup):
        return jax.vmap(init_one, in_axes=(0, None, None, None))(keys, args, init_values,
                                                                 num_warmup)

    def record(z, args):
        sites = constrain_fn(model, args, {}, z, return_deterministic=True)
        return sites if keep is None else {k: v for k, v in sites.items() if k in keep}

    def chain(state, args):
        def body(s, _):
            s, stats = _transition(model, target_accept, max_tree_depth, s, args)
            return s, (record(s.z, args), stats)

        return lax.scan(body, state, None, length=WINDOW)

    @jit
    def window(states, args):
        return over_chains(lambda s: chain(s, args), states)

    return init, window, jit(chain)


def run_nuts(
    key: jax.Array,
    model: Callable[..., None],
    args: tuple,
    *,
    num_warmup: int = 500,
    num_samples: int | None = None,
    max_samples: int | None = None,
    num_chains: int = 4,
    init_values: dict | None = None,
    target_accept: float = 0.8,
    max_tree_depth: int = 10,
    dense_mass: bool = False,
    progress_bar: bool = True,
    keep: tuple | None = None,
    checked: Callable[[dict], dict] | None = None,
) -> MCMCOutput:
    """NUTS on ``model(*args)`` until its chains pass the convergence check.

    Args:
        key: PRNG key (one chain's key is ``fold_in(key, chain)``).
        model: a NumPyro model function; ``args`` its arguments (arrays and pytrees: the
            programs take them as arguments, so the same shapes compile nothing new).
        num_warmup: the most adaptation transitions per chain: the warm-up ends after the
            window that follows the first two consecutive windows over which the
            adaptation settled (``_SettledWarmup``; ``SETTLED_END``), whose last transitions
            adapt the step size alone; ``MCMCOutput.sampler.num_warmup`` is the warm-up run.
        num_samples: the least draws per chain kept (None: one window); ``max_samples`` the
            most (``draw_limits``).
        init_values: starting values by site name (defaults to prior medians).
        target_accept, max_tree_depth, dense_mass: NUTS settings.
        progress_bar: a progress bar of the draws, with the running R-hat and ESS.
        keep: the sites to record per draw (None: every sample and deterministic site).
        checked: ``draws -> draws`` the check looks at (default: every recorded site).
    """
    init, window, chain = _nuts_programs(model, float(target_accept), int(max_tree_depth),
                                         bool(dense_mass), keep)
    keys = chain_keys(key, num_chains)
    values = {k: jnp.asarray(v) for k, v in (init_values or {}).items()}
    states = init(keys, args, values, jnp.asarray(int(num_warmup), jnp.int32))
    samples, stats, sampler, check = sample_windows(
        window, states, args, num_warmup=num_warmup, num_samples=num_samples,
        max_samples=max_samples, checked=checked or (lambda d: d), desc="NUTS",
        progress=progress_bar, chain_fn=chain,
        settle=_SettledWarmup(float(target_accept)) if SETTLED_END else None)
    num_steps = np.asarray(stats["n_steps"])
    stats["tree_depth"] = np.floor(np.log2(np.maximum(num_steps, 1))).astype(np.int64) + 1
    sampler = dataclasses.replace(sampler, divergences=int(np.sum(stats["diverging"])))
    return MCMCOutput({k: jnp.asarray(v) for k, v in samples.items()}, stats, sampler, check)

