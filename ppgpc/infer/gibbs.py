"""Driver method ``"gibbs"``: a model's own Gibbs sampler run through NumPyro's ``MCMC``.

A model provides ``spec.gibbs.gibbs_kernel(data, kernel, hypers, **kernel_options)`` returning
a pure pair ``init(key) -> state`` and ``step(key, state) -> (state, info)`` over NamedTuples
whose state has a field ``f`` (N, L) (BlackJAX style). ``GibbsKernel`` is the thin
``MCMCKernel`` adapter that lets ``MCMC`` run it (chains, warm-up, thinning, progress bars);
it holds the two functions and nothing mutable.

Kernel hyperparameters are fixed during the sweep, given (``hyperparameters={...}``) or
fitted first by the model's ``spec.gibbs.fit_hypers(data, kernel) -> (hypers, info)``; or
sampled inside it (``hyperparameters="sample"``, HMC-within-Gibbs): the driver then calls
``gibbs_kernel(data, kernel, start, sample_hypers=True, num_warmup=..., hyper_algo=...,
hyper_num_steps=..., max_tree_depth=...)`` (options ``hyper_algo`` "HMC" or "NUTS",
``hyper_num_steps``, ``hyper_max_tree_depth``)
with ``start = spec.initial_hypers(data, kernel)``, the model's state carries the current
values in a field ``hypers`` (a dict by site name), and the ``FitResult`` stores one
hyperparameter draw per latent draw (``point_hypers=False``), so predictions average over
both.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import is_prng_key

from ppgpc.infer.common import as_draws, check_hyperparameters, register_method
from ppgpc.infer.mcmc import chain_method
from ppgpc.validation import check_options

__all__ = ["GibbsKernel", "GibbsAdapterState", "run_gibbs", "check_gibbs_options",
           "GIBBS_OPTIONS", "HYPER_ALGORITHMS"]


class GibbsAdapterState(NamedTuple):
    """What ``MCMC`` carries between iterations."""

    z: dict
    """The sample field: ``{"f": (N, L)}`` plus the sampled hyperparameters by site name."""
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
        >>> # init, step = SPEC.gibbs.gibbs_kernel(data, kernel, hypers)
        >>> # MCMC(GibbsKernel(init, step), num_warmup=100, num_samples=200).run(key)
    """

    sample_field = "z"

    def __init__(self, init_fn: Callable, step_fn: Callable):
        self._init_fn = init_fn
        self._step_fn = step_fn

    @property
    def model(self):
        return None

    @staticmethod
    def _sample_field(inner) -> dict:
        return {"f": inner.f, **dict(getattr(inner, "hypers", None) or {})}

    def _init_one(self, rng_key):
        k_init, k_probe, k_next = jax.random.split(rng_key, 3)
        inner = self._init_fn(k_init)
        _, info = jax.eval_shape(self._step_fn, k_probe, inner)
        info = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), info)
        return GibbsAdapterState(self._sample_field(inner), inner, info, k_next)

    def _sample_one(self, state):
        key, k_step = jax.random.split(state.rng_key)
        inner, info = self._step_fn(k_step, state.inner)
        return GibbsAdapterState(self._sample_field(inner), inner, info, key)

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        # chain_method="vectorized" passes one key per chain: vmap the pair over chains.
        # Compiled: MCMC calls init outside jit, where a model's init (a NumPyro HMC init
        # when hyperparameters are sampled) would otherwise run op by op.
        if is_prng_key(rng_key):
            return jax.jit(self._init_one)(rng_key)
        return jax.jit(jax.vmap(self._init_one))(rng_key)

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
    "hyper_algo": "HMC",
    "hyper_num_steps": 8,
    "hyper_max_tree_depth": 6,
}


HYPER_ALGORITHMS = ("HMC", "NUTS")
"""The samplers of ``hyper_algo`` (HMC-within-Gibbs of the kernel hyperparameters)."""


def check_gibbs_options(opts: dict) -> dict:
    """Gibbs settings, checked before NumPyro sees them (``num_chains`` 0 ended in a vmap
    rank error, ``num_samples`` 0 in NumPyro's own message)."""
    if opts["hyper_algo"] not in HYPER_ALGORITHMS:
        raise ValueError(f"hyper_algo must be one of {list(HYPER_ALGORITHMS)}, got "
                         f"{opts['hyper_algo']!r}")
    return check_options(opts, counts=("num_samples", "num_chains", "thinning",
                                       "hyper_num_steps", "hyper_max_tree_depth"),
                         non_negative=("num_warmup",), flags=("progress_bar",))


def run_gibbs(spec, data, kernel, key, opts) -> dict:
    """Runner of method ``"gibbs"`` (``ppgpc.infer.register_method``)."""
    given = opts["hyperparameters"]
    kernel_options = dict(opts["kernel_options"] or {})
    sample = isinstance(given, str)
    if sample:
        if given != "sample":
            raise ValueError(f"hyperparameters must be a dict, None or 'sample', got {given!r}")
        hypers = spec.initial_hypers(data, kernel)
        info = {"hyperparameters": f"sampled (HMC-within-Gibbs: one {opts['hyper_algo']} "
                                   "step per sweep)"}
        kernel_options.update(sample_hypers=True, num_warmup=int(opts["num_warmup"]),
                              hyper_algo=str(opts["hyper_algo"]),
                              hyper_num_steps=int(opts["hyper_num_steps"]),
                              max_tree_depth=int(opts["hyper_max_tree_depth"]))
    elif given is not None:
        hypers = check_hyperparameters(spec, data, kernel, given)
        info = {"hyperparameters": "given"}
    else:
        hypers, info = spec.gibbs.fit_hypers(data, kernel, progress=bool(opts["progress_bar"]))
    init_fn, step_fn = spec.gibbs.gibbs_kernel(data, kernel, hypers, **kernel_options)
    num_chains = int(opts["num_chains"])
    mcmc = MCMC(GibbsKernel(init_fn, step_fn), num_warmup=int(opts["num_warmup"]),
                num_samples=int(opts["num_samples"]), num_chains=num_chains,
                thinning=int(opts["thinning"]), chain_method=_chain_method(num_chains),
                progress_bar=bool(opts["progress_bar"]))
    info_shape = jax.eval_shape(lambda k: step_fn(k, init_fn(k))[1], jax.random.PRNGKey(0))
    info_fields = tuple(getattr(info_shape, "_fields", ()))
    mcmc.run(key, extra_fields=tuple("info." + f for f in info_fields))
    samples = mcmc.get_samples(group_by_chain=True)
    latent = samples.pop("f")
    extra = mcmc.get_extra_fields(group_by_chain=True)
    stats = {f: np.asarray(extra["info." + f]) for f in info_fields}
    if not bool(np.all(np.isfinite(np.asarray(latent)))):
        raise FloatingPointError("the Gibbs sampler produced non-finite latent draws")
    if sample:
        info["hyper_divergences"] = int(np.sum(stats.get("hyper_diverging", 0)))
        return dict(hypers=samples, latent=latent, predictive_kind="latent",
                    point_hypers=False, info=info, sample_stats=stats)
    return dict(hypers=as_draws(hypers), latent=latent, predictive_kind="latent",
                point_hypers=True, info=info, sample_stats=stats)


register_method("gibbs", run_gibbs, ("gibbs", "latent"), GIBBS_OPTIONS,
                check=check_gibbs_options)
