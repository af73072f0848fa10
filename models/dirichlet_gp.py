"""GPD: Dirichlet-based GP classification (Milios et al. 2018; docs/math.md section 2).

Model, for N points and C classes (L = C latent GPs):

    alpha_ic = 1 + alpha_eps if y_i = c else alpha_eps
    s2_ic = log(1 / alpha_ic + 1),  ytilde_ic = log(alpha_ic) - s2_ic / 2   (log-normal match)
    f_c ~ GP(mean_c, k_theta_c),  c = 1..C   (independent; theta shared by default)
    mean_c = b + log pi_c - mean_c' log pi_c',  pi_c ~ n_c + alpha_eps,  b ~ Normal(0, 10)
    ytilde_ic | f_c(x_i) ~ N(f_c(x_i), s2_ic)                             (heteroscedastic)
    s2_ic -> r_c s2_ic,  r_c ~ LogNormal(0, 1)          (``learn_noise_scale=True`` only)
    p(y* = c | x*) = E[softmax(f*)_c]                                     (Monte Carlo)

The moment match gives the log-normal the mean alpha and variance alpha of Gamma(alpha, 1):
exp(ytilde + s2/2) = alpha and (exp(s2) - 1) exp(2 ytilde + s2) = alpha. Because the noise
differs per class, each class needs its own Cholesky of K_c + diag(s2_:c), batched with
``vmap`` over classes (ILR-GP needs one for all coordinates).

Options (``prepare``): ``alpha_eps``; ``shared_kernel`` (one kernel for all classes, as
Milios et al., or one per class); ``predict_from``: ``"latent"`` (default) samples f* from
the latent predictive, ``"noisy"`` the pseudo-observation f* + noise (the ILR paper's Table
1), its noise that of the label the latent mean predicts.

NumPyro sites (stable names, shared with the other classifiers):

* ``kernel_variance`` () and ``kernel_lengthscale`` (D,) or (); with ``shared_kernel=False``
  they get a leading class axis, (C,) and (C, D) or (C,);
* ``mean`` (C,): each class's constant prior mean, one level plus the log class frequency
  (``ClassMeanPrior`` below: why; targets are about -7 off-class at alpha_eps 0.01);
* ``ytilde`` (C, N): the observed log-normal targets (collapsed form, one MVN per class over
  the N points jointly) or (N, C) (latent form, one term per point inside the plate
  ``data``);
* ``f_white`` (C, N) and the deterministic ``f`` (N, C): the latent form, whitened;
* ``noise_scale`` (C,): with ``learn_noise_scale=True``, a factor r_c on class c's noise
  variances (the ILR paper's "more flexible likelihood", its section 5), free of cost.

``SPARSE_SPEC`` is the collapsed sparse GPD (Titsias bound with per-class noise, inducing
inputs ``inducing_inputs`` (M, D) shared by the classes; ``ppgpc.gp.sparse``). With a shared
kernel, class c's noise takes one value on the points labelled c and another elsewhere, so
the bound is ``sparse.collapsed_bound_two_level``, O(M^2 N) for all classes together instead
of O(C M^2 N), and K and L_m^-1 K_mn are computed once; with per-class kernels each class is
factorised on its own. With ``shared_inducing=False`` (a ``prepare`` option) each class has
its own M inducing inputs, ``inducing_inputs`` (C, M, D), and its own factorisation (the
per-output functions of ``ppgpc.gp.sparse``, each with its own noise column): about C times the
cost per step, and C M basis functions in all.

``pad`` pads the data to a fixed number of rows that change nothing (``ppgpc.runtime.padding``):
residuals, noise and likelihood weight zero on the padded rows, a decoupled identity block
in each class's prior, the factor ``padded_rows`` that puts back their Gaussian constant,
and the class counts as an array (``class_counts``) rather than static options.

Prior on the class means (``ClassMeanPrior``):

The C constant prior means share one level b and differ by the log class frequencies:

    mean_c = b + o_c,   o_c = log pi_c - (1/C) sum_c' log pi_c',   b ~ Normal(0, 10),
    pi_c = (n_c + alpha_eps) / (N + C alpha_eps)   (``class_log_frequencies``).

Far from the data every latent reverts to its prior, f_c ~ N(mean_c, s^2), so the prior
means alone decide the predictive there. With these, E[exp f_c] is proportional to pi_c:
read as the paper's Gamma variables, the Dirichlet there has mean pi (Milios et al.'s own
code shifts its targets by log pi_c plus one constant), and with a shared kernel the
predictive E[softmax(f*)] is pi pulled towards uniform by the kernel variance, never more
confident than the class frequencies (docs/records/defaults.md, "GPD's prior means", gives the
check and what C free means did instead).

``ClassMeanPrior`` keeps the NumPyro site ``mean`` at its shape (C,) with the line b + o as
its support: NumPyro's ``biject_to`` maps one unconstrained coordinate, b, onto it, so
type-II ML, MAP and NUTS move b alone and every fitted or sampled mean lies on the line,
while the functions that condition and predict read the (C,) means as before (given values
and saves of earlier versions, whose C means were free, are used as they are).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints
from numpyro.distributions.transforms import Transform, biject_to

from ppgpc.gp import exact, linalg, sparse, whitened
from ppgpc.gp.inducing import InducingPrior
from ppgpc.gp.kernels import gram, kernel_params, sample_kernel_params
from ppgpc.models.spec import (Conjugate, Inducing, Latent, ModelSpec, collapsed_sparse_spec,
                               conjugate_spec)
from ppgpc.runtime.padding import (mask_gram, pad_rows, padding_constant, real_rows, real_rows_only,
                                   row_mask)
from ppgpc.validation import check_flag, check_positive

__all__ = ["ClassMeanPrior", "class_log_frequencies", "GPDData", "GPDOptions", "NOISE_SCALE_PRIOR",
           "DEFAULT_ALPHA_EPS", "ALPHA_EPS_GRID", "CLASS_BATCH_BYTES",
           "lognormal_targets", "prepare", "pad", "num_latent", "log_link", "initial_hypers",
           "collapsed_model", "condition", "predict", "sample_train", "loo_predictive",
           "pseudo_log_lik", "latent_model", "latent_conditional", "SPEC", "SPARSE_SPEC"]

DEFAULT_ALPHA_EPS = 0.01
"""Milios et al.'s usual value; the ILR paper's choice on glass and thyroid."""

ALPHA_EPS_GRID = (1e-4, 1e-3, 1e-2, 1e-1)
"""The values the ILR paper's Table 3 selected from, searched when ``alpha_eps="auto"``."""

MEAN_PRIOR_SCALE = 10.0
"""Standard deviation of the Normal(0, .) prior on the level of the class means."""


NOISE_SCALE_PRIOR = dist.LogNormal(0.0, 1.0)
"""Prior of each class's learned noise scale r_c (MAP and NUTS; type-II ML ignores it)."""


# ------------------------------------------------------------ the class means' prior
def class_log_frequencies(data) -> jax.Array:
    """(C,) offsets o_c = log pi_c - mean_c' log pi_c' of the class means from the GPD's
    prepared ``data`` (its ``options.class_sizes`` n_c and ``alpha_eps``): pi_c = (n_c +
    alpha_eps) / (N + C alpha_eps), the class frequencies smoothed by the Dirichlet prior's
    pseudo-count, so that a class without training points (in a fold of a search) stays
    finite. Padded data (``ppgpc.runtime.padding``) hold the counts as the array ``class_counts``
    instead, so that they are not compiled into the programs."""
    counts = (data.options.class_sizes if data.class_counts is None else data.class_counts)
    log_counts = jnp.log(jnp.asarray(counts, dtype=jnp.float64) + data.alpha_eps)
    return log_counts - jnp.mean(log_counts)


class _ClassMeanLine(constraints.Constraint):
    """The vectors ``offsets + b 1``, b real: the support of ``ClassMeanPrior``."""

    event_dim = 1

    def __init__(self, offsets):
        self.offsets = offsets

    def __call__(self, x):
        d = x - self.offsets
        return jnp.all(jnp.isclose(d, jnp.mean(d, axis=-1, keepdims=True)), axis=-1)

    def feasible_like(self, prototype):
        return jnp.broadcast_to(self.offsets, jnp.shape(prototype))

    def tree_flatten(self):
        return (self.offsets,), (("offsets",), {})


class _LevelToClassMeans(Transform):
    """b (..., 1) -> offsets + b (..., C): the line's one unconstrained coordinate."""

    domain = constraints.real_vector

    def __init__(self, offsets):
        self.offsets = offsets

    @property
    def codomain(self):
        return _ClassMeanLine(self.offsets)

    def __call__(self, x):
        return self.offsets + x

    def _inverse(self, y):
        return jnp.mean(y - self.offsets, axis=-1, keepdims=True)

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        return jnp.zeros(jnp.shape(x)[:-1])  # ClassMeanPrior's density is b's own

    def forward_shape(self, shape):
        return tuple(shape[:-1]) + tuple(jnp.shape(self.offsets)[-1:])

    def inverse_shape(self, shape):
        return tuple(shape[:-1]) + (1,)

    def tree_flatten(self):
        return (self.offsets,), (("offsets",), {})


@biject_to.register(_ClassMeanLine)
def _class_mean_line_transform(constraint):
    return _LevelToClassMeans(constraint.offsets)


class ClassMeanPrior(dist.Distribution):
    """Class means ``offsets + b 1`` with one level b ~ Normal(0, scale).

    Args:
        offsets: (C,) o_c, e.g. ``class_log_frequencies(data)``.
        scale: the prior standard deviation of b.

    ``log_prob`` is the density of b, read from any (C,) vector as mean(value - offsets).
    """

    arg_constraints = {"offsets": constraints.real_vector, "scale": constraints.positive}
    pytree_data_fields = ("offsets", "scale")

    def __init__(self, offsets, scale, *, validate_args=None):
        self.offsets, self.scale = offsets, scale
        super().__init__(batch_shape=(), event_shape=jnp.shape(offsets),
                         validate_args=validate_args)

    @constraints.dependent_property(is_discrete=False, event_dim=1)
    def support(self):
        return _ClassMeanLine(self.offsets)

    def sample(self, key, sample_shape=()):
        level = self.scale * jax.random.normal(key, tuple(sample_shape) + (1,))
        return self.offsets + level

    def log_prob(self, value):
        level = jnp.mean(value - self.offsets, axis=-1)
        return dist.Normal(0.0, self.scale).log_prob(level)


# ------------------------------------------------------------------- data and options
@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class GPDOptions:
    """Structural options, static under ``jax.jit`` (they decide shapes and branches)."""

    shared_kernel: bool = True
    predict_from: str = "latent"
    learn_noise_scale: bool = False
    class_sizes: tuple[int, ...] = ()
    """Training points per class; static so that the sparse bound can slice the points
    class by class (``ppgpc.gp.sparse.collapsed_bound_two_level``)."""


class GPDData(NamedTuple):
    """Prepared training data of the GPD."""

    X: jax.Array
    """(N, D) inputs."""
    y: jax.Array
    """(N,) integer labels in 0..C-1."""
    num_classes: int
    """C."""
    targets: jax.Array
    """(N, C) log-normal targets ytilde."""
    noise_var: jax.Array
    """(N, C) heteroscedastic noise variances s2."""
    alpha_eps: float
    """Dirichlet concentration of the classes a point does not belong to."""
    options: GPDOptions
    """Structural options (static)."""
    mask: jax.Array | None = None
    """(N,) row mask of data padded by ``pad`` (1 real, 0 padded); None when unpadded."""
    class_counts: jax.Array | None = None
    """(C,) training points per class of padded data, where ``options.class_sizes`` is
    emptied so that the counts are not compiled into the programs; None when unpadded."""

    @property
    def inducing_mask(self) -> None:
        """No inducing inputs travel with the rows (``ppgpc.models.spec.TrainingData``)."""
        return None


def lognormal_targets(alpha):
    """Log-normal moment match of Gamma(alpha, 1): (ytilde, s2), elementwise."""
    alpha = jnp.asarray(alpha, dtype=jnp.float64)
    s2 = jnp.log1p(1.0 / alpha)
    return jnp.log(alpha) - 0.5 * s2, s2


def prepare(X, y, num_classes: int, *, alpha_eps: float = DEFAULT_ALPHA_EPS,
            shared_kernel: bool = True, predict_from: str = "latent",
            learn_noise_scale: bool = False) -> GPDData:
    """Log-normal targets and noise for labels y (docs/math.md section 2).

    Args:
        X: (N, D) inputs; y: (N,) integer labels in 0..num_classes-1.
        alpha_eps: positive concentration of the off-classes (e.g. 0.01).
        shared_kernel: one kernel for all classes (True) or one per class.
        predict_from: ``"latent"`` or ``"noisy"`` (module docstring).
        learn_noise_scale: add the site ``noise_scale`` (C,), a fitted factor on each
            class's noise variances (module docstring).
    """
    if num_classes < 2:
        raise ValueError(f"GPD needs at least 2 classes, got {num_classes}")
    alpha_eps = check_positive("alpha_eps", alpha_eps)
    shared_kernel = check_flag("shared_kernel", shared_kernel)
    learn_noise_scale = check_flag("learn_noise_scale", learn_noise_scale)
    if predict_from not in ("latent", "noisy"):
        raise ValueError(f"predict_from must be 'latent' or 'noisy', got {predict_from!r}")
    # on the host: eager JAX ops here would compile a program per number of points
    y = np.asarray(y)
    alpha = alpha_eps + np.eye(num_classes)[y]
    s2 = np.log1p(1.0 / alpha)
    targets = np.log(alpha) - 0.5 * s2                              # lognormal_targets
    return GPDData(
        X=jax.device_put(np.asarray(X, dtype=np.float64)), y=jax.device_put(y),
        num_classes=int(num_classes), targets=jax.device_put(targets),
        noise_var=jax.device_put(s2), alpha_eps=float(alpha_eps),
        options=GPDOptions(bool(shared_kernel), predict_from, bool(learn_noise_scale),
                           tuple(int(n) for n in np.bincount(np.asarray(y),
                                                             minlength=num_classes))),
    )


def pad(data: GPDData, size: int) -> GPDData:
    """``data`` padded to ``size`` rows (``ppgpc.runtime.padding``): zero inputs, labels and targets
    and unit noise on the padded rows (which the mask zeroes), the row mask, and the class
    counts as the array ``class_counts``."""
    if data.mask is None:
        mask = row_mask(data.X.shape[0], size)
        counts = jnp.asarray(data.options.class_sizes, dtype=jnp.float64)
    else:
        mask, counts = pad_rows(data.mask, size), data.class_counts
    return data._replace(
        X=pad_rows(data.X, size), y=pad_rows(data.y, size),
        targets=pad_rows(data.targets, size), noise_var=pad_rows(data.noise_var, size, 1.0),
        options=dataclasses.replace(data.options, class_sizes=()), mask=mask,
        class_counts=counts)


def _row_weights(data: GPDData, N: int):
    """(N,) 1 on real rows, 0 on padded ones."""
    return jnp.ones(N) if data.mask is None else data.mask


def num_latent(num_classes: int) -> int:
    """L = C latent GPs."""
    return num_classes


def log_link(f: jax.Array) -> jax.Array:
    """log p(y = c | f) = log softmax(f)_c: (..., C) -> (..., C)."""
    return jax.nn.log_softmax(f, axis=-1)


# ------------------------------------------------------------------- helpers
def _class_params(data: GPDData, hypers: dict) -> tuple[dict, int | None]:
    """Kernel parameters and their ``vmap`` axis over classes: shared ones with axis None
    (under ``vmap`` over classes, what depends only on the kernel is computed once), per-class
    ones with a leading class axis (C, ...) and axis 0."""
    params = {name: jnp.asarray(value) for name, value in kernel_params(hypers).items()}
    return params, (None if data.options.shared_kernel else 0)


def _sample_kernel(data: GPDData, kernel, fixed: dict | None) -> tuple[dict, int | None]:
    """The ``kernel_*`` sites, one set or one per class inside a class plate, with their
    ``vmap`` axis over classes (as ``_class_params``)."""
    D, C = data.X.shape[1], data.targets.shape[1]
    axis = None if data.options.shared_kernel else 0
    if data.options.shared_kernel or fixed is not None:
        return sample_kernel_params(kernel, D, fixed=fixed), axis
    with numpyro.plate("class_kernels", C, dim=-1):
        return sample_kernel_params(kernel, D), axis


def _sample_mean(data: GPDData, fixed: dict | None) -> jax.Array:
    if fixed is not None:
        return jnp.asarray(fixed["mean"])
    return numpyro.sample("mean", ClassMeanPrior(class_log_frequencies(data), MEAN_PRIOR_SCALE))


def _scaled_noise(data: GPDData, hypers: dict | None, s2: jax.Array) -> jax.Array:
    """(..., C) noise variances s2 times the class scales ``hypers["noise_scale"]`` when
    they are learned, else s2 itself: the one place the scale rule lives."""
    if data.options.learn_noise_scale:
        return s2 * jnp.asarray(hypers["noise_scale"])[None, :]
    return s2


def _sample_noise_scale(data: GPDData, fixed: dict | None = None) -> dict | None:
    """The site ``noise_scale`` (C,) when it is learned and not in ``fixed`` (a dict keyed
    by site name), as a dict for ``_scaled_noise``; else ``fixed``."""
    if data.options.learn_noise_scale and fixed is None:
        C = data.targets.shape[1]
        return {"noise_scale": numpyro.sample("noise_scale",
                                              NOISE_SCALE_PRIOR.expand([C]).to_event(1))}
    return fixed


def _sample_noise_var(data: GPDData, fixed: dict | None = None) -> jax.Array:
    """(N, C) noise variances s2, times the site ``noise_scale`` (C,) when it is learned
    (or its value in ``fixed``)."""
    return _scaled_noise(data, _sample_noise_scale(data, fixed), data.noise_var)


def noise_var(data: GPDData, hypers: dict) -> jax.Array:
    """(N, C) fitted noise variances: s2, times ``hypers["noise_scale"]`` when learned."""
    return _scaled_noise(data, hypers, data.noise_var)


def _class_grams(kernel, class_params: tuple[dict, int | None], X) -> jax.Array:
    """Prior covariances: (N, N) when the classes share the kernel, else (C, N, N)."""
    params, axis = class_params
    if axis is None:
        return gram(kernel, params, X)
    return jax.vmap(lambda p: gram(kernel, p, X))(params)


def _class_noise_levels(data: GPDData, hypers: dict | None) -> tuple[jax.Array, jax.Array]:
    """Each class's two noise variances, (C,) each: s2(1 + alpha_eps) on the points of the
    class and s2(alpha_eps) elsewhere, times the learned class scales when there are any."""
    s2_out, s2_in = lognormal_targets(jnp.stack([data.alpha_eps, 1.0 + data.alpha_eps]))[1]
    ones = jnp.ones((1, data.targets.shape[1]))
    levels = _scaled_noise(data, hypers, jnp.concatenate([s2_in * ones, s2_out * ones]))
    return levels[0], levels[1]


def _noise_at_prediction(data: GPDData, hypers: dict, mean: jax.Array) -> jax.Array:
    """(n, C) pseudo-observation noise for the label the latent mean predicts (times the
    learned class scales, when there are any)."""
    noise_in, noise_out = _class_noise_levels(data, hypers)
    hit = jax.nn.one_hot(jnp.argmax(mean, axis=-1), mean.shape[-1], dtype=bool)
    return jnp.where(hit, noise_in[None, :], noise_out[None, :])


def _finish_prediction(data: GPDData, hypers: dict, mean, var):
    if data.options.predict_from == "noisy":
        var = var + _noise_at_prediction(data, hypers, mean)
    return mean, var


def initial_hypers(data: GPDData, kernel) -> dict:
    """Means on their line nearest the target means; kernel variance at the mean target variance."""
    D, C = data.X.shape[1], data.targets.shape[1]
    targets = real_rows(data.targets, data.mask)
    centre = float(np.mean(targets)) + class_log_frequencies(data)
    variance = max(float(np.mean(np.var(targets, axis=0))), 1e-2)
    start = {"kernel_" + k: v for k, v in kernel.initial_params(D, variance=variance).items()}
    if not data.options.shared_kernel:
        start = {k: jnp.broadcast_to(v, (C,) + jnp.shape(v)) for k, v in start.items()}
    if data.options.learn_noise_scale:
        start["noise_scale"] = jnp.ones(C)
    return {**start, "mean": centre}


# ------------------------------------------------------------------- exact GPD
def collapsed_model(data: GPDData, kernel) -> None:
    """Collapsed form: ytilde_c ~ MVN(mean_c 1, K_c + diag(s2_:c)), its gradient from the
    same factors. With a shared kernel and fixed noise, class c's noise is s2(1 + alpha_eps)
    on its own points and s2(alpha_eps) elsewhere, and one factorisation serves every class
    (``ppgpc.gp.exact.TwoLevelMarginalGaussian``); otherwise one Cholesky per class
    (``ppgpc.gp.exact.MarginalGaussian``).

    Sites: ``kernel_*``, ``mean`` and ``noise_scale`` when learned (priors), ``ytilde``
    observed with shape (C, N). With f integrated out the N points are jointly Gaussian,
    so ``ytilde`` is one observation per class (an MVN over the N points), not one per
    point: ArviZ's pointwise LOO needs ``latent_model`` (or ppgpc's export, whose
    log-likelihood is per point whatever the form).
    """
    N, C = data.targets.shape
    params = _sample_kernel(data, kernel, None)                    # (params, class axis)
    mean = _sample_mean(data, None)
    noise = _sample_noise_var(data)
    K = mask_gram(_class_grams(kernel, params, data.X), data.mask)
    weights = _row_weights(data, N)
    loc = mean[:, None] * weights
    if data.options.shared_kernel and not data.options.learn_noise_scale:
        # shared kernel and fixed noise: two noise levels, one factorisation for all classes
        low, high = lognormal_targets(jnp.stack([data.alpha_eps, 1.0 + data.alpha_eps]))[1]
        onehot = jax.nn.one_hot(data.y, C, dtype=K.dtype)
        marginal = exact.TwoLevelMarginalGaussian(loc, K, onehot, low, high, data.mask)
    else:
        marginal = exact.MarginalGaussian(loc, K + jax.vmap(jnp.diag)(noise.T * weights),
                                          rows=data.mask)                       # (C, N, N)
    with numpyro.plate("latent", C, dim=-1):
        numpyro.sample("ytilde", marginal, obs=data.targets.T)
    if data.mask is not None:
        numpyro.factor("padded_rows", padding_constant(data.mask, C))


def prior_factor(data: GPDData, kernel, hypers: dict) -> linalg.Cholesky:
    """chol(K) of the prior covariance at the training inputs with hyperparameters
    ``hypers``: (N, N) when the classes share the kernel, else (C, N, N)."""
    K = mask_gram(_class_grams(kernel, _class_params(data, hypers), data.X), data.mask)
    return linalg.cholesky(K, rows=data.mask)


def latent_model(data: GPDData, kernel, fixed_hypers: dict | None = None,
                 factor: linalg.Cholesky | None = None) -> None:
    """Latent form: f_c = mean_c + chol(K_c) v_c, v_c ~ N(0, I); ytilde_ic ~ N(f_ic, s2_ic).

    Args:
        fixed_hypers: ``kernel_*``, ``mean`` (and ``noise_scale``) by site name; ``None``
            samples them too.
        factor: ``prior_factor(data, kernel, fixed_hypers)``, given to skip the
            factorisation.

    Sites: ``kernel_*``, ``mean`` and ``noise_scale`` when learned (unless fixed),
    ``f_white`` (C, N), deterministic ``f`` (N, C), ``ytilde`` observed (N, C): ytilde_i
    depends on f_i only, so each point is observed inside ``numpyro.plate("data", N)``
    (one log-likelihood term per point for ``az.from_numpyro``; dims from
    ``ppgpc.infer.arviz_dims``).
    """
    N, C = data.targets.shape
    params = _sample_kernel(data, kernel, fixed_hypers)
    mean = _sample_mean(data, fixed_hypers)
    noise = _sample_noise_var(data, fixed_hypers)
    if factor is None:
        K = mask_gram(_class_grams(kernel, params, data.X), data.mask)
        factor = linalg.cholesky(K, rows=data.mask)
    f = exact.whitened_latent(factor.factor, C, mean)                                   # (N, C)
    with numpyro.plate("data", N, dim=-1), real_rows_only(data.mask):
        numpyro.sample("ytilde", dist.Normal(f, jnp.sqrt(noise)).to_event(1),
                       obs=data.targets)


CLASS_BATCH_BYTES = 2**30
"""The largest C x N x N float64 batch (bytes) the exact posterior's class-wise steps run
as one batch over the classes (``jax.vmap``); above it they run one class at a time
(``ppgpc.gp.sparse.map_outputs``). A batch holds C copies of every N x N temporary at once
(tens of GB at N = 10^4), while XLA spreads a batch of factorisations over its CPU threads
and a loop runs them one after another."""


def _over_classes(data: GPDData, fn, in_axes: tuple):
    """``fn`` over the classes, batched or one class at a time (``CLASS_BATCH_BYTES``)."""
    N, C = data.targets.shape
    if 8 * C * N * N <= CLASS_BATCH_BYTES:
        return jax.vmap(fn, in_axes=in_axes)
    return sparse.map_outputs(fn, in_axes)


def condition(data: GPDData, kernel, hypers: dict) -> exact.ExactPosterior:
    """The exact posterior of every class, fields with a leading class axis (the classes
    batched or one at a time, ``CLASS_BATCH_BYTES``)."""
    resid = (data.targets - hypers["mean"][None, :]).T[:, :, None]  # (C, N, 1)
    params, axis = _class_params(data, hypers)
    return _over_classes(data, exact.condition, (None, axis, None, 0, 0, None))(
        kernel, params, data.X, resid, noise_var(data, hypers).T, data.mask)


def predict(data: GPDData, kernel, hypers: dict, posterior: exact.ExactPosterior, Xs):
    """Predictive at Xs (n, D): mean (n, C) and variance (n, C) of the latent, plus the
    pseudo-observation noise when ``predict_from="noisy"``."""
    params, axis = _class_params(data, hypers)
    mean, var = _over_classes(data, exact.predict, (None, axis, 0, None))(
        kernel, params, posterior, Xs)  # (C, n, 1), (C, n)
    return _finish_prediction(data, hypers, mean[:, :, 0].T + hypers["mean"][None, :], var.T)


def sample_train(key, data: GPDData, kernel, hypers: dict, posterior, num_samples: int):
    """(S, N, C) joint posterior draws of f at the training inputs (Matheron's rule); with a
    shared kernel the prior's factor is computed once for all classes."""
    C = data.targets.shape[1]
    resid = (data.targets - hypers["mean"][None, :]).T[:, :, None]
    params, axis = _class_params(data, hypers)
    prior = (None if axis is not None
             else exact.prior_factors(kernel, params, data.X, data.mask))

    def one(k, params, post, y, noise):
        return exact.sample_posterior_at_inputs(k, kernel, params, post, y, noise, num_samples,
                                                prior=prior)

    draws = _over_classes(data, one, (0, axis, 0, 0, 0))(
        jax.random.split(key, C), params, posterior, resid,
        noise_var(data, hypers).T)  # (C, S, N, 1)
    return jnp.moveaxis(draws[..., 0], 0, -1) + hypers["mean"]


def loo_predictive(data: GPDData, kernel, hypers: dict, posterior: exact.ExactPosterior):
    """Closed-form leave-one-out predictive of f at each training input, class by class
    (hyperparameters fixed; ``ppgpc.gp.loo_predictive``), the class means added back and
    the pseudo-observation noise too when ``predict_from="noisy"``: mean (N, C), variance
    (N, C)."""
    resid = (data.targets - hypers["mean"][None, :]).T[:, :, None]  # (C, N, 1)
    mean, var = _over_classes(data, exact.loo_predictive, (0, 0, 0))(
        posterior, resid, noise_var(data, hypers).T)
    return _finish_prediction(data, hypers, mean[:, :, 0].T + hypers["mean"][None, :], var.T)


def pseudo_log_lik(data: GPDData, hypers: dict, f):
    """(..., N) log p(ytilde_i | f_i) = sum_c log N(ytilde_ic | f_ic, s2_ic [times
    noise_scale_c]): the Gaussian pseudo-likelihood term of each point, for f of shape
    (..., N, C) (class means included, as ``sample_train`` draws it)."""
    noise = noise_var(data, hypers)
    resid = data.targets - f
    return -0.5 * jnp.sum(resid * resid / noise + jnp.log(2 * jnp.pi * noise), axis=-1)


def latent_conditional(data: GPDData, kernel, hypers: dict, f, Xs):
    """f(Xs) | f(X) = f under the GP prior (means included): mean (n, C), variance (n, C)."""
    resid = (f - hypers["mean"][None, :]).T[:, :, None]
    params, axis = _class_params(data, hypers)
    mean, var = jax.vmap(exact.latent_conditional, in_axes=(None, axis, None, 0, None, None))(
        kernel, params, data.X, resid, Xs, data.mask)                    # (C, n, 1) each
    return _finish_prediction(data, hypers, mean[:, :, 0].T + hypers["mean"][None, :],
                              var[:, :, 0].T)


SPEC: ModelSpec
SPEC = conjugate_spec(
    "dirichlet_gp",
    description="GPD: heteroscedastic GP regression on log-normal Dirichlet targets (C GPs)",
    prepare=prepare, pad=pad, num_latent=num_latent, log_link=log_link,
    initial_hypers=initial_hypers,
    conjugate=Conjugate(collapsed_model=collapsed_model, condition=condition, predict=predict,
                        sample_train=sample_train, loo_predictive=loo_predictive,
                        pseudo_log_lik=pseudo_log_lik),
    latent=Latent(latent_model=latent_model, latent_conditional=latent_conditional,
                  prior_factor=prior_factor),
    sparse_alternative='use the sparse model: DirichletGPClassifier(inference="collapsed") '
                       '(driver model "dirichlet_gp_sparse")')
"""GPD's ``ModelSpec`` (exact conjugate form, latent form), driver model ``"dirichlet_gp"``."""


# ------------------------------------------------------------- collapsed sparse GPD
sparse_prepare = sparse.make_prepare(prepare, per_output_inducing=True)
sparse_initial_hypers = sparse.make_initial_hypers(initial_hypers)


def _per_class(Z) -> bool:
    """Whether the inducing inputs are one set per class, (C, M, D) (``shared_inducing=
    False``), rather than one shared set (M, D)."""
    return jnp.ndim(Z) == 3


def _class_bound(data: sparse.SparseData):
    """``sparse.collapsed_bound`` on the data's placement, to vmap over classes."""
    return functools.partial(sparse.collapsed_bound, placement=data.placement)


def sparse_collapsed_model(data: sparse.SparseData, kernel) -> None:
    """Titsias bound summed over classes, each with its own noise s2_:c (docs/math.md section 2,
    Sparse GPD); with ``shared_inducing=False`` each class at its own inducing inputs.

    Sites: ``kernel_*``, ``mean``, ``noise_scale`` (when learned), ``inducing_inputs``
    (M, D, or C, M, D; flat improper prior) and the factor ``collapsed_bound``, one term
    that couples all N points (no observed site, no pointwise log-likelihood).
    """
    base = data.base
    params, axis = _sample_kernel(base, kernel, None)
    mean = _sample_mean(base, None)
    scales = _sample_noise_scale(base)
    Z = numpyro.sample("inducing_inputs", InducingPrior(data.inducing_init.shape))
    resid = base.targets - mean[None, :]                                    # (N, C)
    if _per_class(Z):  # one factorisation per class, each with its own noise column
        bound = sparse.collapsed_bound_per_output(
            kernel, params, base.X, resid, Z, _scaled_noise(base, scales, base.noise_var),
            params_per_output=axis == 0, placement=data.placement)
    elif axis is None:  # shared kernel: the classes' noise differs only in and out of class
        bound = sparse.collapsed_bound_two_level(
            kernel, params, base.X, resid, Z, base.y, base.options.class_sizes,
            *_class_noise_levels(base, scales), placement=data.placement)
    else:
        noise = _scaled_noise(base, scales, base.noise_var)
        bound = jnp.sum(jax.vmap(_class_bound(data), in_axes=(None, 0, None, 0, None, 0))(
            kernel, params, base.X, resid.T[:, :, None], Z, noise.T))
    numpyro.factor("collapsed_bound", bound)


def sparse_condition(data: sparse.SparseData, kernel, hypers: dict) -> sparse.SparsePosterior:
    """The optimal q(u_c) of every class (fields with a leading class axis; with per-class
    inducing inputs ``jitter`` is the largest any class needed)."""
    base = data.base
    resid = base.targets - hypers["mean"][None, :]                           # (N, C)
    params, axis = _class_params(base, hypers)
    Z = hypers["inducing_inputs"]
    if _per_class(Z):
        return sparse.condition_per_output(kernel, params, base.X, resid, Z,
                                           noise_var(base, hypers), params_per_output=axis == 0,
                                           placement=data.placement)
    if axis is None:  # shared kernel: the two-level sums, as the bound
        return sparse.condition_two_level(kernel, params, base.X, resid, Z, base.y,
                                          base.options.class_sizes,
                                          *_class_noise_levels(base, hypers),
                                          placement=data.placement)
    return jax.vmap(functools.partial(sparse.condition, placement=data.placement),
                    in_axes=(None, axis, None, 0, None, 0))(
        kernel, params, base.X, resid.T[:, :, None], Z, noise_var(base, hypers).T)


def _sparse_latent(data: sparse.SparseData, kernel, hypers: dict, posterior, Xs):
    """The latent's predictive under q(u) at Xs (n, D), class means included and no
    pseudo-observation noise: mean (n, C), variance (n, C)."""
    params, axis = _class_params(data.base, hypers)
    if _per_class(hypers["inducing_inputs"]):
        mean, var = sparse.predict_per_output(kernel, params, posterior, Xs,
                                              params_per_output=axis == 0)
    else:
        mean, var = jax.vmap(sparse.predict, in_axes=(None, axis, 0, None))(
            kernel, params, posterior, Xs)                               # (C, n, 1), (C, n)
        mean, var = mean[:, :, 0].T, var.T
    return mean + hypers["mean"][None, :], var


def sparse_predict(data: sparse.SparseData, kernel, hypers: dict, posterior, Xs):
    """Predictive under q(u) at Xs: mean (n, C), variance (n, C) (noise as in ``predict``)."""
    return _finish_prediction(data.base, hypers,
                              *_sparse_latent(data, kernel, hypers, posterior, Xs))


def sparse_sample_inducing(key, data: sparse.SparseData, kernel, hypers: dict, posterior,
                           num_samples: int):
    """(S, M, C) draws of every class's whitened inducing values under its q(u_c)
    (``ppgpc.gp.whitened.sample_whitened``)."""
    return whitened.sample_whitened(key, posterior, num_samples)


def sparse_inducing_latent(data: sparse.SparseData, kernel, hypers: dict, v, Xs, eps):
    """(S, n, C) draws at Xs (n, D) given whitened draws v (S, M, C): f_c = mean_c + a_c^T v_c
    + sqrt(k_c - |a_c|^2) eps, the latent's predictive under q(u); with
    ``predict_from="noisy"`` the pseudo-observation noise of the class the latent
    predictive mean picks is added to the variance (that mean a^T vbar from the average vbar
    of the draws given, as ``predict``'s is from q's mean)."""
    base = data.base
    params, axis = _class_params(base, hypers)
    Z = hypers["inducing_inputs"]

    def latent(v, eps, extra_var=0.0):
        return hypers["mean"] + whitened.latent_given_whitened(
            kernel, params, Z, v, Xs, eps, params_per_output=axis == 0, extra_var=extra_var)

    if base.options.predict_from != "noisy":
        return latent(v, eps)
    mean = latent(jnp.mean(v, axis=0, keepdims=True), jnp.zeros_like(eps[:1]))[0]  # (n, C)
    return latent(v, eps, _noise_at_prediction(base, hypers, mean))


def sparse_inducing_values(data: sparse.SparseData, kernel, hypers: dict, v):
    """u_c = mean_c + L_m,c v_c (..., M, C): each class's latent at its inducing inputs (the
    shared Z, or its own Z_c), without pseudo-observation noise whatever ``predict_from``
    says, for the ArviZ export's ``u``."""
    params, axis = _class_params(data.base, hypers)
    return hypers["mean"] + whitened.inducing_values(
        kernel, params, hypers["inducing_inputs"], v, params_per_output=axis == 0)


SPARSE_SPEC: ModelSpec
SPARSE_SPEC = collapsed_sparse_spec(
    SPEC, "dirichlet_gp_sparse",
    description="Sparse GPD: collapsed Titsias bound with per-class heteroscedastic noise",
    prepare=sparse_prepare, initial_hypers=sparse_initial_hypers,
    collapsed_model=sparse_collapsed_model, condition=sparse_condition, predict=sparse_predict,
    inducing=Inducing(inducing_latent=sparse_inducing_latent,
                      sample_inducing=sparse_sample_inducing,
                      inducing_values=sparse_inducing_values))
"""Sparse GPD's ``ModelSpec`` (Titsias's bound, per-class noise), driver model
``"dirichlet_gp_sparse"``."""
