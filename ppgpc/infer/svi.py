"""Driver method ``"svi"``: stochastic variational inference of a NumPyro model and guide.

Generic over models. A spec provides the ``svi`` capability (``ppgpc.models.spec.SVI``):

* ``model``, ``guide``: NumPyro model and guide called as ``(data, kernel,
  batch_size)``, ``batch_size`` None for the full batch; minibatching is theirs;
* ``result``: ``(key, params, data, kernel, num_draws) -> dict`` turning the optimised
  parameters (constrained, by site name) into ``FitResult`` fields: ``hypers`` (point
  values by name), ``predictive_kind`` and either ``inducing`` (S, M, L) or ``latent``
  (S, N, L) draws.

The objective is NumPyro's ``TraceMeanField_ELBO`` (analytic KL wherever the guide/prior
pair has one registered). Optimiser: optax (Adam by default) under a learning-rate schedule
(linear warm-up then cosine decay by default), through ``numpyro.optim.optax_to_numpyro``.
With ``natural_gradient=gamma`` the Gaussian variational factors a spec names in
``spec.svi.gaussian_variational_sites`` ((mean site, ``lower_cholesky`` scale site) pairs) take
natural-gradient steps of size gamma instead (``ppgpc.infer.natgrad``; warm-up and decay in
``natural_gradient_schedule``), and the optimiser above moves the other sites only (Salimbeni
et al. 2018's combination of natural gradients for q(u) and Adam for hyperparameters).
Steps run in jitted windows of ``window`` steps (one ``lax.scan`` each); after each window
the mean ELBO estimates of the window are compared with the previous window's, and the run
stops when the ELBO has settled (the convergence check's own test: the change is within
three standard errors of its Monte Carlo noise, below ``SETTLED_PER_POINT`` nats per
training point, or below ``tol`` relative) for ``patience`` windows in a row, or after
``max_iter`` steps (rounded up to a whole number of windows); ``tol=None`` runs all
``max_iter`` steps, in the one loop of every method (``ppgpc.runtime.loop``), whose
progress bar shows the running ELBO. ``batch_size``, ``max_iter`` and ``learning_rate``
left at None take the model's own schedule (``SVI.default_options``: the SVGP's full
batch of 2000 steps at 0.1 up to 640 points, minibatches of 256 for 5000 steps at 0.01
above), or else ``DEFAULT_BATCH_SIZE`` and ``DEFAULT_STEPS``.

Validation monitor (option ``validation_data=(X_val, y_val)``, held-out inputs scaled as the
training inputs and integer labels): after each window the held-out NLL of the current
parameters, -mean_i log p(y_i | x_i), is scored by the spec's
``spec.svi.validation_log_predictive`` (``validation_draws`` draws per point, the same
key every time, so that iterates are compared on common draws). With ``restore_best`` (the
default) the result is built from the iterate of lowest validation NLL, the way the ILR paper
selects its SVI settings; with ``validation_patience=k`` the run also stops after k windows
without a new best. The held-out NLL trace is kept in ``info.validation`` (a
``ValidationInfo``: ``nll``, one value per window, at the ``steps``, with ``best_step``,
``best_nll``, that window's mean ELBO ``best_window_elbo`` and ``restored_best``, False
when the last iterate was the best); ``info.svi.stopped_on`` says why the run stopped
(``"max_iter"``, ``"elbo"`` or ``"validation"``) and ``info.svi.elbo`` stays the last
window's.

The result keeps the per-step ELBO estimates as ``sample_stats["elbo"]`` (1, steps) and in
``info.svi``: the last window's mean ELBO, steps, convergence, batch size, seconds per epoch
(an epoch is N / B steps, timed after the first, compiling, window).
"""

from __future__ import annotations

import dataclasses
import functools
import time
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax
from numpyro.infer import SVI, TraceMeanField_ELBO
from numpyro.optim import optax_to_numpyro

from ppgpc.infer.common import Options, as_draws, method
from ppgpc.infer.natgrad import NaturalGradientState, natural_gradient_optimizer
from ppgpc.infer.records import FitInfo, PointHypers, RunOutput, SVIInfo, ValidationInfo
from ppgpc.runtime.loop import Window, relative_change_below, run_windows
from ppgpc.runtime.padding import num_real_rows
from ppgpc.runtime.programs import jit

__all__ = ["SVI_METHOD", "SVIOptions", "run_svi", "svi_hypers",
           "schedule_options",
           "DEFAULT_BATCH_SIZE", "DEFAULT_STEPS", "default_batch_size", "make_optimizer",
           "learning_rate_at", "natural_step_size_at",
           "natural_gradient_schedule"]

DEFAULT_BATCH_SIZE = 256
"""Minibatch size when ``batch_size`` is not given and the model has no schedule of its own
(N if the data is smaller)."""

DEFAULT_STEPS = (5000, 0.01)
"""(max_iter, learning_rate) when they are not given and the model has no schedule of its
own (``SVI.default_options``)."""

_VALIDATION_STREAM = 0x76616C
"""``fold_in`` data of the validation monitor's key (not 0 or 1: see ``run_svi``)."""

_OPTIMIZERS = {"adam": optax.scale_by_adam,
               "adamw": lambda: optax.chain(optax.scale_by_adam(), optax.add_decayed_weights(1e-4)),
               "sgd": optax.identity}
"""The named optimisers without their learning rate (optax's ``adam``, ``adamw`` and
``sgd`` are these followed by the rate, ``_with_rate``)."""
_SCHEDULES = ("constant", "warmup_cosine", "exponential")


def _warmup_length(warmup_steps, max_iter):
    """Warm-up steps actually taken: ``warmup_steps`` clipped to [0, max_iter // 2] (Python
    or traced integers)."""
    return jnp.clip(warmup_steps, 0, max_iter // 2)


def _decay_after_warmup(peak, schedule: str, max_iter, warm, t):
    """The schedule's shape after its warm-up, at ``t`` steps since the warm-up ended,
    starting at ``peak``: cosine decay to 5% of ``peak`` at step ``max_iter``
    (``"warmup_cosine"``), halving every ``max_iter / 4`` steps (``"exponential"``), or
    constant. The learning rate and the natural-gradient step size share it, so the two
    decay together. Every number may be traced: a compiled SVI program takes them as
    arguments."""
    if schedule == "warmup_cosine":
        horizon = jnp.maximum(max_iter - warm, 1)
        cosine = 0.5 * (1.0 + jnp.cos(jnp.pi * jnp.minimum(t, horizon) / horizon))
        return peak * (0.95 * cosine + 0.05)
    if schedule == "exponential":
        return peak * 0.5 ** (jnp.maximum(t, 0) / jnp.maximum(max_iter // 4, 1))
    return jnp.full(jnp.shape(t), peak)


def learning_rate_at(count, schedule: str, learning_rate, max_iter, warmup_steps):
    """The learning rate at step ``count`` of a named schedule: ``"constant"``;
    ``"warmup_cosine"`` (a linear rise from 0 over ``warmup_steps``, clipped to
    [1, max_iter // 2], then cosine decay to 5% of the peak at ``max_iter``);
    ``"exponential"`` (halved every ``max_iter / 4`` steps). The numbers may be traced."""
    if schedule == "warmup_cosine":
        warm = jnp.maximum(_warmup_length(warmup_steps, max_iter), 1)
        rise = -learning_rate * (1.0 - jnp.clip(count, 0, warm) / warm) + learning_rate
        return jnp.where(count < warm, rise,
                         _decay_after_warmup(learning_rate, schedule, max_iter, warm,
                                             count - warm))
    return _decay_after_warmup(learning_rate, schedule, max_iter, 0, count)


def _with_rate(optimizer: str, rate) -> optax.GradientTransformation:
    """The named optimiser at the learning rate ``rate(step)``."""
    return optax.chain(_OPTIMIZERS[optimizer](), optax.scale_by_schedule(lambda c: -rate(c)))


def _scheduled(optimizer: str, schedule: str):
    """``(learning_rate, max_iter, warmup_steps) -> optax transformation``: the named
    optimiser under the named schedule, its numbers arguments (``optax.inject_hyperparams``
    keeps them in the optimiser state, so a compiled program takes them as data)."""

    def build(learning_rate, max_iter, warmup_steps):
        return _with_rate(optimizer, lambda count: learning_rate_at(
            count, schedule, learning_rate, max_iter, warmup_steps))

    return build


def make_optimizer(optimizer, learning_rate: float, schedule, max_iter: int,
                   warmup_steps: int) -> optax.GradientTransformation:
    """An optax optimiser with a learning-rate schedule.

    Args:
        optimizer: ``"adam"``, ``"adamw"``, ``"sgd"`` or an ``optax.GradientTransformation``
            (used as it is; ``learning_rate`` and ``schedule`` are then ignored).
        learning_rate: peak learning rate.
        schedule: ``"constant"``, ``"warmup_cosine"`` or ``"exponential"``
            (``learning_rate_at``), or an optax schedule (a callable step -> rate).
    """
    if isinstance(optimizer, optax.GradientTransformation):
        return optimizer
    if optimizer not in _OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose from {sorted(_OPTIMIZERS)} "
                         "or pass an optax.GradientTransformation")
    if not learning_rate > 0:
        raise ValueError(f"learning_rate must be positive, got {learning_rate}")
    if callable(schedule):
        return _with_rate(optimizer, schedule)
    if schedule not in _SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; choose from {list(_SCHEDULES)} or "
                         "pass an optax schedule")
    return _scheduled(optimizer, schedule)(learning_rate, max_iter, warmup_steps)


_NATURAL_START = 1e-4
"""First natural-gradient step size of the warm-up (Salimbeni et al. 2018 start at 1e-4)."""


def natural_step_size_at(count, gamma, schedule, max_iter, warmup_steps):
    """The natural-gradient step size at step ``count``: a log-linear rise from 1e-4 to
    ``gamma`` over ``warmup_steps`` (clipped to [0, max_iter // 2]; Salimbeni et al. 2018),
    then constant (``schedule="constant"``), cosine decay to 5% of ``gamma`` at ``max_iter``
    (``"warmup_cosine"``) or halving every ``max_iter / 4`` steps (``"exponential"``), the
    shape the other parameters' learning rate follows. A callable ``schedule`` is not reused
    here: the steps then stay at ``gamma`` after the warm-up. The numbers may be traced."""
    warm = _warmup_length(warmup_steps, max_iter)
    start = jnp.minimum(_NATURAL_START, gamma)
    shape = schedule if isinstance(schedule, str) else "constant"
    frac = jnp.minimum(count / jnp.maximum(warm, 1), 1.0)
    rise = jnp.exp((1.0 - frac) * jnp.log(start) + frac * jnp.log(gamma))
    return jnp.where(count < warm, rise,
                     _decay_after_warmup(gamma, shape, max_iter, warm, count - warm))


def natural_gradient_schedule(gamma: float, schedule, max_iter: int, warmup_steps: int):
    """``natural_step_size_at`` as an optax schedule (step -> gamma) for fixed numbers."""
    return lambda count: natural_step_size_at(count, gamma, schedule, max_iter, warmup_steps)


def default_batch_size(N: int) -> int:
    """The minibatch size B when none is given: min(``DEFAULT_BATCH_SIZE``, N)."""
    return min(DEFAULT_BATCH_SIZE, N)


@dataclasses.dataclass(frozen=True)
class SVIOptions(Options):
    """Options of ``"svi"``; ``batch_size``, ``max_iter`` and ``learning_rate`` None take
    the model's own schedule (``SVI.default_options``) or ``DEFAULT_STEPS`` and
    ``default_batch_size`` (``schedule_options``)."""

    batch_size: int | None = None
    """Minibatch size B (B = N: the full batch)."""
    max_iter: int | None = None
    learning_rate: float | None = None
    optimizer: Any = "adam"
    """``"adam"``, ``"adamw"``, ``"sgd"`` or an ``optax.GradientTransformation``."""
    schedule: Any = "warmup_cosine"
    """``"constant"``, ``"warmup_cosine"``, ``"exponential"`` or an optax schedule."""
    warmup_steps: int = 100
    num_particles: int = 1
    tol: float | None = 1e-4
    patience: int = 3
    window: int = 100
    num_draws: int = 500
    progress_bar: bool = True
    natural_gradient: float | None = None
    validation_data: Any = None
    validation_draws: int = 64
    restore_best: bool = True
    validation_patience: int | None = None

    COUNTS = ("max_iter", "num_particles", "patience", "window", "num_draws",
              "validation_draws", "validation_patience", "batch_size")
    FLAGS = ("progress_bar", "restore_best")
    OPTIONAL = ("max_iter", "validation_patience", "batch_size")
    VALUES = Options.VALUES + ("max_iter", "learning_rate", "warmup_steps", "tol", "patience",
                               "validation_data", "validation_patience", "restore_best")

    def extra_checks(self) -> "SVIOptions":
        gamma = self.natural_gradient
        if gamma is not None and (isinstance(gamma, bool) or not isinstance(
                gamma, (int, float)) or not 0 < gamma <= 1):
            raise ValueError("svi option natural_gradient must be a step size in (0, 1] or "
                             f"None, got {gamma!r}")
        if self.tol is not None and not self.tol >= 0:
            raise ValueError(f"svi option tol must be >= 0 or None, got {self.tol!r}")
        return self.replace(natural_gradient=None if gamma is None else float(gamma))


def schedule_options(spec, opts: SVIOptions, N: int) -> SVIOptions:
    """``opts`` with ``batch_size``, ``max_iter`` and ``learning_rate`` that are None filled
    in: from the model's own schedule (``spec.svi.default_options(N, batch_size)``) where it
    has one, else B = min(``DEFAULT_BATCH_SIZE``, N) and ``DEFAULT_STEPS``.

    Raises:
        ValueError: a ``batch_size`` above N.
    """
    if opts.batch_size is not None and opts.batch_size > N:
        raise ValueError(f"batch_size B = {opts.batch_size} exceeds the number of training "
                         f"points N = {N}; choose B <= N")
    own = spec.svi.default_options
    if own is not None:
        defaults = own(N, opts.batch_size)
    else:
        defaults = {"batch_size": default_batch_size(N), "max_iter": DEFAULT_STEPS[0],
                    "learning_rate": DEFAULT_STEPS[1]}
    return opts.replace(**{name: defaults[name] for name in (
        "batch_size", "max_iter", "learning_rate") if getattr(opts, name) is None})


def _check_validation_data(spec, data, validation_data):
    """``validation_data`` as float64 inputs (n, D) and int32 labels (n,), with errors that
    name the problem (shape, NaN, labels outside 0..C-1, a model without a monitor)."""
    score = spec.svi.validation_log_predictive
    if score is None:
        raise ValueError(f"model {spec.name!r} has no held-out predictive "
                         "(svi.validation_log_predictive); validation_data applies "
                         "to the sparse variational GP classifiers")
    try:
        X_val, y_val = validation_data
    except (TypeError, ValueError):
        raise ValueError("svi option validation_data must be a pair (X_val, y_val), got "
                         f"{type(validation_data).__name__}") from None
    X_val, y_val = np.asarray(X_val, dtype=np.float64), np.asarray(y_val)
    D = data.X.shape[1]
    if X_val.ndim != 2 or X_val.shape[1] != D or X_val.shape[0] < 1:
        raise ValueError(f"validation inputs must have shape (n, {D}) with n >= 1 (the "
                         f"training inputs have D = {D}), got {X_val.shape}")
    if not np.all(np.isfinite(X_val)):
        raise ValueError("validation inputs contain NaN or infinite values")
    if y_val.shape != (X_val.shape[0],):
        raise ValueError(f"validation labels must have shape ({X_val.shape[0]},) to match the "
                         f"validation inputs, got {y_val.shape}")
    if not np.issubdtype(y_val.dtype, np.integer):
        raise ValueError("validation labels must be integer class indices 0..C-1, got dtype "
                         f"{y_val.dtype}")
    C = data.num_classes
    if y_val.min() < 0 or y_val.max() >= C:
        raise ValueError(f"validation labels must lie in 0..{C - 1} (C = {C} classes), got "
                         f"{int(y_val.min())}..{int(y_val.max())}")
    return score, jnp.asarray(X_val), jnp.asarray(y_val, dtype=jnp.int32)


def _natural_gradient_refusals(state) -> int:
    """Refused natural-gradient steps, from the optimiser state inside NumPyro's
    ``SVIState`` (0 without natural gradients)."""
    found = [s for s in jax.tree.leaves(state.optim_state, is_leaf=lambda x: isinstance(
        x, NaturalGradientState)) if isinstance(s, NaturalGradientState)]
    return int(found[0].refused) if found else 0


class _ScheduleArgs(NamedTuple):
    """The numbers of an SVI run's schedule, arguments of its compiled programs (a run that
    changes only these compiles nothing new)."""

    learning_rate: jax.Array
    """Peak learning rate."""
    max_iter: jax.Array
    """Steps of the whole schedule (a whole number of windows)."""
    warmup_steps: jax.Array
    """Warm-up steps (``learning_rate_at``)."""
    natural_gradient: jax.Array
    """Peak natural-gradient step size gamma (unused without natural gradients)."""


def _with_schedule(state, numbers: _ScheduleArgs):
    """NumPyro's ``SVIState`` with the numbers of its schedule set in the optimiser state
    (``optax.inject_hyperparams``'s ``hyperparams``)."""
    step, (params, inner) = state.optim_state
    values = {name: jnp.asarray(getattr(numbers, name), dtype=inner.hyperparams[name].dtype)
              for name in inner.hyperparams}
    return state._replace(optim_state=(step, (params, inner._replace(hyperparams=values))))


@functools.lru_cache(maxsize=32)
def _svi_programs(spec, optimizer, schedule, natural: bool, num_particles: int,
                  batch_size: int | None, window: int):
    """(svi, init, run_window) for one structure, built once per process.

    ``init(key, data, kernel, numbers)`` and ``run_window(state, data, kernel)`` (``window``
    SVI steps in one ``lax.scan``; returns the state and the (window,) ELBO estimates) take
    the data, the kernel and the schedule's numbers (``_ScheduleArgs``, kept in the optimiser
    state) as arguments, not as captured constants, so a new data set of the same shapes
    or another learning rate, ``max_iter`` or warm-up reuses the compiled programs (and the
    persistent cache can serve them). A user's own optax optimiser or schedule is used as
    it is.
    """
    if isinstance(optimizer, optax.GradientTransformation) or callable(schedule):
        base = optimizer if not isinstance(optimizer, str) else _with_rate(optimizer, schedule)

        def build(learning_rate, max_iter, warmup_steps, natural_gradient):
            return base
    else:
        scheduled = _scheduled(optimizer, schedule)

        def build(learning_rate, max_iter, warmup_steps, natural_gradient):
            return scheduled(learning_rate, max_iter, warmup_steps)
    if natural:
        sites = dict(spec.svi.gaussian_variational_sites)
        if not sites:
            raise ValueError(f"model {spec.name!r} declares no Gaussian variational factor "
                             "(svi.gaussian_variational_sites); natural_gradient applies "
                             "to the sparse variational GP classifiers only")
        others = build

        def build(learning_rate, max_iter, warmup_steps, natural_gradient):
            def gamma(count):
                return natural_step_size_at(count, natural_gradient, schedule, max_iter,
                                            warmup_steps)

            return natural_gradient_optimizer(sites, gamma, others(
                learning_rate, max_iter, warmup_steps, natural_gradient))

    placeholder = _ScheduleArgs(1.0, 1, 0, 1.0)
    optim = optax.inject_hyperparams(build)(**placeholder._asdict())
    svi = SVI(spec.svi.model, spec.svi.guide, optax_to_numpyro(optim),
              TraceMeanField_ELBO(num_particles=num_particles))

    @jit
    def init(key, data, kernel, numbers):
        return _with_schedule(svi.init(key, data, kernel, batch_size), numbers)

    @jit
    def run_window(state, data, kernel):
        def body(s, _):
            s, loss = svi.update(s, data, kernel, batch_size)
            return s, -loss

        return lax.scan(body, state, None, length=window)

    return svi, init, run_window


def run_svi(spec, data, kernel, key, opts) -> RunOutput:
    """Runner of method ``"svi"`` (``ppgpc.infer.methods.METHODS``; the module docstring)."""
    N = num_real_rows(data)
    o = schedule_options(spec, opts, N)
    B, window = o.batch_size, min(o.window, o.max_iter)
    max_iter = -(-o.max_iter // window) * window  # whole windows
    # a full batch is batch_size None to the model: one program for every N of a bucket
    ng = o.natural_gradient
    # checks the optimiser's and the schedule's names and the rate
    make_optimizer(o.optimizer, float(o.learning_rate), o.schedule, max_iter,
                   int(o.warmup_steps))
    svi, init, run_window = _svi_programs(
        spec, o.optimizer, o.schedule, ng is not None, o.num_particles,
        None if B >= N else B, window)
    numbers = _ScheduleArgs(float(o.learning_rate), max_iter, int(o.warmup_steps),
                           1.0 if ng is None else float(ng))
    k_init, k_draws = jax.random.split(key)
    # The monitor's key is folded in apart from the split, so runs without a monitor keep
    # their keys. Not fold_in(key, 1): with JAX's partitionable threefry that equals
    # split(key)[1], k_draws, and the held-out draws would reuse q(v)'s normals.
    k_val = jax.random.fold_in(key, _VALIDATION_STREAM)
    monitor = None
    if o.validation_data is not None:
        monitor = _check_validation_data(spec, data, o.validation_data)
    state = init(k_init, data, kernel, numbers)

    trace, means, val_nll, val_steps = [], [], [], []
    timed_steps, timed_seconds = 0, 0.0
    best, stale, calm = None, 0, 0  # the monitor's best (nll, step, params); the ELBO test's

    def run(state, _):
        nonlocal timed_steps, timed_seconds, best, stale, calm
        start = time.perf_counter()
        state, elbos = run_window(state, data, kernel)
        elbos = np.asarray(elbos)
        steps = window * (len(trace) + 1)
        if trace:  # the first window includes compilation
            timed_seconds += time.perf_counter() - start
            timed_steps += window
        if not np.all(np.isfinite(elbos)):
            raise FloatingPointError(
                f"the ELBO became non-finite within steps {steps - window}..{steps}; lower "
                f"the learning_rate (now {o.learning_rate}) or check the inputs' scale")
        trace.append(elbos)
        means.append(float(elbos.mean()))
        postfix = {"elbo": f"{means[-1]:.4g}"}
        if monitor is not None:
            score, X_val, y_val = monitor
            current = svi.get_params(state)
            nll = -float(jnp.mean(score(k_val, current, data, kernel, X_val, y_val,
                                        o.validation_draws)))
            nll = nll if np.isfinite(nll) else float("inf")
            val_nll.append(nll)
            val_steps.append(steps)
            postfix["val_nll"] = f"{nll:.4g}"
            if best is None or nll < best[0]:
                best, stale = (nll, steps, current), 0
            else:
                stale += 1
            if o.validation_patience is not None and stale >= o.validation_patience:
                return state, Window(window, postfix, "validation")
        if o.tol is not None and len(trace) > 1:
            # the convergence check's own test (``_settled``) decides when to stop
            settled = _settled(trace[-1], trace[-2], o.tol, N)[0]
            calm = calm + 1 if settled else 0
            if calm >= o.patience:
                return state, Window(window, postfix, "elbo")
        return state, Window(window, postfix)

    state, stopped = run_windows(run, state, cap=max_iter, size=window, desc="SVI",
                                 unit="step", progress=bool(o.progress_bar),
                                 cap_reason="max_iter")
    steps, stopped_on = stopped.units, stopped.reason
    params = svi.get_params(state)
    restored = monitor is not None and bool(o.restore_best) and best[1] != steps
    if monitor is not None and not np.isfinite(best[0]):
        raise FloatingPointError("the validation NLL was non-finite at every window; check "
                                 "the validation inputs' scale")
    if restored:
        params = best[2]
    refused = _natural_gradient_refusals(state)
    out = spec.svi.result(k_draws, params, data, kernel, o.num_draws)
    for name in ("inducing", "latent"):
        if name in out:
            if not bool(jnp.all(jnp.isfinite(out[name]))):
                raise FloatingPointError(f"SVI produced non-finite {name} draws")
            out[name] = out[name][None]
    out.setdefault("latent", None)
    windows, trace = trace, np.concatenate(trace)
    per_step = timed_seconds / timed_steps if timed_steps else float("nan")
    # a model whose objective adds the hyperparameters' log prior fits type-II MAP ones, as
    # cavi.py names its kind
    prior = spec.svi.includes_hyper_prior
    kind = "MAP" if prior is not None and prior(data) else "ML"
    converged, change = _svi_converged(windows, stopped, o.tol, N)
    record = SVIInfo(steps=int(steps), converged=converged, elbo=float(means[-1]),
                     batch_size=int(B), seconds_per_step=float(per_step),
                     seconds_per_epoch=float(per_step * N / B), stopped_on=stopped_on,
                     natural_gradient=None if ng is None else float(ng),
                     natural_gradient_refused=None if ng is None else int(refused),
                     relative_change=change)
    validation = None if monitor is None else ValidationInfo(
        nll=tuple(val_nll), steps=tuple(val_steps), best_nll=float(best[0]),
        best_step=int(best[1]), size=int(monitor[1].shape[0]),
        best_window_elbo=float(means[val_steps.index(best[1])]), restored_best=bool(restored))
    if ng is not None and refused:
        warnings.warn(f"{refused} natural-gradient step(s) of a Gaussian factor left its "
                      "precision indefinite and were refused (the factor kept its value); "
                      f"lower natural_gradient (now {ng}) or raise the batch size",
                      UserWarning, stacklevel=2)
    info = FitInfo(hyperparameters=f"SVI ELBO (type-II {kind})", svi=record,
                   validation=validation)
    return RunOutput(hypers=as_draws(out.pop("hypers")), point_hypers=True, info=info,
                     sample_stats={"elbo": trace[None]}, **out)


def svi_hypers(spec, data, kernel, key, *, progress: bool) -> PointHypers:
    """The kernel hyperparameters of the model's SVI fit at the model's own schedule
    (``SVI.default_options``; every other option at its ``SVIOptions`` default): the point
    that NUTS on the latent form of a model without a collapsed form holds fixed
    (``ppgpc.infer.nuts``), with the run's ``SVIInfo`` as its record.

    Args:
        spec: a model spec with the ``svi`` capability.
        data: its prepared (possibly padded) data; kernel: the kernel.
        key: the PRNG key of the SVI run.
        progress: show the SVI progress bar.
    """
    out = run_svi(spec, data, kernel, key,
                  SVIOptions(num_draws=1, progress_bar=bool(progress)))
    values = {k: np.asarray(v[0, 0]) for k, v in out.hypers.items() if k.startswith("kernel_")}
    return PointHypers(values, out.info.hyperparameters, out.info.svi)


SETTLED_PER_POINT = 1e-3
"""Two windows of SVI steps have settled when their mean ELBO differ by less than this many
nats per training point (or by less than their noise, ``_settled``)."""


def _settled(last, before, tol, num_points: int) -> tuple[bool, float]:
    """Whether the ELBO has settled between two windows of per-step estimates, and its
    relative change: the windows' means differ by less than three standard errors of that
    difference (the per-step estimates are noisy: each mean has sd / sqrt(window)), by less
    than ``SETTLED_PER_POINT`` per training point, or by less than ``tol`` relative (a
    deterministic objective has no noise)."""
    last, before = np.asarray(last), np.asarray(before)
    difference = abs(last.mean() - before.mean())
    change = float(difference / max(abs(last.mean()), 1.0))
    noise = np.sqrt(last.var(ddof=1) / last.size + before.var(ddof=1) / before.size)
    settled = (difference < 3.0 * noise or difference < SETTLED_PER_POINT * num_points
               or (tol is not None and relative_change_below(last.mean(), before.mean(), tol)))
    return bool(settled), change


def _svi_converged(windows: list, stopped, tol, num_points: int) -> tuple[bool, float | None]:
    """Whether the SVI run converged, from how the loop stopped (``stopped``, a
    ``ppgpc.runtime.loop.Stopped``), and the relative change of its last two windows' mean
    ELBO (None after one window): converged when the ELBO test or the validation monitor
    stopped the run. A run at ``max_iter`` is not, even when its last two windows happened
    to agree, unless its stopping test was turned off (``tol=None``: it was asked to run
    every step), where the last two windows' mean ELBO must have settled (``_settled``)."""
    change = settled = None
    if len(windows) > 1:
        settled, change = _settled(windows[-1], windows[-2], tol, num_points)
    return bool(stopped.converged or (tol is None and bool(settled))), change


SVI_METHOD = method("svi", run_svi, "svi", SVIOptions, scalable=True, devices=True)
"""The driver's method ``"svi"`` (``ppgpc.infer.methods.METHODS``)."""
