"""Driver method ``"gibbs"``: a model's own Gibbs sampler, run until its chains pass the
convergence check.

A model provides ``spec.gibbs.gibbs_kernel(data, kernel, hypers, **kernel_options)`` returning
a pure pair ``init(key) -> state`` and ``step(key, state) -> (state, info)`` over NamedTuples
whose state has a field ``f`` (N, L) (BlackJAX style). ``gibbs_programs`` builds the pair
inside compiled windows that take the data and hyperparameters as arguments (so a data
set of the same shapes compiles nothing), the chains vmapped in one program, and
``ppgpc.infer.mcmc.sample_windows`` runs the windows until R-hat and ESS pass (at least
``num_samples`` draws per chain when given, at most ``max_samples``); ``num_warmup`` sweeps
are discarded first and ``thinning`` sweeps make one stored draw.

Kernel hyperparameters are fixed during the sweep, given (``hyperparameters={...}``) or
fitted first by the model's ``spec.gibbs.fit_hypers(data, kernel) -> HyperFit``; or
sampled inside it (``sample_hyperparameters=True``, HMC-within-Gibbs): the driver then calls
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
model's ``spec.gibbs.fit_inducing`` point; sampling them is refused. The state's field ``v``
(M, L) is stored per draw and the ``FitResult`` has the predictive kind ``"inducing"``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppgpc.gp.inducing import initial_inducing_inputs, resolve_num_inducing
from ppgpc.infer.cavi import cavi_point
from ppgpc.infer.common import Options, as_draws, check_hyperparameters, method
from ppgpc.infer.convergence import ChainCheck
from ppgpc.infer.mcmc import WINDOW, chain_keys, sample_windows
from ppgpc.infer.records import FitInfo, PointHypers, RunOutput, SamplerInfo
from ppgpc.runtime.padding import num_real_rows
from ppgpc.runtime.programs import jit

__all__ = ["GIBBS_METHOD", "gibbs_programs", "run_gibbs", "GibbsOptions", "HYPER_ALGORITHMS"]


def _sample_field(inner, field: str) -> dict:
    """The stored part of a model's Gibbs state: ``field`` and the sampled hyperparameters."""
    return {field: getattr(inner, field), **dict(getattr(inner, "hypers", None) or {})}


def _chain(step_fn, field: str, thinning: int, state):
    """``WINDOW`` stored draws of one chain: ``state`` = (the model's state, key); each
    stored draw is ``thinning`` sweeps, with the info of the last as its statistics."""
    def sweep(carry):
        inner, key = carry
        key, k_step = jax.random.split(key)
        inner, info = step_fn(k_step, inner)
        return (inner, key), info

    def body(carry, _):
        carry, info = sweep(carry)
        if thinning > 1:
            carry, infos = lax.scan(lambda c, _: sweep(c), carry, None, length=thinning - 1)
            info = jax.tree.map(lambda x: x[-1], infos)
        return carry, (_sample_field(carry[0], field), dict(info._asdict()))

    return lax.scan(body, state, None, length=WINDOW)


@functools.lru_cache(maxsize=32)
def gibbs_programs(make_pair: Callable, kernel, field: str = "f", thinning: int = 1,
                   options: tuple = ()) -> tuple[Callable, Callable]:
    """(init, window) programs of a model's Gibbs sampler for
    ``ppgpc.infer.mcmc.sample_windows``, built once per process for a sampler, kernel and
    setting; both take the data and the hyperparameters as their argument ``args = (data,
    hypers)``, so another data set of the same shapes compiles nothing.

    Args:
        make_pair: ``(data, kernel, hypers, **options) -> (init, step)``, the model's pure
            pair (``spec.gibbs.gibbs_kernel`` or ``inducing_kernel``): ``init(key) ->
            state`` (state has a field named ``field``), ``step(key, state) -> (state,
            info)`` with ``info`` a NamedTuple of arrays; called inside the programs, so
            what it computes once (a Cholesky factor of fixed hyperparameters) is computed
            once per window.
        kernel: the kernel (hashable).
        field: the state's field stored per draw (``"f"``; ``"v"`` for an inducing-point
            sampler), with the state's ``hypers`` when it has them.
        thinning: sweeps per stored draw.
        options: the pair's keyword options as sorted ``(name, value)`` pairs.

    Returns:
        ``init(keys, args)``: (chain,) keys -> the chains' states; ``window(states, args)``:
        ``WINDOW`` stored draws of every chain, returning the states and ``(draws, stats)``
        with the per-sweep info of each stored sweep as statistics, each (chain, WINDOW,
        ...).
    """
    def pair(args):
        data, hypers = args
        return make_pair(data, kernel, hypers, **dict(options))

    @jit
    def init(keys, args):
        init_fn, _ = pair(args)

        def one(key):
            k_init, k_next = jax.random.split(key)
            return init_fn(k_init), k_next

        return jax.vmap(one)(keys)

    @jit
    def window(states, args):
        init_fn, step_fn = pair(args)
        # a pair's init configures its step (NumPyro's functional HMC of sampled
        # hyperparameters sets its adaptation schedule there); its result is unused
        init_fn(jax.random.PRNGKey(0))
        # vmapped: a sweep's cost hardly varies between chains (docs/records/speed.md)
        return jax.vmap(functools.partial(_chain, step_fn, field, thinning))(states)

    return init, window


HYPER_ALGORITHMS = ("HMC", "NUTS")
"""The samplers of ``hyper_algo`` (HMC-within-Gibbs of the kernel hyperparameters)."""


@dataclasses.dataclass(frozen=True)
class GibbsOptions(Options):
    """Options of ``"gibbs"`` (the module docstring says what each does)."""

    hyperparameters: dict | None = None
    """Fixed values by site name (None: the model's own fit; ``"sample"`` is read as
    ``sample_hyperparameters=True``)."""
    sample_hyperparameters: bool = False
    """Sample the kernel hyperparameters inside the sweep (HMC-within-Gibbs), as NUTS's
    option of the same name."""
    num_warmup: int = 200
    num_samples: int | None = None
    max_samples: int | None = None
    num_chains: int = 4
    thinning: int = 1
    progress_bar: bool = True
    kernel_options: dict | None = None
    """Passed on to the model's ``gibbs_kernel``."""
    hyper_algo: str = "HMC"
    """``HYPER_ALGORITHMS``."""
    hyper_num_steps: int = 8
    hyper_max_tree_depth: int = 6
    num_inducing: int | None = None

    COUNTS = ("num_samples", "max_samples", "num_chains", "thinning", "hyper_num_steps",
              "hyper_max_tree_depth", "num_inducing")
    NON_NEGATIVE = ("num_warmup",)
    FLAGS = ("progress_bar", "sample_hyperparameters")
    OPTIONAL = ("num_inducing", "num_samples", "max_samples")
    VALUES = Options.VALUES + ("num_warmup", "num_samples", "max_samples")

    def extra_checks(self) -> "GibbsOptions":
        """The sampler of the hyperparameters is named, ``"sample"`` becomes
        ``sample_hyperparameters``, and the inducing-point sampler refuses sampling them."""
        if self.hyper_algo not in HYPER_ALGORITHMS:
            raise ValueError(f"hyper_algo must be one of {list(HYPER_ALGORITHMS)}, got "
                             f"{self.hyper_algo!r}")
        given, out = self.hyperparameters, self
        if isinstance(given, str):
            if given != "sample":
                raise ValueError("hyperparameters must be a dict, None or 'sample', got "
                                 f"{given!r}")
            out = self.replace(hyperparameters=None, sample_hyperparameters=True)
        elif out.sample_hyperparameters and given is not None:
            raise ValueError("give hyperparameters (fixed values) or "
                             "sample_hyperparameters=True, not both")
        if out.num_inducing is not None and out.sample_hyperparameters:
            raise ValueError("the inducing-point Gibbs sampler (num_inducing) holds the kernel "
                             "hyperparameters and inducing inputs fixed: give hyperparameters "
                             "as a dict or None, and leave sample_hyperparameters False")
        return out


def _inducing_point(spec, data, kernel, key, opts) -> PointHypers:
    """The fixed kernel hyperparameters and inducing inputs of the inducing-point sampler:
    given (with or without ``inducing_inputs``) or the model's ``fit_inducing`` point (with
    its CAVI record)."""
    M = resolve_num_inducing(opts.num_inducing, data.X.shape[0])
    given = opts.hyperparameters
    if given is None:
        return cavi_point(spec.gibbs.fit_inducing(data, kernel, M, key=key,
                                                  progress=opts.progress_bar))
    given = dict(given)
    Z = given.pop("inducing_inputs", None)
    hypers = check_hyperparameters(spec, data, kernel, given)
    if Z is None:
        Z = initial_inducing_inputs(data.X, M, key=key)
        return PointHypers({**hypers, "inducing_inputs": Z},
                           "given (inducing inputs: k-means++)")
    Z = np.asarray(Z, dtype=np.float64)
    if Z.shape != (M, data.X.shape[1]) or not np.all(np.isfinite(Z)):
        raise ValueError(f"hyperparameter inducing_inputs must be a finite (num_inducing, "
                         f"D) = {(M, data.X.shape[1])} array, got shape {Z.shape}")
    return PointHypers({**hypers, "inducing_inputs": jnp.asarray(Z)}, "given")


def _run_inducing(spec, data, kernel, key, opts) -> RunOutput:
    """Runner of method ``"gibbs"`` with ``num_inducing``: the model's inducing-point
    sampler, held as draws of the whitened inducing values (predictive kind
    ``"inducing"``)."""
    if spec.gibbs.inducing_kernel is None or spec.inducing is None:
        raise ValueError(f"model {spec.name!r} has no inducing-point Gibbs sampler; leave "
                         "num_inducing at None")
    point = _inducing_point(spec, data, kernel, key, opts)
    hypers = point.values
    samples, stats, sampler, check = _sample(spec.gibbs.inducing_kernel, hypers,
                                             dict(opts.kernel_options or {}), "v", data,
                                             kernel, key, opts)
    inducing = samples.pop("v")
    if not bool(np.all(np.isfinite(np.asarray(inducing)))):
        raise FloatingPointError("the inducing-point Gibbs sampler produced non-finite draws")
    info = FitInfo(hyperparameters=point.how, sampler=sampler, **point.info_parts(),
                   num_inducing=int(hypers["inducing_inputs"].shape[0]))
    stats, jitter = _without_jitter(stats)
    return RunOutput(hypers=as_draws(hypers), latent=None, inducing=inducing,
                     predictive_kind="inducing", point_hypers=True, info=info,
                     sample_stats=stats, chains=check, jitter=jitter)


def _without_jitter(stats: dict) -> tuple[dict, float]:
    """The sweeps' statistics without their Cholesky jitter, and its largest value."""
    stats = dict(stats)
    jitter = stats.pop("jitter", None)
    return stats, 0.0 if jitter is None else float(np.max(jitter))


def _sample(make_pair, hypers: dict, kernel_options: dict, field: str, spec_data, kernel, key,
            opts, sample_hypers: bool = False
            ) -> tuple[dict, dict, SamplerInfo, ChainCheck | None]:
    """The model's sampler in windows until its chains pass their check
    (``ppgpc.infer.mcmc``): the stored fields (chain, draw, ...) by name, the per-sweep
    info as sample statistics (chain, draw), the run's record (with the divergences of
    the hyperparameters' HMC step when ``sample_hypers``) and the loop's last check."""
    num_chains, thinning = opts.num_chains, opts.thinning
    init, window = gibbs_programs(make_pair, kernel, field, thinning,
                                  tuple(sorted(kernel_options.items())))
    args = (spec_data, {k: jnp.asarray(v) for k, v in hypers.items()})
    keys = chain_keys(key, num_chains)
    # warm-up in sweeps, counted in stored draws of ``thinning`` sweeps
    samples, stats, sampler, check = sample_windows(
        window, init(keys, args), args, num_warmup=-(-opts.num_warmup // thinning),
        num_samples=opts.num_samples, max_samples=opts.max_samples,
        checked=lambda d: _real_draws(d, spec_data, field), desc="Gibbs",
        progress=opts.progress_bar)
    hyper_divergences = int(np.sum(stats.get("hyper_diverging", 0))) if sample_hypers \
        else None
    return samples, stats, dataclasses.replace(
        sampler, num_warmup=opts.num_warmup, hyper_divergences=hyper_divergences), check


def _real_draws(draws: dict, data, field: str) -> dict:
    """The draws the driver's convergence check looks at: the latent at the real rows of
    padded data (``ppgpc.runtime.padding``), the inducing values at the real inducing
    inputs, and any sampled hyperparameter."""
    out = dict(draws)
    if field == "f":
        out["f"] = draws["f"][:, :, :num_real_rows(data)]
    elif data.inducing_mask is not None:
        out["v"] = draws["v"][:, :, :int(np.sum(np.asarray(data.inducing_mask)))]
    return out


def run_gibbs(spec, data, kernel, key, opts) -> RunOutput:
    """Runner of method ``"gibbs"`` (``ppgpc.infer.methods.METHODS``)."""
    if opts.num_inducing is not None:
        return _run_inducing(spec, data, kernel, key, opts)
    given = opts.hyperparameters
    kernel_options = dict(opts.kernel_options or {})
    sample = opts.sample_hyperparameters
    if sample:  # the start of the chains' hyperparameters
        point = PointHypers(spec.initial_hypers(data, kernel),
                            f"sampled (HMC-within-Gibbs: one {opts.hyper_algo} step per sweep)")
        kernel_options.update(sample_hypers=True, num_warmup=opts.num_warmup,
                              hyper_algo=opts.hyper_algo, hyper_num_steps=opts.hyper_num_steps,
                              max_tree_depth=opts.hyper_max_tree_depth)
    elif given is not None:
        point = PointHypers(check_hyperparameters(spec, data, kernel, given), "given")
    else:
        point = cavi_point(spec.gibbs.fit_hypers(data, kernel, progress=opts.progress_bar))
    hypers = point.values
    samples, stats, sampler, check = _sample(spec.gibbs.gibbs_kernel, hypers, kernel_options,
                                             "f", data, kernel, key, opts, sample)
    latent = samples.pop("f")
    if not bool(np.all(np.isfinite(np.asarray(latent)))):
        raise FloatingPointError("the Gibbs sampler produced non-finite latent draws")
    info = FitInfo(hyperparameters=point.how, sampler=sampler, **point.info_parts())
    stats, jitter = _without_jitter(stats)
    # sampled hyperparameters are draws beside the latent's; fixed ones one point
    return RunOutput(hypers=samples if sample else as_draws(hypers), latent=latent,
                     predictive_kind="latent", point_hypers=not sample, info=info,
                     sample_stats=stats, chains=check, jitter=jitter)


def _is_sparse(opts: GibbsOptions, num_samples: int) -> bool:
    """The inducing-point sampler with fewer inducing inputs than points forms no N x N
    matrix."""
    M = opts.num_inducing
    return M is not None and M < num_samples


GIBBS_METHOD = method("gibbs", run_gibbs, ("gibbs", "latent"), GibbsOptions,
                      scalable=_is_sparse, sampler=True)
"""The driver's method ``"gibbs"`` (``ppgpc.infer.methods.METHODS``)."""
