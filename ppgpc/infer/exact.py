"""Methods ``"exact"`` and ``"map"``: point hyperparameters, then the conjugate posterior.

* ``"exact"``: kernel hyperparameters by type-II maximum likelihood (L-BFGS on the collapsed
  model), then the closed-form conjugate latent posterior (docs/math.md section 1).
* ``"map"``: the same with the hyperparameter priors included (type-II MAP).

Both take the option ``devices`` (``ppgpc.infer.common.DEVICES_OPTION``): a collapsed
sparse model then sums its bound and its posterior over the devices of a mesh.

Both need the ``conjugate`` capability of ``ppgpc.models.spec.ModelSpec``. ``point_hypers`` (the
type-II optimum, or checked given values) also starts the collapsed form of ``"nuts"``.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from ppgpc.infer.common import Options, as_draws, check_hyperparameters, jitted, method
from ppgpc.infer.records import FitInfo, OptimizerInfo, PointHypers, RunOutput
from ppgpc.infer.sites import optimize_sites
from ppgpc.runtime.programs import jit

__all__ = ["EXACT_METHOD", "MAP_METHOD", "OptimizerOptions", "point_hypers",
           "check_posterior", "run_exact", "run_map"]

@dataclasses.dataclass(frozen=True)
class OptimizerOptions(Options):
    """Options of ``"exact"`` and ``"map"``."""

    hyperparameters: dict | None = None
    """Fixed values by site name (no optimisation)."""
    initial_hyperparameters: dict | None = None
    """Where the optimisation starts (some or all sites, by name; the others at the model's
    ``initial_hypers``): a warm start from a neighbouring fit."""
    num_draws: int = 1000
    """Draws of the conjugate posterior kept for prediction and the export."""
    max_iter: int = 500
    tol: float = 1e-6
    optimizer: str = "lbfgs"
    """``"lbfgs"`` or ``"adam"``."""
    learning_rate: float = 0.1
    """Adam's step size."""
    progress_bar: bool = False

    COUNTS = ("num_draws", "max_iter")
    POSITIVE = ("learning_rate",)
    FLAGS = ("progress_bar",)
    VALUES = Options.VALUES + ("max_iter", "tol", "learning_rate")


def point_hypers(spec, data, kernel, given, include_prior: bool,
                 opts: OptimizerOptions = OptimizerOptions()) -> PointHypers:
    """Given hyperparameters (checked), or the type-II ML / MAP optimum of the collapsed
    model.

    Args:
        spec: the model's spec; without given values it needs the ``conjugate`` capability.
        data, kernel: the prepared data and the kernel.
        given: hyperparameter values by site name, or None to optimise.
        include_prior: type-II MAP (True) or ML (False).
        opts: the optimisation's settings (``OptimizerOptions``).
    """
    if given is not None:
        return PointHypers(check_hyperparameters(spec, data, kernel, given), "given")
    if not spec.has("conjugate"):
        raise ValueError(
            f"model {spec.name!r} has no collapsed form to fit hyperparameters by type-II ML; "
            "pass hyperparameters={...} (e.g. from an SVI fit) or sample_hyperparameters=True")
    start = spec.initial_hypers(data, kernel)
    if opts.initial_hyperparameters is not None:
        start = check_hyperparameters(spec, data, kernel,
                                      {**start, **opts.initial_hyperparameters})
    opt = optimize_sites(
        spec.conjugate.collapsed_model, start, args=(data, kernel),
        include_prior=include_prior, max_iter=opts.max_iter, tol=opts.tol,
        optimizer=opts.optimizer, learning_rate=opts.learning_rate,
        progress_bar=opts.progress_bar,
    )
    record = OptimizerInfo(
        optimizer=str(opts.optimizer),
        objective="log_posterior" if include_prior else "log_marginal_likelihood",
        value=float(opt.objective), iterations=int(opt.num_iterations),
        evaluations=int(opt.num_evaluations), grad_norm=float(opt.grad_norm),
        converged=bool(opt.converged), stop_reason=str(opt.stop_reason))
    return PointHypers(opt.params, record.kind, record)


@jit
def _all_finite(tree) -> jax.Array:
    """True when every entry of every leaf is finite: one program per pytree structure, one
    scalar back to the host (not the N x N factor)."""
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x))
                              for x in jax.tree_util.tree_leaves(tree)]))


def check_posterior(posterior, what: str) -> float:
    """The Cholesky jitter a conjugate posterior needed (0 if none), after checking that
    every array of it is finite (the fit's ``ConvergenceReport`` judges the jitter).

    Raises:
        FloatingPointError: a non-finite entry (the kernel matrix was not positive definite
            even with the maximum jitter).
    """
    jitter = float(jnp.max(posterior.jitter)) if hasattr(posterior, "jitter") else 0.0
    if not bool(_all_finite(posterior)):
        raise FloatingPointError(
            f"the {what} could not be computed: the kernel matrix was not positive definite "
            "even with the maximum jitter. Check for duplicated inputs or extreme scales."
        )
    return jitter


def _run_point(spec, data, kernel, key, opts, include_prior) -> RunOutput:
    point = point_hypers(spec, data, kernel, opts.hyperparameters, include_prior, opts)
    hypers = point.values
    conjugate = spec.conjugate
    posterior = jitted(conjugate.condition)(data, kernel, hypers)
    jitter = check_posterior(posterior, "conjugate posterior")
    info = FitInfo(hyperparameters=point.how, cholesky_jitter=jitter, **point.info_parts())
    checks = dict(jitter=jitter)
    num_draws = opts.num_draws
    inducing = spec.inducing
    if inducing is not None and inducing.sample_inducing is not None:
        # a collapsed sparse fit: S draws of the whitened inducing values, O(S M L) whatever N
        v = jitted(inducing.sample_inducing, ("num_samples",))(
            key, data, kernel, hypers, posterior, num_samples=num_draws)
        return RunOutput(hypers=as_draws(hypers), latent=None, inducing=v[None],
                         predictive_kind="inducing", point_hypers=True, info=info, **checks)
    latent = jitted(conjugate.sample_train, ("num_samples",))(
        key, data, kernel, hypers, posterior, num_samples=num_draws)
    return RunOutput(hypers=as_draws(hypers), latent=latent[None], predictive_kind="conjugate",
                     point_hypers=True, info=info, **checks)


def run_exact(spec, data, kernel, key, opts) -> RunOutput:
    """Runner of method ``"exact"`` (type-II ML; ``ppgpc.infer.methods.METHODS``)."""
    return _run_point(spec, data, kernel, key, opts, include_prior=False)


def run_map(spec, data, kernel, key, opts) -> RunOutput:
    """Runner of method ``"map"`` (type-II MAP; ``ppgpc.infer.methods.METHODS``)."""
    return _run_point(spec, data, kernel, key, opts, include_prior=True)


EXACT_METHOD = method("exact", run_exact, "conjugate", OptimizerOptions, devices=True)
"""The driver's method ``"exact"`` (``ppgpc.infer.methods.METHODS``)."""
MAP_METHOD = method("map", run_map, "conjugate", OptimizerOptions, devices=True)
"""The driver's method ``"map"`` (``ppgpc.infer.methods.METHODS``)."""
