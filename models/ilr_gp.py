"""ILR-GP: GP regression on isometric-log-ratio targets of smoothed labels (docs/math.md section 1).

Model, for N points, C classes and L = C - 1 ILR coordinates:

    p^(k) = epsilon e_k + (1 - epsilon)/C 1,      m_k = ilr(p^(k))          (label smoothing)
    f_d ~ GP(0, k_theta),  d = 1..L               (independent, one shared kernel)
    z_i = m_{y_i},  z_i | f(x_i) ~ N(f(x_i), sigma^2 I_L)
    sigma = delta / (2 Phi^-1(1 - tau/(C-1)))     (Proposition 1; the default)
    sigma^2 -> s sigma^2,  s ~ LogNormal(0, 1)    (``learn_noise_scale=True`` only)
    p(y* = c | x*) = E[softmax(V f*)_c]           (Monte Carlo through the inverse ILR)

NumPyro sites (stable names, shared with the other classifiers):

* ``kernel_variance`` (), ``kernel_lengthscale`` (D,) or (): kernel hyperparameters with
  the priors of ``ppgpc.gp.kernels``;
* ``z`` (L, N): the observed ILR targets (collapsed form, one MVN per coordinate over the N
  points jointly) or (N, L) (latent form, Gaussian likelihood, one term per point inside
  the plate ``data``);
* ``f_white`` (L, N) and the deterministic ``f`` (N, L): the latent form, whitened
  (f_d = chol(K) v_d), which NUTS samples far better than the centred parameterisation;
* ``noise_scale`` (): with ``learn_noise_scale=True``, a factor s on the Proposition 1
  noise variance, fitted with the kernel hyperparameters. This is the ILR paper's "more
  flexible likelihood" for the collapsed sparse model (its section 5). One scale for all
  C-1 coordinates keeps the single shared factorisation (a scale per coordinate would need
  C-1 of them, GPD's cost). It matters most for Titsias's bound, whose trace penalty
  (C-1) tr(K - Q) / (2 sigma^2) under a small fixed sigma^2 forces lengthscales long
  enough that M inducing points reproduce K, underfitting many-class problems.

``SPARSE_SPEC`` is Collapsed-ILR (Titsias's bound, docs/math.md section 1; ``ppgpc.gp.sparse``): the
same sites with the factor ``collapsed_bound`` in place of ``z`` and the inducing inputs as
the site ``inducing_inputs`` (M, D) with a flat improper prior, fitted with the
hyperparameters (methods ``exact`` and ``map``; NUTS over inducing inputs is refused). With
``shared_inducing=False`` (a ``prepare`` option) each ILR coordinate has its own M inducing
inputs, ``inducing_inputs`` (C-1, M, D), and its own factorisation: C-1 times the cost, and
(C-1) M basis functions in all instead of M; a learned noise scale (``learn_noise_scale``)
is then one per coordinate, ``noise_scale`` (C-1,).

The ``z`` site is a Gaussian density of transformed targets, not comparable across models:
model comparison uses the categorical log-likelihood ``log_link(f)[y]`` (``ppgpc.infer``).

``pad`` pads the data to a fixed number of rows that change nothing (``ppgpc.runtime.padding``):
zero targets, a decoupled identity block in the prior, zero noise and zero likelihood
weight, and the factor ``padded_rows`` that puts back the padded rows' Gaussian constant,
so log-densities, posteriors and predictions of the real rows are the unpadded ones.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from ppgpc.gp import exact, linalg, simplex, sparse, whitened
from ppgpc.gp.inducing import InducingPrior
from ppgpc.gp.kernels import gram, kernel_params, sample_kernel_params
from ppgpc.models.spec import (Conjugate, Inducing, Latent, ModelSpec, collapsed_sparse_spec,
                               conjugate_spec, record_jitter)
from ppgpc.models.svgp import num_latent_ilr, svgp_spec
from ppgpc.runtime.padding import (mask_gram, pad_rows, padding_constant, real_rows, real_rows_only,
                                   row_mask)
from ppgpc.validation import check_flag, check_positive

__all__ = ["ILRData", "ILROptions", "NOISE_SCALE_PRIOR", "DEFAULT_EPSILON", "DEFAULT_TAU",
           "EPSILON_GRID", "TAU_GRID", "prepare", "pad", "num_latent", "log_link", "initial_hypers",
           "collapsed_model", "condition", "predict", "sample_train", "loo_predictive",
           "pseudo_log_lik", "latent_model", "latent_conditional", "SPEC", "SPARSE_SPEC",
           "UNCOLLAPSED_SPEC"]

DEFAULT_EPSILON = 0.999
"""Label-smoothing level used when no validation search is asked for."""

DEFAULT_TAU = 0.01
"""Overlap tolerance of Proposition 1: a pseudo-observation falls nearer a wrong class
target with probability at most tau (the conventional 1% level; docs/records/defaults.md)."""

EPSILON_GRID = (0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 0.99999, 0.999999)
"""The label-smoothing grid searched by validation NLL when ``epsilon="auto"``: the paper's
six values, plus 0.95 and 0.995 between the first three (leave-one-out scores every value
from one fit, so they cost nothing there)."""

TAU_GRID = (0.01, 0.1, 0.4)
"""Proposition 1 tolerances searched with epsilon by leave-one-out when ``tau="auto"``
(``ILRGPClassifier``); all valid for every C >= 2 (Proposition 1 needs tau / (C-1) < 1/2)."""


NOISE_SCALE_PRIOR = dist.LogNormal(0.0, 1.0)
"""Prior of the learned noise scale s (MAP and NUTS; type-II ML ignores it): the
Proposition 1 level is its median, and factors of 1/7 to 7 lie within two prior s.d."""


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class ILROptions:
    """Structural options, static under ``jax.jit`` (they decide which sites exist)."""

    learn_noise_scale: bool = False


class ILRData(NamedTuple):
    """Prepared training data of the ILR-GP."""

    X: jax.Array
    """(N, D) inputs."""
    y: jax.Array
    """(N,) integer labels in 0..C-1."""
    num_classes: int
    """C."""
    targets: jax.Array
    """(N, C-1) ILR targets z_i = m_{y_i}."""
    noise_var: float
    """sigma^2 of the latent Gaussian likelihood."""
    epsilon: float
    """Label-smoothing level."""
    tau: float
    """Proposition 1 tolerance that set sigma (NaN when sigma was given)."""
    options: ILROptions = ILROptions()
    """Structural options (static)."""
    mask: jax.Array | None = None
    """(N,) row mask of data padded by ``pad`` (1 real, 0 padded); None when unpadded."""

    @property
    def inducing_mask(self) -> None:
        """No inducing inputs travel with the rows (``ppgpc.models.spec.TrainingData``)."""
        return None


def prepare(
    X, y, num_classes: int, *, epsilon: float = DEFAULT_EPSILON, tau: float = DEFAULT_TAU,
    noise_std: float | None = None, learn_noise_scale: bool = False,
) -> ILRData:
    """ILR targets and the Proposition 1 noise level for labels y.

    Args:
        X: (N, D) inputs; y: (N,) integer labels in 0..num_classes-1.
        epsilon: label-smoothing level in (0, 1).
        tau: Proposition 1 tolerance; ignored when ``noise_std`` is given.
        noise_std: override sigma.
        learn_noise_scale: add the site ``noise_scale`` s, so that the noise variance
            s sigma^2 is fitted with the kernel hyperparameters (module docstring).
    """
    if num_classes < 2:
        raise ValueError(f"ILR-GP needs at least 2 classes, got {num_classes}")
    # on the host: eager JAX ops here would compile a program per number of points
    targets = jax.device_put(
        np.asarray(simplex.ilr_class_targets(num_classes, epsilon))[np.asarray(y)])
    if noise_std is None:
        noise_std = simplex.proposition1_noise_std(num_classes, epsilon, tau)
    else:
        tau = float("nan")
        noise_std = check_positive("noise_std", noise_std)
    return ILRData(
        X=jax.device_put(np.asarray(X, dtype=np.float64)),
        y=jax.device_put(np.asarray(y)),
        num_classes=int(num_classes),
        targets=targets,
        noise_var=float(noise_std) ** 2,
        epsilon=float(epsilon),
        tau=float(tau),
        options=ILROptions(learn_noise_scale=check_flag("learn_noise_scale",
                                                        learn_noise_scale)),
    )


def pad(data: ILRData, size: int) -> ILRData:
    """``data`` padded to ``size`` rows (``ppgpc.runtime.padding``): inputs, labels and targets
    zero on the padded rows, and the row mask."""
    mask = row_mask(data.X.shape[0], size) if data.mask is None else pad_rows(data.mask, size)
    return data._replace(X=pad_rows(data.X, size), y=pad_rows(data.y, size),
                         targets=pad_rows(data.targets, size), mask=mask)


def num_latent(num_classes: int) -> int:
    """L = C - 1 ILR coordinates."""
    return num_classes - 1


def log_link(f: jax.Array) -> jax.Array:
    """log p(y = c | f) = log softmax(V f)_c: (..., C-1) -> (..., C)."""
    return simplex.ilr_log_inverse(f)


def initial_hypers(data: ILRData, kernel) -> dict:
    """Kernel variance at the mean square of the targets, lengthscales at sqrt(D), and the
    noise scale (when learned) at 1, the Proposition 1 level."""
    D = data.X.shape[1]
    targets = real_rows(data.targets, data.mask)
    start = kernel.initial_params(D, variance=float(np.mean(targets**2)))
    hypers = {"kernel_" + k: v for k, v in start.items()}
    if data.options.learn_noise_scale:
        hypers["noise_scale"] = jnp.asarray(1.0)
    return hypers


def _sample_noise_var(data: ILRData, fixed: dict | None = None, scale_shape: tuple = ()):
    """(sigma^2, scale): Proposition 1's variance and the learned factor on it, the site
    ``noise_scale`` of shape ``scale_shape`` (``()``, or ``(C-1,)`` for one factor per ILR
    coordinate) or its value in ``fixed`` (a dict keyed by site name); scale is None when
    the factor is not learned."""
    if data.options.learn_noise_scale and fixed is None:
        prior = NOISE_SCALE_PRIOR.expand(scale_shape)
        fixed = {"noise_scale": numpyro.sample("noise_scale", prior)}
    return noise_var_and_scale(data, fixed)


def noise_var_and_scale(data: ILRData, hypers: dict | None):
    """(sigma^2, ``hypers["noise_scale"]``), the scale None when it is not learned."""
    if data.options.learn_noise_scale:
        return data.noise_var, jnp.asarray(hypers["noise_scale"])
    return data.noise_var, None


def _scaled(noise, scale):
    return noise if scale is None else noise * scale


def noise_var(data: ILRData, hypers: dict | None):
    """The fitted noise variance: sigma^2, times ``hypers["noise_scale"]`` when learned."""
    return _scaled(*noise_var_and_scale(data, hypers))


def collapsed_model(data: ILRData, kernel) -> None:
    """Collapsed form: z_d ~ MVN(0, K + sigma^2 I) for each ILR coordinate d (one Cholesky,
    its gradient from the same factor: ``ppgpc.gp.exact.MarginalGaussian``).

    Sites: ``kernel_*`` (priors), ``noise_scale`` (when learned), ``z`` observed with shape
    (C-1, N). With f integrated out the N points are jointly Gaussian, so ``z`` is one
    observation per coordinate (an MVN over the N points), not one per point: ArviZ's
    pointwise LOO needs ``latent_model`` (or ppgpc's export, whose log-likelihood is per
    point whatever the form).
    """
    N, L = data.targets.shape
    params = sample_kernel_params(kernel, data.X.shape[1])
    noise = _scaled(*_sample_noise_var(data))
    K = mask_gram(gram(kernel, params, data.X), data.mask)
    A = K + jnp.diag(exact.noise_diagonal(noise, N, data.mask))
    with numpyro.plate("latent", L, dim=-1):
        numpyro.sample("z", exact.MarginalGaussian(jnp.zeros(N), A, rows=data.mask),
                       obs=data.targets.T)
    if data.mask is not None:
        numpyro.factor("padded_rows", padding_constant(data.mask, L))


def prior_factor(data: ILRData, kernel, hypers: dict) -> linalg.Cholesky:
    """chol(K) (N, N) of the kernel with hyperparameters ``hypers`` at the training inputs
    (padded rows masked), without the noise."""
    return linalg.cholesky(mask_gram(gram(kernel, kernel_params(hypers), data.X), data.mask),
                           rows=data.mask)


def latent_model(data: ILRData, kernel, fixed_hypers: dict | None = None,
                 factor: linalg.Cholesky | None = None) -> None:
    """Latent form: f_d = chol(K) v_d, v_d ~ N(0, I); z_i ~ N(f(x_i), sigma^2 I).

    Args:
        fixed_hypers: kernel hyperparameters by site name; ``None`` samples them too.
        factor: ``prior_factor(data, kernel, fixed_hypers)``, given to skip the
            factorisation.

    Sites: ``kernel_*`` and ``noise_scale`` (when learned) unless fixed, ``f_white``
    (C-1, N), deterministic ``f`` (N, C-1), ``z`` observed (N, C-1): z_i depends on f_i
    only, so each point is observed inside ``numpyro.plate("data", N)`` (one
    log-likelihood term per point for ``az.from_numpyro``; dims from
    ``ppgpc.infer.arviz_dims``).
    """
    N, L = data.targets.shape
    params = sample_kernel_params(kernel, data.X.shape[1], fixed=fixed_hypers)
    noise = _scaled(*_sample_noise_var(data, fixed_hypers))
    chol_K = factor if factor is not None else linalg.cholesky(
        mask_gram(gram(kernel, params, data.X), data.mask), rows=data.mask)
    record_jitter(chol_K)
    f = exact.whitened_latent(chol_K.factor, L)
    with numpyro.plate("data", N, dim=-1), real_rows_only(data.mask):
        numpyro.sample("z", dist.Normal(f, jnp.sqrt(noise)).to_event(1), obs=data.targets)


def condition(data: ILRData, kernel, hypers: dict) -> exact.ExactPosterior:
    """The exact posterior: one Cholesky of K + sigma^2 I for all C-1 coordinates."""
    return exact.condition(kernel, kernel_params(hypers), data.X, data.targets,
                        noise_var(data, hypers), data.mask)


def predict(data: ILRData, kernel, hypers: dict, posterior: exact.ExactPosterior, Xs):
    """Latent predictive at Xs (n, D): mean (n, C-1) and variance (n, C-1) (equal columns)."""
    mean, var = exact.predict(kernel, kernel_params(hypers), posterior, Xs)
    return mean, jnp.broadcast_to(var[:, None], mean.shape)


def sample_train(key, data: ILRData, kernel, hypers: dict, posterior, num_samples: int):
    """(S, N, C-1) joint posterior draws of f at the training inputs (Matheron's rule)."""
    return exact.sample_posterior_at_inputs(
        key, kernel, kernel_params(hypers), posterior, data.targets, noise_var(data, hypers),
        num_samples
    )


def loo_predictive(data: ILRData, kernel, hypers: dict, posterior: exact.ExactPosterior):
    """Closed-form leave-one-out predictive of f at each training input (hyperparameters
    fixed; ``ppgpc.gp.loo_predictive``): mean (N, C-1) and variance (N, C-1)."""
    mean, var = exact.loo_predictive(posterior, data.targets, noise_var(data, hypers))
    return mean, jnp.broadcast_to(var[:, None], mean.shape)


def pseudo_log_lik(data: ILRData, hypers: dict, f):
    """(..., N) log p(z_i | f_i) = sum_d log N(z_id | f_id, sigma^2 [times noise_scale_d]):
    the Gaussian pseudo-likelihood term of each point, for f of shape (..., N, C-1)."""
    noise = jnp.broadcast_to(noise_var(data, hypers), f.shape[-1:])
    resid = data.targets - f
    return -0.5 * jnp.sum(resid * resid / noise + jnp.log(2 * jnp.pi * noise), axis=-1)


def latent_conditional(data: ILRData, kernel, hypers: dict, f, Xs):
    """f(Xs) | f(X) = f under the GP prior: mean (n, C-1), variance (n, C-1)."""
    return exact.latent_conditional(kernel, kernel_params(hypers), data.X, f, Xs, data.mask)


SPEC: ModelSpec
SPEC = conjugate_spec(
    "ilr_gp", description="ILR-GP: conjugate GP regression on ILR targets (C-1 latent GPs)",
    prepare=prepare, pad=pad, num_latent=num_latent, log_link=log_link,
    initial_hypers=initial_hypers,
    conjugate=Conjugate(collapsed_model=collapsed_model, condition=condition, predict=predict,
                        sample_train=sample_train, loo_predictive=loo_predictive,
                        pseudo_log_lik=pseudo_log_lik),
    latent=Latent(latent_model=latent_model, latent_conditional=latent_conditional,
                  prior_factor=prior_factor),
    sparse_alternative='use a sparse model: ILRGPClassifier(inference="collapsed") or '
                       'SoftmaxSVGPClassifier(link="ilr") (driver models "ilr_gp_sparse" '
                       'and "ilr_gp_uncollapsed")')
"""ILR-GP's ``ModelSpec`` (exact conjugate form, latent form), driver model ``"ilr_gp"``."""


# ------------------------------------------------------------- collapsed sparse ILR-GP
sparse_prepare = sparse.make_prepare(prepare, per_output_inducing=True)
_shared_initial_hypers = sparse.make_initial_hypers(initial_hypers)


def _per_output(Z) -> bool:
    """Whether the inducing inputs are one set per coordinate, (C-1, M, D)."""
    return jnp.ndim(Z) == 3


def sparse_initial_hypers(data: sparse.SparseData, kernel) -> dict:
    """The dense start plus the inducing inputs; with per-coordinate inducing inputs a
    learned noise scale starts at 1 for each coordinate, (C-1,)."""
    hypers = _shared_initial_hypers(data, kernel)
    if "noise_scale" in hypers and _per_output(data.inducing_init):
        hypers["noise_scale"] = jnp.ones(data.inducing_init.shape[0])
    return hypers


def sparse_collapsed_model(data: sparse.SparseData, kernel) -> None:
    """Collapsed-ILR: Titsias's bound for all C-1 coordinates with ONE factorisation, or with
    ``shared_inducing=False`` the sum of C-1 single-coordinate bounds, each at its own
    inducing inputs (``sparse.collapsed_bound_per_output``).

    Sites: ``kernel_*`` (priors), ``noise_scale`` (when learned), ``inducing_inputs`` (M, D,
    or C-1, M, D; flat improper prior) and the factor ``collapsed_bound``, one term that
    couples all N points (no observed site, no pointwise log-likelihood).
    """
    base = data.base
    params = sample_kernel_params(kernel, base.X.shape[1])
    Z = numpyro.sample("inducing_inputs", InducingPrior(data.inducing_init.shape))
    if _per_output(Z):
        noise, scale = _sample_noise_var(base, scale_shape=Z.shape[:1])
        bound = sparse.collapsed_bound_per_output(kernel, params, base.X, base.targets, Z,
                                                  noise, noise_scale=scale,
                                                  placement=data.placement)
    else:
        noise = _scaled(*_sample_noise_var(base))
        bound = sparse.collapsed_bound(kernel, params, base.X, base.targets, Z, noise,
                                       placement=data.placement)
    numpyro.factor("collapsed_bound", bound)


def sparse_condition(data: sparse.SparseData, kernel, hypers: dict) -> sparse.SparsePosterior:
    """The optimal q(u) of the collapsed bound (one factorisation for all coordinates, or one
    per coordinate with per-coordinate inducing inputs)."""
    base = data.base
    Z = hypers["inducing_inputs"]
    noise, scale = noise_var_and_scale(base, hypers)
    if _per_output(Z):
        return sparse.condition_per_output(kernel, kernel_params(hypers), base.X,
                                           base.targets, Z, noise, noise_scale=scale,
                                           placement=data.placement)
    return sparse.condition(kernel, kernel_params(hypers), base.X, base.targets, Z,
                            _scaled(noise, scale), placement=data.placement)


def sparse_predict(data: sparse.SparseData, kernel, hypers: dict, posterior, Xs):
    """Latent predictive under q(u) at Xs: mean (n, C-1), variance (n, C-1)."""
    if _per_output(posterior.Z):
        return sparse.predict_per_output(kernel, kernel_params(hypers), posterior, Xs)
    mean, var = sparse.predict(kernel, kernel_params(hypers), posterior, Xs)
    return mean, jnp.broadcast_to(var[:, None], mean.shape)


def sparse_sample_inducing(key, data: sparse.SparseData, kernel, hypers: dict, posterior,
                           num_samples: int):
    """(S, M, C-1) draws of the whitened inducing values of q(u), v = L_B^-T (c + e)
    (``ppgpc.gp.whitened.sample_whitened``; column l from coordinate l's own q with
    per-coordinate inducing inputs)."""
    return whitened.sample_whitened(key, posterior, num_samples)


def sparse_inducing_latent(data: sparse.SparseData, kernel, hypers: dict, v, Xs, eps):
    """(S, n, C-1) draws of the latent at Xs (n, D) given whitened draws v (S, M, C-1):
    f = a^T v + sqrt(k - |a|^2) eps (``ppgpc.gp.whitened.latent_given_whitened``)."""
    return whitened.latent_given_whitened(kernel, kernel_params(hypers),
                                                 hypers["inducing_inputs"], v, Xs, eps)


def sparse_inducing_values(data: sparse.SparseData, kernel, hypers: dict, v):
    """u = L_m v (..., M, C-1): each coordinate at its own inducing inputs (the shared Z, or
    Z_l with per-coordinate inducing inputs), for the ArviZ export's ``u``."""
    return whitened.inducing_values(kernel, kernel_params(hypers),
                                           hypers["inducing_inputs"], v)


SPARSE_SPEC: ModelSpec
SPARSE_SPEC = collapsed_sparse_spec(
    SPEC, "ilr_gp_sparse",
    description="Collapsed-ILR: Titsias's collapsed sparse bound on ILR targets",
    prepare=sparse_prepare, initial_hypers=sparse_initial_hypers,
    collapsed_model=sparse_collapsed_model, condition=sparse_condition, predict=sparse_predict,
    inducing=Inducing(inducing_latent=sparse_inducing_latent,
                      sample_inducing=sparse_sample_inducing,
                      inducing_values=sparse_inducing_values))
"""Collapsed-ILR's ``ModelSpec`` (Titsias's bound), driver model ``"ilr_gp_sparse"``."""


UNCOLLAPSED_SPEC = svgp_spec(
    "ilr_gp_uncollapsed", "ilr", num_latent_ilr,
    "Uncollapsed-ILR: the sparse variational GP classifier with the inverse ILR link")
"""Uncollapsed-ILR (the ILR paper's section 3.3; docs/math.md section 1 "Uncollapsed
sparse"): the C-1 ILR coordinates as latents of the sparse variational classifier
(``ppgpc.models.svgp``) with the inverse-ILR link, fitted by SVI."""
