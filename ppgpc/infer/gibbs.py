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

Option ``num_inducing`` = M (a model whose ``spec.gibbs`` has an ``inducing_kernel``): the
inducing-point sampler, O(N M^2) per sweep and no N x N matrix (so ``max_exact_points``
does not apply when M < N). Its kernel hyperparameters and inducing inputs are fixed: given
(``hyperparameters={...}``, optionally with ``inducing_inputs`` (M, D); without them the
k-means++ inputs of ``ppgpc.gp.inducing.initial_inducing_inputs`` from the run's seed) or the
model's ``spec.gibbs.fit_inducing`` point; ``"sample"`` is refused. The state's field ``v``
(M, L) is stored per draw and the ``FitResult`` has the predictive kind ``"inducing"``.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import MCMC
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import is_prng_key

from ppgpc.gp.inducing import initial_inducing_inputs, resolve_num_inducing
from ppgpc.infer.cavi import cavi_check, integer_seed
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
        init_fn: ``init(key) -> state`` (state has a field named ``field``).
        step_fn: ``step(key, state) -> (state, info)``; ``info`` a NamedTuple of arrays.
        field: the state's field stored per draw (``"f"``; ``"v"`` for an inducing-point
            sampler), with the state's ``hypers`` when it has them.

    Example:
        >>> from numpyro.infer import MCMC
        >>> # init, step = SPEC.gibbs.gibbs_kernel(data, kernel, hypers)
        >>> # MCMC(GibbsKernel(init, step), num_warmup=100, num_samples=200).run(key)
    """

    sample_field = "z"

    def __init__(self, init_fn: Callable, step_fn: Callable, field: str = "f"):
        self._init_fn = init_fn
        self._step_fn = step_fn
        self._field = field

    @property
    def model(self):
        return None

    def _sample_field(self, inner) -> dict:
        return {self._field: getattr(inner, self._field),
                **dict(getattr(inner, "hypers", None) or {})}

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
    "num_inducing": None,
}


HYPER_ALGORITHMS = ("HMC", "NUTS")
"""The samplers of ``hyper_algo`` (HMC-within-Gibbs of the kernel hyperparameters)."""


def check_gibbs_options(opts: dict) -> dict:
    """Gibbs settings, checked before NumPyro sees them (``num_chains`` 0 ended in a vmap
    rank error, ``num_samples`` 0 in NumPyro's own message)."""
    if opts["hyper_algo"] not in HYPER_ALGORITHMS:
        raise ValueError(f"hyper_algo must be one of {list(HYPER_ALGORITHMS)}, got "
                         f"{opts['hyper_algo']!r}")
    opts = check_options(opts, counts=("num_samples", "num_chains", "thinning",
                                       "hyper_num_steps", "hyper_max_tree_depth",
                                       "num_inducing"),
                         non_negative=("num_warmup",), flags=("progress_bar",),
                         optional=("num_inducing",))
    if opts["num_inducing"] is not None and isinstance(opts["hyperparameters"], str):
        raise ValueError("the inducing-point Gibbs sampler (num_inducing) holds the kernel "
                         "hyperparameters and inducing inputs fixed: give hyperparameters "
                         f"as a dict or None, not {opts['hyperparameters']!r}")
    return opts


def _inducing_point(spec, data, kernel, key, opts) -> tuple[dict, dict]:
    """The fixed kernel hyperparameters and inducing inputs of the inducing-point sampler:
    given (with or without ``inducing_inputs``) or the model's ``fit_inducing`` point."""
    M = resolve_num_inducing(opts["num_inducing"], data.X.shape[0])
    given = opts["hyperparameters"]
    if given is None:
        return spec.gibbs.fit_inducing(data, kernel, M, seed=integer_seed(key),
                                       progress=bool(opts["progress_bar"]))
    given = dict(given)
    Z = given.pop("inducing_inputs", None)
    hypers = check_hyperparameters(spec, data, kernel, given)
    if Z is None:
        Z = initial_inducing_inputs(data.X, M, integer_seed(key))
        return {**hypers, "inducing_inputs": Z}, {
            "hyperparameters": "given (inducing inputs: k-means++)"}
    Z = np.asarray(Z, dtype=np.float64)
    if Z.shape != (M, data.X.shape[1]) or not np.all(np.isfinite(Z)):
        raise ValueError(f"hyperparameter inducing_inputs must be a finite (num_inducing, "
                         f"D) = {(M, data.X.shape[1])} array, got shape {Z.shape}")
    return {**hypers, "inducing_inputs": jnp.asarray(Z)}, {"hyperparameters": "given"}


def _run_inducing(spec, data, kernel, key, opts) -> dict:
    """Runner of method ``"gibbs"`` with ``num_inducing``: the model's inducing-point
    sampler, held as draws of the whitened inducing values (predictive kind
    ``"inducing"``)."""
    if spec.gibbs.inducing_kernel is None or spec.inducing is None:
        raise ValueError(f"model {spec.name!r} has no inducing-point Gibbs sampler; leave "
                         "num_inducing at None")
    hypers, info = _inducing_point(spec, data, kernel, key, opts)
    init_fn, step_fn = spec.gibbs.inducing_kernel(data, kernel, hypers,
                                                  **dict(opts["kernel_options"] or {}))
    samples, stats = _sample(init_fn, step_fn, "v", key, opts)
    inducing = samples.pop("v")
    if not bool(np.all(np.isfinite(np.asarray(inducing)))):
        raise FloatingPointError("the inducing-point Gibbs sampler produced non-finite draws")
    info["num_inducing"] = int(hypers["inducing_inputs"].shape[0])
    return dict(hypers=as_draws(hypers), latent=None, inducing=inducing,
                predictive_kind="inducing", point_hypers=True, info=info,
                sample_stats=stats, **_checks(info, stats, "stochastic sparse CAVI"))


def _checks(info: dict, stats: dict, stage: str) -> dict:
    """The runner's ``optimizers`` (the CAVI fit of the point, when one ran) and
    ``jitter`` (the largest of the sweeps'), for the driver's convergence report."""
    optimizers = (cavi_check(info, stage),) if "cavi_converged" in info else ()
    jitter = stats.pop("jitter", None)
    return dict(optimizers=optimizers,
                jitter=0.0 if jitter is None else float(np.max(jitter)))


def _sample(init_fn, step_fn, field: str, key, opts) -> tuple[dict, dict]:
    """NumPyro's ``MCMC`` over the pair: the stored fields (chain, draw, ...) by name and
    the per-sweep info as sample statistics (chain, draw)."""
    num_chains = int(opts["num_chains"])
    mcmc = MCMC(GibbsKernel(init_fn, step_fn, field), num_warmup=int(opts["num_warmup"]),
                num_samples=int(opts["num_samples"]), num_chains=num_chains,
                thinning=int(opts["thinning"]), chain_method=_chain_method(num_chains),
                progress_bar=bool(opts["progress_bar"]))
    info_shape = jax.eval_shape(lambda k: step_fn(k, init_fn(k))[1], jax.random.PRNGKey(0))
    info_fields = tuple(getattr(info_shape, "_fields", ()))
    mcmc.run(key, extra_fields=tuple("info." + f for f in info_fields))
    extra = mcmc.get_extra_fields(group_by_chain=True)
    return (dict(mcmc.get_samples(group_by_chain=True)),
            {f: np.asarray(extra["info." + f]) for f in info_fields})


def run_gibbs(spec, data, kernel, key, opts) -> dict:
    """Runner of method ``"gibbs"`` (``ppgpc.infer.register_method``)."""
    if opts["num_inducing"] is not None:
        return _run_inducing(spec, data, kernel, key, opts)
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
    samples, stats = _sample(init_fn, step_fn, "f", key, opts)
    latent = samples.pop("f")
    if not bool(np.all(np.isfinite(np.asarray(latent)))):
        raise FloatingPointError("the Gibbs sampler produced non-finite latent draws")
    checks = _checks(info, stats, "CAVI")
    if sample:
        info["hyper_divergences"] = int(np.sum(stats.get("hyper_diverging", 0)))
        return dict(hypers=samples, latent=latent, predictive_kind="latent",
                    point_hypers=False, info=info, sample_stats=stats, **checks)
    return dict(hypers=as_draws(hypers), latent=latent, predictive_kind="latent",
                point_hypers=True, info=info, sample_stats=stats, **checks)


def _is_sparse(opts: dict, num_samples: int) -> bool:
    """The inducing-point sampler with fewer inducing inputs than points forms no N x N
    matrix."""
    M = opts["num_inducing"]   # checked by check_gibbs_options
    return M is not None and M < num_samples


register_method("gibbs", run_gibbs, ("gibbs", "latent"), GIBBS_OPTIONS,
                scalable=_is_sparse, check=check_gibbs_options, sampler=True)
