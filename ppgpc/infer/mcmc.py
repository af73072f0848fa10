"""NUTS on a NumPyro model, its chains run in a few compiled programs that every fit of the
same model, kernel and settings shares, with sample statistics named as ArviZ names them.

The sampler is NumPyro's NUTS (``numpyro.infer.hmc.hmc(algo="NUTS")``: the multinomial
no-U-turn transition of Hoffman and Gelman 2014 and Betancourt 2017, with step-size and
diagonal or dense mass-matrix adaptation over the warm-up, Stan's windows). The model's data
are arguments of the compiled programs, not constants baked into them: a program is
compiled once per model, kernel, static data fields, NUTS settings and array shapes, and a
later fit with other data of the same shapes (``ppgpc.padding`` keeps training shapes to a
few sizes) compiles nothing and holds no new program. (NumPyro's ``MCMC`` compiles its
sampling loop afresh for every ``MCMC`` object and every chain, and JAX keeps each of those
programs for the life of the process.)

A chain runs as: a valid start (``find_valid_initial_params`` with the model's init strategy,
or given values), then windows of ``WINDOW`` transitions (one ``lax.scan`` each; the host
updates the progress bar between windows), the draws of the sampling phase collected and
mapped to the constrained space with the model's deterministic sites
(``numpyro.infer.util.constrain_fn``). Chains run one after the other on one device.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from numpyro.handlers import seed, trace
from numpyro.infer.hmc import hmc
from numpyro.infer.initialization import init_to_median
from numpyro.infer.util import (constrain_fn, find_valid_initial_params, potential_energy,
                                unconstrain_fn)

from ppgpc.progress import bar as progress_bar

__all__ = ["MCMCOutput", "run_nuts", "chain_method", "WINDOW"]

WINDOW = 100
"""Transitions per compiled window (the last window of a phase runs only as many as are
left, in the same program)."""


class MCMCOutput(NamedTuple):
    """Draws and statistics of an MCMC run, every array shaped (chain, draw, ...)."""

    samples: dict
    """Sample and deterministic sites by name."""
    sample_stats: dict
    """ArviZ names: diverging, tree_depth, n_steps, acceptance_rate, energy, lp, step_size."""


def chain_method(num_chains: int) -> str:
    """How NumPyro's ``MCMC`` runs the chains of the Gibbs samplers: "parallel" when JAX has
    a device per chain (GPUs, or forced CPU devices), else "sequential"."""
    return "parallel" if jax.local_device_count() >= num_chains > 1 else "sequential"


class _Target:
    """``model(data, *static_args)`` as a function of the data's array leaves: the data's
    tree structure, its non-array leaves (sizes, flags) and ``static_args`` are fixed and
    make the target's identity (hash and equality), so that compiled programs keyed by it
    are shared between fits whose data differ only in their arrays."""

    def __init__(self, model: Callable, data, static_args: tuple):
        leaves, self.treedef = jax.tree_util.tree_flatten(data)
        self.is_array = tuple(isinstance(x, (jax.Array, np.ndarray)) for x in leaves)
        self.statics = tuple(None if a else x for x, a in zip(leaves, self.is_array))
        self.model, self.static_args = model, tuple(static_args)
        self.arrays = [jnp.asarray(x) for x, a in zip(leaves, self.is_array) if a]

    def _key(self):
        return (self.model, self.treedef, self.is_array, self.statics, self.static_args)

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        return isinstance(other, _Target) and self._key() == other._key()

    def __call__(self, arrays, extra):
        it = iter(arrays)
        leaves = [next(it) if a else s for a, s in zip(self.is_array, self.statics)]
        data = jax.tree_util.tree_unflatten(self.treedef, leaves)
        return self.model(data, *self.static_args, *extra)


class _Settings(NamedTuple):
    num_warmup: int
    target_accept: float
    max_tree_depth: int
    dense_mass: bool


def _kernels(target: _Target, settings: _Settings, z, args, key):
    """NumPyro's NUTS pair (init, sample) for the target, and the initial state at ``z``.
    ``hmc``'s sample kernel takes its settings from its init kernel's call, so every
    program calls the init kernel (where its state goes unused, the compiler drops it)."""
    def potential_gen(arrays, extra):
        return functools.partial(potential_energy, target, (arrays, extra), {})

    init_kernel, sample_kernel = hmc(potential_fn_gen=potential_gen, algo="NUTS")
    state = init_kernel(z, settings.num_warmup, target_accept_prob=settings.target_accept,
                        max_tree_depth=settings.max_tree_depth,
                        dense_mass=settings.dense_mass, model_args=args, rng_key=key)
    return state, sample_kernel


@functools.partial(jax.jit, static_argnames=("target", "settings"))
def _start(key, arrays, extra, z, *, target, settings):
    """A chain's initial NUTS state from the unconstrained point ``z`` (None: a valid start
    by ``init_to_median``)."""
    k_init, k_chain = jax.random.split(key)
    if z is None:
        sites = trace(seed(target, k_init)).get_trace(arrays, extra)
        prototype = unconstrain_fn(target, (arrays, extra), {}, {
            name: site["value"] for name, site in sites.items()
            if site["type"] == "sample" and not site["is_observed"]})
        (z, _, _), _ = find_valid_initial_params(k_init, target, init_strategy=init_to_median(),
                                                 model_args=(arrays, extra),
                                                 prototype_params=prototype)
    return _kernels(target, settings, z, (arrays, extra), k_chain)[0]


@functools.partial(jax.jit, static_argnames=("target", "settings"))
def _window(state, arrays, extra, limit, *, target, settings):
    """Up to ``WINDOW`` transitions (the first ``limit``; the rest leave the state as it
    is), with the unconstrained draws and statistics of each."""
    _, sample_kernel = _kernels(target, settings, state.z, (arrays, extra), state.rng_key)

    def step(state, i):
        state = lax.cond(i < limit,
                         lambda s: sample_kernel(s, model_args=(arrays, extra)),
                         lambda s: s, state)
        return state, (state.z, state.diverging, state.num_steps, state.accept_prob,
                       state.energy, state.potential_energy, state.adapt_state.step_size)

    return lax.scan(step, state, jnp.arange(WINDOW))


@functools.partial(jax.jit, static_argnames=("target",))
def _constrained(z, arrays, extra, *, target):
    """Draws (S, ...) mapped to the constrained space, with the deterministic sites."""
    return jax.vmap(lambda zi: constrain_fn(target, (arrays, extra), {}, zi,
                                            return_deterministic=True))(z)


def run_nuts(
    key: jax.Array,
    model: Callable[..., None],
    data,
    static_args: tuple = (),
    extra_args: tuple = (),
    *,
    num_warmup: int = 500,
    num_samples: int = 1000,
    num_chains: int = 4,
    init_values: dict | None = None,
    target_accept: float = 0.8,
    max_tree_depth: int = 10,
    dense_mass: bool = False,
    show_progress: bool = True,
) -> MCMCOutput:
    """NUTS on the NumPyro model ``model(data, *static_args, *extra_args)``.

    Args:
        key: PRNG key (chain c uses ``fold_in(key, c)``).
        model: the model function.
        data: a pytree (prepared data): its arrays are arguments of the compiled programs,
            its other leaves fixed.
        static_args: hashable arguments fixed in the programs (the kernel).
        extra_args: further array arguments (pytrees: fixed hyperparameters, or None).
        init_values: starting values by site name (in the constrained space; every chain
            starts there); None: a valid start from the prior medians, per chain.
        target_accept, max_tree_depth, dense_mass: NUTS settings.
        show_progress: a progress bar over all chains' transitions on stderr
            (``ppgpc.progress.bar``).
    """
    target = _Target(model, data, static_args)
    arrays, extra = target.arrays, tuple(extra_args)
    settings = _Settings(int(num_warmup), float(target_accept), int(max_tree_depth),
                         bool(dense_mass))
    z0 = None
    if init_values:
        z0 = unconstrain_fn(target, (arrays, extra), {}, dict(init_values))
    total = num_warmup + num_samples
    bar = progress_bar(num_chains * total, "NUTS", show_progress, unit="step")
    draws, stats = [], []
    for chain in range(num_chains):
        state = _start(jax.random.fold_in(key, chain), arrays, extra, z0, target=target,
                       settings=settings)
        kept = []
        for begin in range(0, total, WINDOW):
            limit = min(WINDOW, total - begin)
            state, out = _window(state, arrays, extra, jnp.asarray(limit), target=target,
                                 settings=settings)
            first = max(num_warmup - begin, 0)  # the window's draws past the warm-up
            if first < limit:  # (cut and joined on the host: no program per cut)
                kept.append(jax.tree.map(lambda x: np.asarray(x)[first:limit], out))
            bar.update(limit)
        z, *chain_stats = (jax.tree.map(lambda *xs: np.concatenate(xs), *parts)
                           for parts in zip(*kept))
        draws.append(_constrained(jax.device_put(z), arrays, extra, target=target))
        stats.append(chain_stats)
    bar.close()
    samples = jax.tree.map(lambda *xs: jnp.stack(xs), *draws)
    diverging, num_steps, accept, energy, potential, step_size = (
        np.stack(column) for column in zip(*stats))
    sample_stats = {
        "diverging": diverging,
        "n_steps": num_steps,
        "tree_depth": np.floor(np.log2(np.maximum(num_steps, 1))).astype(np.int64) + 1,
        "acceptance_rate": accept,
        "energy": energy,
        "lp": -potential,
        "step_size": step_size,
    }
    return MCMCOutput(samples, sample_stats)
