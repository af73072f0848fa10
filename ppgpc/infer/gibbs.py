"""Driver method ``"gibbs"``: a model's own Gibbs sampler run through NumPyro's ``MCMC``.

A model provides ``extras["gibbs_kernel"](data, kernel, hypers, **kernel_options)`` returning
a pure pair ``init(key) -> state`` and ``step(key, state) -> (state, info)`` over NamedTuples
whose state has a field ``f`` (N, L) (BlackJAX style). ``GibbsKernel`` is the thin
``MCMCKernel`` adapter that lets ``MCMC`` run it (chains, warm-up, thinning, progress bars);
it holds the two functions and nothing mutable.

Hyperparameters are fixed during the sweep: given (``hyperparameters=``) or fitted first by
the model's ``extras["fit_hypers"](data, kernel) -> (hypers, info)``.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import is_prng_key

from ppgpc.infer.driver import _as_draws, _check_hyperparameters, register_method
from ppgpc.infer.mcmc import chain_method

__all__ = ["GibbsKernel", "GibbsAdapterState", "run_gibbs", "GIBBS_OPTIONS"]


class GibbsAdapterState(NamedTuple):
    """What ``MCMC`` carries between iterations."""

    z: dict
    """The sample field: ``{"f": (N, L)}``."""
    inner: Any
    """The model's own Gibbs state."""
    info: Any
    """The model's per-sweep info of the last sweep (collect with ``extra_fields``)."""
    rng_key: jax.Array


class GibbsKernel(MCMCKernel):
    """``MCMCKernel`` adapter over a pure ``(init, step)`` pair.

    Args:
        init_fn: ``init(key) -> state`` (state has a field ``f``).
        step_fn: ``step(key, state) -> (state, info)``; ``info`` a NamedTuple of arrays.

    Example:
        >>> from numpyro.infer import MCMC
        >>> # init, step = SPEC.extras["gibbs_kernel"](data, kernel, hypers)
        >>> # MCMC(GibbsKernel(init, step), num_warmup=100, num_samples=200).run(key)
    """

    sample_field = "z"

    def __init__(self, init_fn: Callable, step_fn: Callable):
        self._init_fn = init_fn
        self._step_fn = step_fn

    @property
    def model(self):
        return None

    def _init_one(self, rng_key):
        k_init, k_probe, k_next = jax.random.split(rng_key, 3)
        inner = self._init_fn(k_init)
        _, info = jax.eval_shape(self._step_fn, k_probe, inner)
        info = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), info)
        return GibbsAdapterState({"f": inner.f}, inner, info, k_next)

    def _sample_one(self, state):
        key, k_step = jax.random.split(state.rng_key)
        inner, info = self._step_fn(k_step, state.inner)
        return GibbsAdapterState({"f": inner.f}, inner, info, key)

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        # chain_method="vectorized" passes one key per chain: vmap the pair over chains.
        if is_prng_key(rng_key):
            return self._init_one(rng_key)
        return jax.vmap(self._init_one)(rng_key)

    def sample(self, state, model_args, model_kwargs):
        if is_prng_key(state.rng_key):
            return self._sample_one(state)
        return jax.vmap(self._sample_one)(state)


def _chain_method(num_chains: int) -> str:
    """One device per chain: "parallel"; otherwise "vectorized" (chains vmapped in one
    compiled sweep: the Polya-Gamma sampler's loops compile slowly, once is enough)."""
    method = chain_method(num_chains)
    return "vectorized" if method == "sequential" and num_chains > 1 else method


GIBBS_OPTIONS = {
    "hyperparameters": None,
    "num_warmup": 200,
    "num_samples": 500,
    "num_chains": 2,
    "thinning": 1,
    "progress_bar": True,
    "kernel_options": None,
}


def run_gibbs(spec, data, kernel, key, opts) -> dict:
    """Runner of driver method ``"gibbs"`` (see ``register_method``)."""
    if opts["hyperparameters"] is not None:
        hypers = _check_hyperparameters(spec, data, kernel, opts["hyperparameters"])
        info = {"hyperparameters": "given"}
    else:
        hypers, info = spec.extras["fit_hypers"](data, kernel)
    init_fn, step_fn = spec.extras["gibbs_kernel"](data, kernel, hypers,
                                                   **dict(opts["kernel_options"] or {}))
    num_chains = int(opts["num_chains"])
    mcmc = MCMC(GibbsKernel(init_fn, step_fn), num_warmup=int(opts["num_warmup"]),
                num_samples=int(opts["num_samples"]), num_chains=num_chains,
                thinning=int(opts["thinning"]), chain_method=_chain_method(num_chains),
                progress_bar=bool(opts["progress_bar"]))
    info_fields = tuple(getattr(jax.eval_shape(step_fn, jax.random.PRNGKey(0),
                                               init_fn(jax.random.PRNGKey(0)))[1], "_fields", ()))
    mcmc.run(key, extra_fields=tuple("info." + f for f in info_fields))
    latent = mcmc.get_samples(group_by_chain=True)["f"]
    extra = mcmc.get_extra_fields(group_by_chain=True)
    stats = {f: np.asarray(extra["info." + f]) for f in info_fields}
    if not bool(np.all(np.isfinite(np.asarray(latent)))):
        raise FloatingPointError("the Gibbs sampler produced non-finite latent draws")
    return dict(hypers=_as_draws(hypers), latent=latent, predictive_kind="latent",
                point_hypers=True, info=info, sample_stats=stats)


register_method("gibbs", run_gibbs, (("extras.gibbs_kernel", "extras.fit_hypers",
                                      "latent_conditional"),), GIBBS_OPTIONS)
