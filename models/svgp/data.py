"""The SVGP's prepared data (``SVGPData``), its checks and padding, and the minibatch rows
and per-row normals a step draws (``ppgpc.models.svgp``)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from ppgpc.gp.inducing import initial_inducing_inputs, resolve_num_inducing
from ppgpc.gp.sparse import DEFAULT_KMM_JITTER
from ppgpc.runtime.blocks import Placement
from ppgpc.runtime.padding import pad_rows, row_mask
from ppgpc.validation import check_positive


__all__ = ["LINKS", "ELL_ESTIMATORS", "VARIANCE_PRIOR_ON", "DEFAULT_LIKELIHOOD_SAMPLES",
           "SVGPData", "prepare", "prepare_regression", "pad", "num_points", "minibatch_rows",
           "row_normals"]

LINKS = ("softmax", "ilr")
"""Classification links: softmax over C latents (SVGPC) or the inverse ILR over C-1."""

ELL_ESTIMATORS = ("marginal", "price", "joint")
"""Monte Carlo forms of the expected log-likelihood (module docstring)."""

VARIANCE_PRIOR_ON = ("kernel", "mixed")
"""Where the kernel prior's variance term applies (``prepare(variance_prior_on=)``)."""

DEFAULT_LIKELIHOOD_SAMPLES = 10
"""Draws per point of the marginal estimator (GPyTorch's ``num_likelihood_samples``)."""


# ---------------------------------------------------------------- the data and the model
@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["X", "y", "inducing_init", "targets", "kmm_jitter",
                                "noise_var", "mask", "inducing_mask"],
                   meta_fields=["num_classes", "link", "ell_estimator",
                                "likelihood_samples", "shared_kernel", "shared_inducing",
                                "kernel_prior", "variance_prior_on", "initial_variance",
                                "initial_lengthscale", "learn_mixing", "placement"])
@dataclasses.dataclass(frozen=True)
class SVGPData:
    """Prepared training data of the SVGP classifier (a pytree: arrays are leaves, the
    link and sizes are static metadata, so the data passes through ``jax.jit``)."""

    X: jax.Array
    """(N, D) inputs."""
    y: jax.Array
    """(N,) integer labels in 0..C-1 (zeros for the Gaussian link)."""
    num_classes: int
    """C."""
    link: str
    """``"softmax"``, ``"ilr"`` or ``"gaussian"``."""
    inducing_init: jax.Array
    """(M, D) starting inducing inputs, or (L, M, D) with ``shared_inducing=False``."""
    kmm_jitter: float
    """Relative jitter on K_mm (times the kernel variance)."""
    targets: Optional[jax.Array] = None
    """(N, L) regression targets (Gaussian link only)."""
    noise_var: float = 0.0
    """sigma^2 (Gaussian link only)."""
    ell_estimator: str = "marginal"
    """``"marginal"`` (local reparameterisation), ``"price"`` (the same draws, Price's
    theorem for the variance gradients) or ``"joint"`` (module docstring)."""
    likelihood_samples: int = DEFAULT_LIKELIHOOD_SAMPLES
    """S, draws per point of the marginal estimator."""
    shared_kernel: bool = True
    """One set of kernel hyperparameters for all latents, or one per latent."""
    shared_inducing: bool = True
    """One set of inducing inputs for all latents, or one per latent."""
    kernel_prior: bool = False
    """Add the kernel's log prior to the objective: type-II MAP of the kernel
    hyperparameters instead of type-II ML (``model``)."""
    variance_prior_on: str = "kernel"
    """With ``kernel_prior``: the variance prior is on each latent's kernel variance
    (``"kernel"``) or on its amplitude after mixing, var_l |W[:, l]|^2 (``"mixed"``;
    ``mixed_amplitudes``)."""
    initial_variance: float = 1.0
    """Starting kernel variance of SVI."""
    initial_lengthscale: Optional[float] = None
    """Starting lengthscale(s) of SVI; None: sqrt(D) (``kernel.initial_params``)."""
    learn_mixing: bool = True
    """Learn the mixing matrix W (a ``numpyro.param``), or hold W = I: the independent-
    latent classifier that ``latent_model`` (NUTS) samples exactly."""
    placement: Placement = Placement()
    """Where the minibatch's sum runs (static): one device, or split over the devices of a
    mesh (``on_devices``, the driver's ``devices``)."""
    mask: Optional[jax.Array] = None
    """(N,) row mask of data padded by ``pad`` (1 real, 0 padded); None when unpadded."""
    inducing_mask: Optional[jax.Array] = None
    """(M,) mask of the inducing inputs padded by ``pad`` (1 real, 0 padded); None when
    they are not padded."""

    @property
    def num_inducing(self) -> int:
        """M."""
        return int(self.inducing_init.shape[-2])

    @property
    def num_latent(self) -> int:
        """L."""
        gaussian = self.link == "gaussian"
        return int(self.targets.shape[1]) if gaussian else _num_latent(self.link, self.num_classes)


def _num_latent(link: str, num_classes: int) -> int:
    return num_classes if link == "softmax" else num_classes - 1


def _check_link(link) -> str:
    if link not in LINKS:
        raise ValueError(f"unknown link {link!r}; choose from {list(LINKS)}")
    return link


def _check_ell(ell_estimator, likelihood_samples) -> tuple[str, int]:
    if ell_estimator not in ELL_ESTIMATORS:
        raise ValueError(f"unknown ell_estimator {ell_estimator!r}; choose from "
                         f"{list(ELL_ESTIMATORS)}")
    if (isinstance(likelihood_samples, bool) or int(likelihood_samples) != likelihood_samples
            or likelihood_samples < 1):
        raise ValueError("likelihood_samples must be a positive integer, got "
                         f"{likelihood_samples!r}")
    return ell_estimator, int(likelihood_samples)


def _check_model_flags(link, kernel_prior, variance_prior_on, learn_mixing) -> None:
    """The link, the two flags (bools), and ``variance_prior_on`` (one of
    ``VARIANCE_PRIOR_ON``, other than ``"kernel"`` only with ``kernel_prior``)."""
    for name, flag in (("learn_mixing", learn_mixing), ("kernel_prior", kernel_prior)):
        if not isinstance(flag, bool):
            raise ValueError(f"{name} must be True or False, got {flag!r}")
    _check_link(link)
    if variance_prior_on not in VARIANCE_PRIOR_ON:
        raise ValueError(f"unknown variance_prior_on {variance_prior_on!r}; choose from "
                         f"{list(VARIANCE_PRIOR_ON)}")
    if variance_prior_on != "kernel" and not kernel_prior:
        raise ValueError(f"variance_prior_on={variance_prior_on!r} places the kernel prior's "
                         "variance term; it needs kernel_prior=True")


def prepare(X, y, num_classes: int, *, link: str = "softmax", num_inducing: int | None = None,
            seed: int = 0, kmm_jitter: float = DEFAULT_KMM_JITTER,
            ell_estimator: str = "marginal", likelihood_samples: int = DEFAULT_LIKELIHOOD_SAMPLES,
            shared_kernel: bool = True, shared_inducing: bool = True, kernel_prior: bool = False,
            variance_prior_on: str = "kernel", initial_variance: float = 1.0,
            initial_lengthscale: float | None = None, learn_mixing: bool = True) -> SVGPData:
    """Data, link and k-means++ inducing inputs.

    Args:
        X: (N, D) inputs; y: (N,) integer labels in 0..num_classes-1.
        link: ``"softmax"`` (L = C) or ``"ilr"`` (L = C - 1).
        num_inducing: M <= N, None: min(200, N) (``ppgpc.gp.inducing.resolve_num_inducing``);
            inducing inputs start at k-means++ centres refined by Lloyd steps.
        seed: seed of the k-means++ initialisation.
        kmm_jitter: relative jitter added to K_mm.
        ell_estimator: ``"marginal"`` (default), ``"price"`` or ``"joint"`` Monte Carlo form
            of the expected log-likelihood and its gradient (module docstring).
        likelihood_samples: S, draws per point of the marginal estimator.
        shared_kernel: one kernel (variance, lengthscales) for all L latents (default), or
            one per latent (sites ``kernel_variance`` (L,), ``kernel_lengthscale`` (L, D)).
        shared_inducing: one set of M inducing inputs for all latents (default), or one per
            latent (site ``inducing_inputs`` (L, M, D), every latent starting from the same
            k-means++ centres). ``shared_kernel=False, shared_inducing=False`` is GPyTorch's
            batch-shaped multitask SVGP (module docstring, "Per-latent kernels and inducing
            inputs").
        kernel_prior: add the kernel's log prior (``kernel.priors``, one per latent with
            ``shared_kernel=False``) to the objective, so that SVI finds the type-II MAP
            kernel hyperparameters instead of the type-II ML ones (``model``).
        variance_prior_on: where the kernel prior's variance term applies: ``"kernel"``
            (default) on each latent's kernel variance var_l, or ``"mixed"`` on its
            amplitude in the mixed latent W f, var_l |W[:, l]|^2 (``mixed_amplitudes``;
            why, in the module docstring). Needs ``kernel_prior=True``.
        initial_variance: the kernel variance SVI starts from (default 1).
        initial_lengthscale: the lengthscale SVI starts every input's (and every latent's)
            lengthscale from; None (default): sqrt(D), the median of the lengthscale prior
            (``kernel.initial_params``). GPyTorch starts from softplus(0) = 0.693 for both.
        learn_mixing: learn W (default), or hold W = I: the model ``latent_model`` (NUTS)
            samples, so that the two posteriors are of one model.
    """
    _check_model_flags(link, kernel_prior, variance_prior_on, learn_mixing)
    initial_variance = check_positive("initial_variance", initial_variance)
    if initial_lengthscale is not None:
        initial_lengthscale = check_positive("initial_lengthscale", initial_lengthscale)
    ell_estimator, likelihood_samples = _check_ell(ell_estimator, likelihood_samples)
    if num_classes < 2:
        raise ValueError(f"a classifier needs at least 2 classes, got {num_classes}")
    X = np.asarray(X, dtype=np.float64)  # (host-side: eager ops would compile per N)
    Z = initial_inducing_inputs(X, resolve_num_inducing(num_inducing, X.shape[0]), seed)
    if not shared_inducing:
        Z = jax.device_put(np.tile(np.asarray(Z)[None], (_num_latent(link, num_classes), 1, 1)))
    return SVGPData(X=jax.device_put(X), y=jax.device_put(np.asarray(y)),
                    num_classes=int(num_classes), link=link, inducing_init=Z,
                    kmm_jitter=float(kmm_jitter), ell_estimator=ell_estimator,
                    likelihood_samples=likelihood_samples, shared_kernel=bool(shared_kernel),
                    shared_inducing=bool(shared_inducing), kernel_prior=kernel_prior,
                    variance_prior_on=variance_prior_on, initial_variance=initial_variance,
                    initial_lengthscale=initial_lengthscale, learn_mixing=learn_mixing)


def prepare_regression(X, Y, noise_var: float, Z, kmm_jitter: float = 0.0,
                       ell_estimator: str = "marginal",
                       likelihood_samples: int = DEFAULT_LIKELIHOOD_SAMPLES,
                       shared_kernel: bool = True) -> SVGPData:
    """Data for the Gaussian link: targets Y (N, L), noise sigma^2, inducing inputs Z (M, D)
    shared by the latents, or (L, M, D) one set per latent; ``shared_kernel`` as for
    ``prepare``."""
    ell_estimator, likelihood_samples = _check_ell(ell_estimator, likelihood_samples)
    X, Y, Z = (jnp.asarray(a, dtype=jnp.float64) for a in (X, Y, Z))
    if Z.ndim == 3 and Z.shape[0] != Y.shape[1]:
        raise ValueError(f"per-latent inducing inputs Z {Z.shape} need one set per target "
                         f"column, L = {Y.shape[1]}")
    return SVGPData(X=X, y=jnp.zeros(X.shape[0], dtype=jnp.int32), num_classes=Y.shape[1],
                    link="gaussian", inducing_init=Z,
                    kmm_jitter=float(kmm_jitter), targets=Y, noise_var=float(noise_var),
                    ell_estimator=ell_estimator, likelihood_samples=likelihood_samples,
                    shared_kernel=bool(shared_kernel), shared_inducing=Z.ndim == 2)


def pad(data: SVGPData, size: int) -> SVGPData:
    """``data`` padded to ``size`` rows (module docstring, "Padded data"): inputs and labels
    zero on the padded rows and the row mask; the inducing inputs too when there is one per
    training point (M = N). Data of the joint estimator, the Gaussian link or on a mesh are
    returned as they are."""
    if (data.ell_estimator == "joint" or data.link == "gaussian"
            or data.placement.mesh is not None):
        return data
    if data.mask is not None:
        raise ValueError("pad takes data as prepared, not padded data")
    N = data.X.shape[0]
    changes = dict(X=pad_rows(data.X, size), y=pad_rows(data.y, size),
                   mask=row_mask(N, size))
    if data.num_inducing == N:
        changes.update(inducing_init=pad_rows(data.inducing_init, size, axis=-2),
                       inducing_mask=row_mask(N, size))
    return dataclasses.replace(data, **changes)


def num_points(data: SVGPData):
    """N, the real rows: an int, or a traced scalar for padded data."""
    return data.X.shape[0] if data.mask is None else jnp.sum(data.mask)


def minibatch_rows(key, data: SVGPData, batch_size: int | None):
    """The rows of a minibatch and the likelihood's scale N / B (module docstring): all
    rows (padded ones too, which ``data.mask`` weighs zero) with scale 1 for a full batch
    (``batch_size`` None); else B distinct real rows, the B smallest of u_i ~ U(0, 1) from
    ``fold_in(key, i)``, whatever rows follow the real ones."""
    N = data.X.shape[0]
    if batch_size is None:
        return jnp.arange(N), 1.0
    u = jax.vmap(lambda i: jax.random.uniform(jax.random.fold_in(key, i)))(jnp.arange(N))
    if data.mask is not None:
        u = jnp.where(data.mask > 0, u, 2.0)
    idx = jax.lax.top_k(-u, batch_size)[1]
    return idx, num_points(data) / batch_size


def row_normals(key, idx, shape: tuple):
    """Standard normals (*shape[:-1], B, shape[-1]) for the rows ``idx`` (B,): row i's from
    ``fold_in(key, i)``."""
    eps = jax.vmap(lambda i: jax.random.normal(jax.random.fold_in(key, i), shape))(idx)
    return jnp.moveaxis(eps, 0, -2)
