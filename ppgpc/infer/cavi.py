"""Driver method ``"cavi"``: a model's coordinate-ascent variational inference.

A model provides ``spec.cavi.cavi(data, kernel, hypers, **options)`` returning a result with
fields ``hypers``, ``inducing`` (the inducing inputs Z), ``sparse``, ``elbo`` (trace),
``converged``, ``relative_change`` (of the last two ELBO values) and ``jitter`` (of the
fitted model's Cholesky factor), and two ways to sample its variational posterior:

* the full version (Z = X): ``spec.cavi.sample_q_f(key, data, kernel, result, S) -> (S, N,
  L)`` joint draws of the latent at the training inputs, held as one chain of predictive
  kind ``"latent"`` (new inputs get the GP prior conditional given each draw);
* the sparse version (M < N): ``spec.cavi.sample_q_v(key, result, S) -> (S, M, L)`` draws
  of the whitened inducing values, held as one chain of predictive kind ``"inducing"`` with
  Z in ``hypers["inducing_inputs"]`` (new inputs, and the training inputs when exported, get
  q's own predictive p(f* | u) through ``spec.inducing.inducing_latent``). Nothing N x N is
  formed, so the driver exempts the sparse version from ``max_exact_points``.

The ELBO trace is kept as ``sample_stats["elbo"]`` of shape (1, iterations) plus
``info.cavi.elbo`` (the final value).

Options ``batch_size`` and ``class_batch_size`` (``None``: all points / all classes; giving
either selects the stochastic version, with step size rho_t = (t + step_size_delay) ^
-step_size_power and a full-data ELBO evaluation every ``elbo_every`` iterations, whose
values then form the trace) are passed to the model's ``cavi`` only when one is set.
``progress_bar`` (default False) shows the iterations on stderr (``ppgpc.runtime.progress``).
``devices`` (``ppgpc.infer.common.DEVICES_OPTION``) splits the stochastic version's
minibatches and full-data ELBO evaluations over the devices of a mesh; the full-batch
version refuses it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ppgpc.infer.common import Options, as_draws, check_hyperparameters, method
from ppgpc.infer.records import CAVIInfo, FitInfo, PointHypers, RunOutput
from ppgpc.models.spec import HyperFit

__all__ = ["CAVI_METHOD", "run_cavi_method", "cavi_point", "CAVIOptions"]

@dataclasses.dataclass(frozen=True)
class CAVIOptions(Options):
    """Options of ``"cavi"`` (the module docstring says what each does). ``max_iter`` 0
    would leave an empty ELBO trace, ``num_draws`` 0 a fit without draws, and a negative
    ``learning_rate`` an ascent that runs downhill; the stochastic settings are checked by
    the model's ``cavi`` against N and C."""

    hyperparameters: dict | None = None
    learn_hyperparameters: bool | None = None
    num_inducing: int | None = None
    learn_inducing: bool = True
    include_prior: bool = True
    max_iter: int = 300
    tol: float = 1e-6
    learning_rate: float = 0.05
    num_draws: int = 1000
    batch_size: int | None = None
    class_batch_size: int | None = None
    step_size_delay: float = 1.0
    step_size_power: float = 0.6
    elbo_every: int = 10
    progress_bar: bool = False

    COUNTS = ("max_iter", "num_draws", "num_inducing", "batch_size", "class_batch_size",
              "elbo_every")
    POSITIVE = ("learning_rate",)
    FLAGS = ("learn_inducing", "include_prior", "learn_hyperparameters", "progress_bar")
    OPTIONAL = ("num_inducing", "batch_size", "class_batch_size", "learn_hyperparameters")
    VALUES = Options.VALUES + ("max_iter", "tol", "learning_rate")

    @property
    def stochastic(self) -> bool:
        """Minibatches over points or classes: the stochastic version."""
        return self.batch_size is not None or self.class_batch_size is not None


def _optional_float(value) -> float | None:
    return None if value is None else float(value)


def cavi_point(fit: HyperFit) -> PointHypers:
    """A model's own CAVI fit of its hyperparameters (``HyperFit``) as ``PointHypers``, its
    ``CAVIInfo`` the record."""
    record = CAVIInfo(iterations=int(fit.iterations), converged=bool(fit.converged),
                      relative_change=_optional_float(fit.relative_change),
                      elbo=float(fit.elbo), stochastic=bool(fit.stochastic))
    return PointHypers(fit.values, fit.how, record)


def run_cavi_method(spec, data, kernel, key, opts) -> RunOutput:
    """Runner of method ``"cavi"`` (``ppgpc.infer.methods.METHODS``)."""
    given = opts.hyperparameters
    hypers = None if given is None else check_hyperparameters(spec, data, kernel, given)
    stochastic = {}
    if opts.stochastic:
        stochastic = {k: getattr(opts, k) for k in (
            "batch_size", "class_batch_size", "step_size_delay", "step_size_power",
            "elbo_every")}
    res = spec.cavi.cavi(
        data, kernel, hypers, num_inducing=opts.num_inducing,
        learn_hypers=opts.learn_hyperparameters, learn_inducing=opts.learn_inducing,
        include_prior=opts.include_prior, max_iter=opts.max_iter, tol=float(opts.tol),
        learning_rate=float(opts.learning_rate), key=key, progress=opts.progress_bar,
        **stochastic)
    num_draws = opts.num_draws
    if res.sparse:
        draws = spec.cavi.sample_q_v(key, res, num_draws)
        fields = dict(hypers=as_draws({**res.hypers, "inducing_inputs": res.inducing}),
                      latent=None, inducing=draws[None], predictive_kind="inducing")
    else:
        draws = spec.cavi.sample_q_f(key, data, kernel, res, num_draws)
        fields = dict(hypers=as_draws(res.hypers), latent=draws[None],
                      predictive_kind="latent")
    if not bool(np.all(np.isfinite(np.asarray(draws)))):
        raise FloatingPointError("CAVI produced non-finite variational draws")
    kind = "MAP" if opts.include_prior else "ML"
    learnt = given is None or bool(opts.learn_hyperparameters)
    trace = np.asarray(res.elbo)
    cavi = CAVIInfo(iterations=int(len(trace)), converged=bool(res.converged),
                    relative_change=_optional_float(res.relative_change), elbo=float(trace[-1]),
                    stochastic=bool(stochastic))
    info = FitInfo(hyperparameters=f"CAVI ELBO (type-II {kind})" if learnt else "given",
                   cavi=cavi)
    return RunOutput(**fields, point_hypers=True, info=info,
                     sample_stats={"elbo": trace[None]}, jitter=res.jitter)


def _is_sparse(opts: CAVIOptions, num_samples: int) -> bool:
    """CAVI with fewer inducing inputs than points is the sparse version (no N x N matrix)."""
    M = opts.num_inducing
    return M is not None and M < num_samples


def _devices_refusal(opts: CAVIOptions) -> str | None:
    """Why these options cannot split CAVI over devices: only the stochastic version can
    (its minibatches and full-data ELBO, ``ppgpc.models.logistic_softmax.stochastic_cavi``)."""
    if not opts.stochastic:
        return ("the full-batch CAVI runs on one device; give batch_size (or "
                "class_batch_size) for the stochastic CAVI, whose minibatches and full-data "
                "ELBO are split over the devices")
    return None


CAVI_METHOD = method("cavi", run_cavi_method, ("cavi", "inducing", "latent"), CAVIOptions,
                     scalable=_is_sparse, devices=_devices_refusal)
"""The driver's method ``"cavi"`` (``ppgpc.infer.methods.METHODS``)."""
