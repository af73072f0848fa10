"""The logistic-softmax GP's model: prepared data, NumPyro sites (the latent form and the
augmented form), the CAVI and hyperparameter fits, and the ``ModelSpec`` that the driver
runs (``SPEC``). The package's face (``ppgpc.models.logistic_softmax``) gives the equations
and how the algorithm modules fit together.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from ppgpc.gp import exact, linalg
from ppgpc.gp.inducing import resolve_num_inducing
from ppgpc.gp.kernels import gram, kernel_params, sample_kernel_params
from ppgpc.models.logistic_softmax.cavi import (CAVIResult, inducing_latent, run_cavi, sample_q_f,
                                                sample_q_v)
from ppgpc.models.logistic_softmax.gibbs import gibbs_kernel
from ppgpc.models.logistic_softmax.gibbs_inducing import inducing_gibbs_kernel
from ppgpc.models.logistic_softmax.link import log_link
from ppgpc.models.logistic_softmax.stochastic_cavi import run_stochastic_cavi
from ppgpc.models.spec import CAVI, Gibbs, HyperFit, Inducing, Latent, ModelSpec, record_jitter
from ppgpc.polyagamma import PolyaGamma
from ppgpc.runtime.blocks import Placement, replicate
from ppgpc.runtime.padding import mask_gram, pad_rows, real_rows_only, row_mask
from ppgpc.validation import check_count

__all__ = [
    "LSMData",
    "prepare",
    "pad",
    "pads",
    "num_latent",
    "initial_hypers",
    "latent_model",
    "augmented_model",
    "latent_conditional",
    "fit_cavi",
    "fit_hypers",
    "fit_inducing_hypers",
    "INDUCING_FIT_BATCH",
    "INDUCING_FIT_ITERATIONS",
    "SPEC",
    "on_devices",
    "FULL_CAVI_ON_ONE_DEVICE",
]


class LSMData(NamedTuple):
    """Prepared training data of the logistic-softmax GP."""

    X: jax.Array
    """(N, D) inputs."""
    y: jax.Array
    """(N,) integer labels in 0..C-1."""
    num_classes: int
    """C."""
    onehot: jax.Array
    """(N, C) one-hot labels y'."""
    placement: Placement = Placement()
    """Where the stochastic CAVI's sums over points run (static): one device, or the
    devices of a mesh (``on_devices``, the driver's ``devices``)."""
    mask: jax.Array | None = None
    """(N,) row mask of data padded by ``pad`` (1 real, 0 padded); None when unpadded."""

    @property
    def inducing_mask(self) -> None:
        """No inducing inputs travel with the rows (``ppgpc.models.spec.TrainingData``)."""
        return None


FULL_CAVI_ON_ONE_DEVICE = (
    "the full-batch CAVI runs on one device; give batch_size (or class_batch_size) for the "
    "stochastic CAVI, whose minibatches and full-data ELBO are split over the devices")
"""Why ``cavi`` without minibatches refuses a mesh (the driver's refusal says it too)."""


def on_devices(data: LSMData, mesh) -> LSMData:
    """``data`` with the stochastic CAVI's sums over points split over the devices of
    ``mesh`` (a ``jax.sharding.Mesh`` with an axis ``"data"``; ``stochastic_cavi``:
    each device takes its share of the minibatch, one ``psum`` adds the statistics, q(v),
    the hyperparameters and the optimiser state stay replicated) and the arrays replicated
    on the mesh (``ppgpc.runtime.blocks.replicate``)."""
    placed = data._replace(placement=Placement(mesh=mesh,
                                                block_rows=data.placement.block_rows))
    return replicate(placed, mesh)


def prepare(X, y, num_classes: int) -> LSMData:
    """One-hot labels; no model options. Built on the host: an eager JAX op at the data's
    shape would compile a program per number of training points."""
    if num_classes < 2:
        raise ValueError(f"logistic-softmax needs at least 2 classes, got {num_classes}")
    y = np.asarray(y)
    return LSMData(
        X=jax.device_put(np.asarray(X, dtype=np.float64)), y=jax.device_put(y),
        num_classes=int(num_classes),
        onehot=jax.device_put(np.eye(num_classes, dtype=np.float64)[y]),
    )


def pad(data: LSMData, size: int) -> LSMData:
    """``data`` padded to ``size`` rows (``ppgpc.runtime.padding``): inputs and labels zero and the
    one-hot rows zero on the padded rows, and the row mask."""
    mask = row_mask(data.X.shape[0], size) if data.mask is None else pad_rows(data.mask, size)
    return data._replace(X=pad_rows(data.X, size), y=pad_rows(data.y, size),
                         onehot=pad_rows(data.onehot, size), mask=mask)


def pads(method: str, options: dict) -> bool:
    """The fits that run on padded data: NUTS and the full CAVI (no inducing inputs, no
    minibatches); the Gibbs samplers and the sparse and stochastic CAVI run at N."""
    if method == "nuts":
        return True
    return method == "cavi" and all(options.get(k) is None for k in (
        "num_inducing", "batch_size", "class_batch_size"))


def num_latent(num_classes: int) -> int:
    """L = C latent GPs."""
    return num_classes


def initial_hypers(data: LSMData, kernel) -> dict:
    """Kernel variance 4 (logits of order +-2), lengthscales at sqrt(D)."""
    start = kernel.initial_params(data.X.shape[1], variance=4.0)
    return {"kernel_" + k: v for k, v in start.items()}


def prior_factor(data: LSMData, kernel, hypers: dict) -> linalg.Cholesky:
    """chol(K) (N, N) of the kernel with hyperparameters ``hypers`` at the training inputs
    (padded rows masked)."""
    return linalg.cholesky(mask_gram(gram(kernel, kernel_params(hypers), data.X), data.mask),
                           rows=data.mask)


def _whitened_latent(data: LSMData, kernel, fixed_hypers, factor=None):
    if factor is None:
        params = sample_kernel_params(kernel, data.X.shape[1], fixed=fixed_hypers)
        factor = linalg.cholesky(mask_gram(gram(kernel, params, data.X), data.mask),
                                 rows=data.mask)
    record_jitter(factor)
    return exact.whitened_latent(factor.factor, data.onehot.shape[-1])


def latent_model(data: LSMData, kernel, fixed_hypers: dict | None = None,
                 factor: linalg.Cholesky | None = None) -> None:
    """Plain (non-augmented) model: f^c = chol(K) v^c, y_i ~ Categorical(log_link(f_i)).

    Sites: ``kernel_*`` (unless fixed), ``f_white`` (C, N), deterministic ``f`` (N, C),
    ``y`` observed (N,), one label per point inside ``numpyro.plate("data", N)`` (one
    log-likelihood term per point for ``az.from_numpyro``; dims from
    ``ppgpc.infer.arviz_dims``). Padded rows (``pad``) have weight zero. ``factor``:
    ``prior_factor(data, kernel, fixed_hypers)``, given to skip the factorisation.
    """
    f = _whitened_latent(data, kernel, fixed_hypers, factor)
    with numpyro.plate("data", data.y.shape[0], dim=-1), real_rows_only(data.mask):
        numpyro.sample("y", dist.Categorical(logits=log_link(f)), obs=data.y)


def augmented_model(data: LSMData, kernel, fixed_hypers: dict | None = None) -> None:
    """The augmented joint of appendix A.1 (documentation, ``Predictive`` of n and omega).

    Sites: ``kernel_*``, ``f_white``, ``f`` as in ``latent_model``; ``lambda`` (N,) with a
    flat (improper) prior; ``n`` (N, C) ~ Poisson(lambda); ``omega`` (N, C) ~
    PG(y' + n, 0); the factor ``y_augmented`` = sum_ic [-(y' + n) log 2
    + (y' - n) f / 2 - f^2 omega / 2]. Marginalising (lambda, n, omega) gives ``latent_model``.
    """
    f = _whitened_latent(data, kernel, fixed_hypers)
    Y = data.onehot
    N, C = Y.shape
    lam = numpyro.sample("lambda", dist.ImproperUniform(dist.constraints.positive, (N,), ()))
    n = numpyro.sample("n", dist.Poisson(jnp.broadcast_to(lam[:, None], (N, C))).to_event(2))
    omega = numpyro.sample("omega", PolyaGamma(Y + n, jnp.zeros((N, C))).to_event(2))
    numpyro.factor("y_augmented", jnp.sum(
        -(Y + n) * math.log(2.0) + 0.5 * (Y - n) * f - 0.5 * f**2 * omega))


def latent_conditional(data: LSMData, kernel, hypers: dict, f, Xs):
    """f(Xs) | f(X) = f under the GP prior: mean (n, C), variance (n, C)."""
    return exact.latent_conditional(kernel, kernel_params(hypers), data.X, f, Xs, data.mask)


def fit_cavi(data: LSMData, kernel, hypers: dict | None = None, *, num_inducing: int | None = None,
         learn_hypers: bool | None = None, learn_inducing: bool = True,
         include_prior: bool = False, max_iter: int = 300, tol: float = 1e-6,
         hyper_steps: int = 1, learning_rate: float = 0.05, key: jax.Array | None = None,
         batch_size: int | None = None, class_batch_size: int | None = None,
         step_size_delay: float = 1.0, step_size_power: float = 0.6,
         elbo_every: int = 10, progress: bool = False) -> CAVIResult:
    """Coordinate-ascent VI for the augmented model (appendix A.2,
    ``cavi.run_cavi``), or its stochastic version with data minibatches
    and class subsampling (appendix A.3, Algorithm 2, ``stochastic_cavi``) when
    ``batch_size`` or ``class_batch_size`` is given.

    Args:
        data: prepared data; kernel: the kernel.
        hypers: kernel hyperparameters (the start when learnt); ``None``: ``initial_hypers``.
        num_inducing: ``None``: the full version (Z = X, not learnt); M: M inducing inputs
            by the library's rule (``ppgpc.gp.inducing.resolve_num_inducing``: M > N is
            refused), the full version when M = N.
        learn_hypers: type-II ML (MAP with ``include_prior``) of the hyperparameters by Adam
            steps on the ELBO between CAVI sweeps; default: learn iff ``hypers`` is None.
        learn_inducing: learn Z too (sparse version only).
        max_iter: outer iterations (CAVI sweep + ``hyper_steps`` Adam steps each).
        tol: stop when the relative ELBO change falls below it.
        key: root PRNG key of the random initial inducing inputs (a subset of X, from
            ``fold_in(key, 0)``) and of the minibatches (``fold_in(key, 1)``); None:
            ``PRNGKey(0)``.
        batch_size: |B| points per stochastic iteration (``None``: all N).
        class_batch_size: |K| classes per stochastic iteration (``None``: all C).
        step_size_delay, step_size_power: Robbins-Monro step size of the stochastic version,
            rho_t = (t + delay)^-power, t = 0, 1, ... (power in (0.5, 1] for convergence).
        elbo_every: stochastic version: evaluate the full-data ELBO every this many
            iterations; ``tol`` compares consecutive evaluations.
        progress: show the iterations and the ELBO on stderr (``ppgpc.runtime.progress.bar``).

    On the devices of a mesh (``on_devices``) the stochastic version splits every minibatch
    and every full-data ELBO over them; the full version refuses a mesh.

    Returns:
        ``CAVIResult``; with fixed hyperparameters the full version's ELBO trace never
        decreases (the stochastic version's trace is noisy: one value per evaluation).
    """
    Y, X = data.onehot, data.X
    N, C = Y.shape
    stochastic = batch_size is not None or class_batch_size is not None
    if data.mask is not None and (stochastic or num_inducing is not None):
        raise ValueError("padded data (pad) is for the full CAVI; the sparse and stochastic "
                         "versions run on the data as prepared")
    if data.placement.mesh is not None and not stochastic:
        raise ValueError(FULL_CAVI_ON_ONE_DEVICE)
    if stochastic:
        batch_size = N if batch_size is None else check_count("batch_size", batch_size)
        class_batch_size = (C if class_batch_size is None
                            else check_count("class_batch_size", class_batch_size))
        if not 1 <= batch_size <= N:
            raise ValueError(f"batch_size must be in 1..N = {N}, got {batch_size}")
        if not 1 <= class_batch_size <= C:
            raise ValueError(f"class_batch_size must be in 1..C = {C}, got {class_batch_size}")
        if not 0.5 < step_size_power <= 1.0 or step_size_delay < 1.0:
            raise ValueError("the Robbins-Monro step size needs step_size_power in (0.5, 1] "
                             f"and step_size_delay >= 1, got {step_size_power}, "
                             f"{step_size_delay}")
        if int(elbo_every) < 1:
            raise ValueError(f"elbo_every must be a positive integer, got {elbo_every}")
    if num_inducing is not None:
        num_inducing = resolve_num_inducing(check_count("num_inducing", num_inducing), N)
    if learn_hypers is None:
        learn_hypers = hypers is None
    include_prior = include_prior and learn_hypers  # (one compiled sweep for fixed hypers)
    hypers = initial_hypers(data, kernel) if hypers is None else hypers
    root = jax.random.PRNGKey(0) if key is None else key
    if num_inducing is None or num_inducing == N:
        Z, learn_inducing = X, False
    else:
        idx = jax.random.choice(jax.random.fold_in(root, 0), N, (num_inducing,), replace=False)
        Z = X[jnp.sort(idx)]
    common = dict(learn_hypers=bool(learn_hypers), learn_inducing=bool(learn_inducing),
                  include_prior=bool(include_prior), max_iter=int(max_iter), tol=float(tol),
                  steps_per_iteration=int(hyper_steps), learning_rate=learning_rate)
    if stochastic:
        return run_stochastic_cavi(
            jax.random.fold_in(root, 1), Y, X, kernel, hypers, Z, batch_size=batch_size,
            class_batch_size=class_batch_size, step_size_delay=step_size_delay,
            step_size_power=step_size_power, elbo_every=int(elbo_every), progress=progress,
            placement=data.placement, **common)
    return run_cavi(Y, X, kernel, hypers, Z, progress=progress, mask=data.mask, **common)


def fit_hypers(data: LSMData, kernel, *, include_prior: bool = True, **options):
    """Kernel hyperparameters on the full CAVI ELBO (a ``HyperFit``).

    Type-II MAP by default (ELBO plus the kernel's log-prior): with ARD lengthscales, type-II
    ML on the ELBO can run the lengthscales and the variance off to large values without
    converging (docs/records/defaults.md, "The logistic-softmax GP's hyperparameters").
    """
    res = fit_cavi(data, kernel, None, include_prior=include_prior, **options)
    kind = "type-II MAP" if include_prior else "type-II ML"
    return HyperFit(res.hypers, f"CAVI ELBO ({kind})", elbo=float(res.elbo[-1]),
                    iterations=int(len(res.elbo)), converged=bool(res.converged),
                    relative_change=res.relative_change)


INDUCING_FIT_BATCH = 128
"""Minibatch size (points, at most N) of the stochastic sparse CAVI that fits the point of
the inducing-point Gibbs sampler (``fit_inducing_hypers``; the ILR paper's Sparse-LSM
setting)."""

INDUCING_FIT_ITERATIONS = 1000
"""Iterations of that stochastic CAVI (as ``LogisticSoftmaxGPClassifier``'s stochastic
default)."""


def fit_inducing_hypers(data: LSMData, kernel, num_inducing: int, *,
                        key: jax.Array | None = None,
                        progress: bool = False, include_prior: bool = True,
                        batch_size: int | None = None,
                        max_iter: int = INDUCING_FIT_ITERATIONS, **options):
    """Kernel hyperparameters and M inducing inputs for the inducing-point Gibbs sampler,
    the point of the stochastic sparse CAVI (``cavi`` with
    ``num_inducing`` and minibatches of ``INDUCING_FIT_BATCH`` points, ``max_iter``
    iterations: type-II MAP of the hyperparameters and the inducing inputs on the sparse
    ELBO, as ``LogisticSoftmaxGPClassifier(inference="cavi", num_inducing=M,
    inference_options={"batch_size": 128})`` fits them). The sampler then draws the exact
    posterior of the DTC model at that point (f = A v at the training inputs), which
    differs from the model CAVI's bound approximates only by the conditional variance
    k_ii - |a_i|^2 of f_i given u that the bound keeps. Why the stochastic version and
    not the full-batch sparse CAVI: docs/records/gibbs.md.

    Returns:
        A ``HyperFit`` whose values have the ``kernel_*`` sites and ``inducing_inputs``
        (M, D) (the training inputs themselves when M = N).
    """
    N = data.onehot.shape[0]
    batch_size = min(INDUCING_FIT_BATCH, N) if batch_size is None else batch_size
    res = fit_cavi(data, kernel, None, num_inducing=num_inducing, include_prior=include_prior,
               key=key, progress=progress, batch_size=batch_size, max_iter=max_iter,
               **options)
    kind = "type-II MAP" if include_prior else "type-II ML"
    return HyperFit({**res.hypers, "inducing_inputs": res.inducing},
                    f"stochastic sparse CAVI ELBO ({kind}, inducing inputs learnt; "
                    f"{batch_size} points per step)", elbo=float(res.elbo[-1]),
                    iterations=int(max_iter), converged=bool(res.converged),
                    relative_change=res.relative_change, stochastic=True)


SPEC = ModelSpec(
    name="logistic_softmax",
    description="Logistic-softmax GP classifier (C latent GPs), Polya-Gamma augmented",
    prepare=prepare,
    pad=pad,
    pads=pads,
    num_latent=num_latent,
    log_link=log_link,
    initial_hypers=initial_hypers,
    latent=Latent(latent_model=latent_model, latent_conditional=latent_conditional,
                  prior_factor=prior_factor, fit_hypers=fit_hypers),
    gibbs=Gibbs(gibbs_kernel=gibbs_kernel, fit_hypers=fit_hypers,
                inducing_kernel=inducing_gibbs_kernel, fit_inducing=fit_inducing_hypers),
    cavi=CAVI(cavi=fit_cavi, sample_q_f=sample_q_f, sample_q_v=sample_q_v),
    inducing=Inducing(inducing_latent=inducing_latent),
    place=on_devices,
    # the sparse CAVI and the inducing-point Gibbs sampler (M < N inducing inputs) cost
    # O(N M^2) and are held as draws of v (predictive kind "inducing"), so the driver
    # exempts them from max_exact_points; the full Gibbs, NUTS and the full CAVI form N x N
    # matrices
    sparse_alternative="use M < N inducing inputs: the sparse CAVI, "
                       'LogisticSoftmaxGPClassifier(inference="cavi", num_inducing=M) '
                       '(with inference_options={"batch_size": B} for minibatches), or the '
                       'inducing-point Gibbs sampler, LogisticSoftmaxGPClassifier('
                       'inference="gibbs", num_inducing=M); driver: method="cavi" or '
                       '"gibbs" with num_inducing=M',
)
"""The logistic-softmax GP's ``ModelSpec`` (driver name ``"logistic_softmax"``): latent
form for NUTS, the blocked Gibbs sampler, CAVI (full, sparse and stochastic) and its
inducing-point sampler."""
