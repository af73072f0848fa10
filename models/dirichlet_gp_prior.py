"""The GPD's prior on its class means (docs/math.md section 2), apart from the model
(``ppgpc.models.dirichlet_gp``, which re-exports it).

The C constant prior means share one level b and differ by the log class frequencies:

    mean_c = b + o_c,   o_c = log pi_c - (1/C) sum_c' log pi_c',   b ~ Normal(0, 10),
    pi_c = (n_c + alpha_eps) / (N + C alpha_eps)   (``class_log_frequencies``).

Why: far from the data every latent reverts to its prior, f_c ~ N(mean_c, s^2), so the
prior means alone decide the predictive there. With these, E[exp f_c] is proportional to
pi_c: read as the paper's Gamma variables, the Dirichlet there has mean pi (Milios et al.'s
own code shifts its targets by log pi_c plus one constant), and with a shared kernel the
predictive E[softmax(f*)] is pi pulled towards uniform by the kernel variance, never more
confident than the class frequencies (checked numerically for C = 2 to 26 and s from 0.05
to 15; with one kernel per class the variances differ and only the Gamma means are
matched). C free means extrapolated each class's fitted level instead: on wine, means
(-9.7, -4.7, -9.2) predicted [0.16, 0.66, 0.18] at every point far from the data, against
class frequencies [0.33, 0.40, 0.27].

``ClassMeanPrior`` keeps the NumPyro site ``mean`` at its shape (C,) with the line b + o as
its support: NumPyro's ``biject_to`` maps one unconstrained coordinate, b, onto it, so
type-II ML, MAP and NUTS move b alone and every fitted or sampled mean lies on the line,
while the functions that condition and predict read the (C,) means as before (given values
and saves of earlier versions, whose C means were free, are used as they are).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions import constraints
from numpyro.distributions.transforms import Transform, biject_to

__all__ = ["ClassMeanPrior", "class_log_frequencies"]


def class_log_frequencies(data) -> jax.Array:
    """(C,) offsets o_c = log pi_c - mean_c' log pi_c' of the class means from the GPD's
    prepared ``data`` (its ``options.class_sizes`` n_c and ``alpha_eps``): pi_c = (n_c +
    alpha_eps) / (N + C alpha_eps), the class frequencies smoothed by the Dirichlet prior's
    pseudo-count, so that a class without training points (in a fold of a search) stays
    finite. Padded data (``ppgpc.padding``) hold the counts as the array ``class_counts``
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
