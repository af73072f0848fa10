"""NUTS through NumPyro's ``MCMC``, with chains grouped and sample statistics named as ArviZ
names them."""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC, NUTS, init_to_median, init_to_value

__all__ = ["MCMCOutput", "run_nuts", "chain_method"]

_EXTRA_FIELDS = ("diverging", "num_steps", "accept_prob", "energy", "potential_energy",
                 "adapt_state.step_size")


class MCMCOutput(NamedTuple):
    """Draws and statistics of an MCMC run, every array shaped (chain, draw, ...)."""

    samples: dict
    """Sample and deterministic sites by name."""
    sample_stats: dict
    """ArviZ names: diverging, tree_depth, n_steps, acceptance_rate, energy, lp, step_size."""


def chain_method(num_chains: int) -> str:
    """"parallel" when JAX has a device per chain (GPUs, or forced CPU devices), else
    "sequential": one CPU device runs chains one after the other."""
    return "parallel" if jax.local_device_count() >= num_chains > 1 else "sequential"


def run_nuts(
    key: jax.Array,
    model: Callable[[], None],
    *,
    num_warmup: int = 500,
    num_samples: int = 1000,
    num_chains: int = 4,
    init_values: dict | None = None,
    target_accept: float = 0.8,
    max_tree_depth: int = 10,
    dense_mass: bool = False,
    progress_bar: bool = True,
) -> MCMCOutput:
    """Run NUTS on a NumPyro model that takes no arguments.

    Args:
        key: PRNG key.
        model: the model (bind data with functools.partial).
        init_values: starting values by site name (defaults to prior medians).
        target_accept, max_tree_depth, dense_mass: NUTS settings.
        progress_bar: NumPyro's progress bar (one per chain when sequential).
    """
    init = init_to_value(values=init_values) if init_values else init_to_median()
    kernel = NUTS(
        model, target_accept_prob=target_accept, max_tree_depth=max_tree_depth,
        dense_mass=dense_mass, init_strategy=init,
    )
    mcmc = MCMC(
        kernel, num_warmup=num_warmup, num_samples=num_samples, num_chains=num_chains,
        chain_method=chain_method(num_chains), progress_bar=progress_bar,
    )
    mcmc.run(key, extra_fields=_EXTRA_FIELDS)
    samples = mcmc.get_samples(group_by_chain=True)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    num_steps = np.asarray(extra["num_steps"])
    stats = {
        "diverging": np.asarray(extra["diverging"]),
        "n_steps": num_steps,
        "tree_depth": np.floor(np.log2(np.maximum(num_steps, 1))).astype(np.int64) + 1,
        "acceptance_rate": np.asarray(extra["accept_prob"]),
        "energy": np.asarray(extra["energy"]),
        "lp": -np.asarray(extra["potential_energy"]),
        "step_size": np.asarray(extra["adapt_state.step_size"]),
    }
    return MCMCOutput({k: jnp.asarray(v) for k, v in samples.items()}, stats)
