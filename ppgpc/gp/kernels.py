"""Stationary kernels, written on a pair of points and vmapped once into a Gram matrix.

A kernel is a small frozen object that knows

* its parameter names and shapes for a given input dimension (``param_shapes``),
* how to evaluate ``k(x, x')`` on a *pair* of points (``evaluate``),
* its default priors (NumPyro distributions on the positive scale) and initial values.

``gram(kernel, params, X1, X2)`` turns the pair function into a matrix with one nested
``vmap``; shape errors are raised there with the shapes named. A pair function written with
dot products (as the RBF's is) becomes matrix products under that ``vmap``.

Notation follows docs/math.md: RBF k(x, x') = s^2 exp(-|x - x'|^2 / (2 l^2)) and Matern-5/2
k(x, x') = s^2 (1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r) with r = |x - x'| / l, the
lengthscale l a scalar (isotropic) or a vector of length D (ARD, one per input dimension).
Both share parameters, priors and starting values (``_Stationary``) and differ only in the
profile, the kernel as a function of the scaled squared distance.
Parameters live on the positive scale (``variance`` = s^2, ``lengthscale`` = l); the
NumPyro models sample them from positive-support priors and optimisers work on their
logarithms through NumPyro's constraint transforms.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Mapping

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from ppgpc.validation import check_positive

__all__ = ["Matern52", "RBF", "gram", "gram_diag", "kernel_log_prior", "kernel_params",
           "make_kernel", "sample_kernel_params", "site_name"]

SITE_PREFIX = "kernel_"

Params = Mapping[str, jax.Array]


@dataclasses.dataclass(frozen=True)
class _Stationary(abc.ABC):
    """What the stationary kernels share: the parameters (variance s^2, lengthscale l), their
    priors and starting values, and the scaled squared distance. A subclass gives ``name``
    and ``profile(sq)``, the kernel at unit variance as a function of |x - x'|^2 / l^2.

    Attributes:
        ard: one lengthscale per input dimension (True) or a single shared one (False).
        lengthscale_prior_scale: the standard deviation of log l under the default prior
            (``priors``), 1 by default; smaller values hold the lengthscales nearer to the
            prior median sqrt(D).

    Parameters (a dict passed to every call):
        variance: scalar s^2 > 0.
        lengthscale: shape () when ``ard`` is False, shape (D,) when True; all > 0.

    Kernels are registered as static pytrees: they pass through ``jax.jit`` and NumPyro's
    ``MCMC`` as compile-time constants (they are hashable and hold no arrays).
    """

    ard: bool = True
    lengthscale_prior_scale: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "lengthscale_prior_scale",
                           check_positive("lengthscale_prior_scale",
                                          self.lengthscale_prior_scale))

    def param_shapes(self, input_dim: int) -> dict[str, tuple[int, ...]]:
        """Shapes of the parameters for inputs of dimension ``input_dim``."""
        return {"variance": (), "lengthscale": (input_dim,) if self.ard else ()}

    @abc.abstractmethod
    def profile(self, sq: jax.Array) -> jax.Array:
        """k / s^2 as a function of the scaled squared distance sq = |x - x'|^2 / l^2 >= 0."""

    def evaluate(self, params: Params, x: jax.Array, x2: jax.Array) -> jax.Array:
        """k(x, x') for one pair of points, each of shape (D,); returns a scalar.

        The squared distance is expanded as |a|^2 + |b|^2 - 2 a.b with a = x / l,
        b = x' / l (clipped at 0: rounding can leave -1e-16 for coincident points). Under
        ``gram``'s nested ``vmap`` the three dot products batch into matrix products, so
        neither the value nor the gradient forms the (n, m, D) tensor of differences that
        ``x - x'`` would; at n = 15000, m = 200, D = 16 (the sparse models' K_nm) that makes
        value and gradient ten times cheaper.
        """
        a = x / params["lengthscale"]
        b = x2 / params["lengthscale"]
        sq = jnp.dot(a, a) + jnp.dot(b, b) - 2.0 * jnp.dot(a, b)
        return params["variance"] * self.profile(jnp.maximum(sq, 0.0))

    def diag(self, params: Params, X: jax.Array) -> jax.Array:
        """k(x_i, x_i) for every row of X (n, D): stationary, so s^2 for all; shape (n,)."""
        return jnp.full(X.shape[:1], params["variance"], dtype=X.dtype)

    def priors(self, input_dim: int) -> dict[str, dist.Distribution]:
        """Weakly informative priors for z-scored inputs.

        ``variance ~ LogNormal(0, 1.5)`` (scales from about 0.05 to 20 within two standard
        deviations) and ``lengthscale ~ LogNormal(log sqrt(D), lengthscale_prior_scale)``
        (scale 1 by default): on z-scored inputs the typical distance between two points is
        about sqrt(2 D), so a lengthscale near sqrt(D) is the natural centre.
        """
        shapes = self.param_shapes(input_dim)
        loc = 0.5 * math.log(max(input_dim, 1))
        ls = dist.LogNormal(jnp.full(shapes["lengthscale"], loc), self.lengthscale_prior_scale)
        if self.ard:
            ls = ls.to_event(1)
        return {"variance": dist.LogNormal(0.0, 1.5), "lengthscale": ls}

    def initial_params(self, input_dim: int, variance: float = 1.0,
                       lengthscale: float | None = None) -> dict[str, jax.Array]:
        """Starting values for optimisation.

        Args:
            input_dim: D.
            variance: the starting signal variance.
            lengthscale: the starting lengthscale (every dimension's, with ARD); ``None``
                gives the prior median sqrt(D).

        Returns:
            ``{"variance": (), "lengthscale": () or (D,)}``.
        """
        shapes = self.param_shapes(input_dim)
        if lengthscale is None:
            lengthscale = math.sqrt(max(input_dim, 1))
        return {
            "variance": jnp.asarray(float(variance)),
            "lengthscale": jnp.full(shapes["lengthscale"], float(lengthscale)),
        }


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class RBF(_Stationary):
    """Squared-exponential kernel k(x, x') = s^2 exp(-|x - x'|^2 / (2 l^2)) (docs/math.md notation).

    Fields, parameters, priors and starting values as for every stationary kernel
    (``_Stationary``: ``ard``, ``lengthscale_prior_scale``; ``variance``, ``lengthscale``).

    Example:
        >>> import jax.numpy as jnp
        >>> from ppgpc.gp.kernels import RBF, gram
        >>> k = RBF(ard=True)
        >>> X = jnp.zeros((4, 2))
        >>> gram(k, {"variance": 2.0, "lengthscale": jnp.ones(2)}, X).shape
        (4, 4)
    """

    name = "rbf"

    def profile(self, sq: jax.Array) -> jax.Array:
        """exp(-sq / 2)."""
        return jnp.exp(-0.5 * sq)


# Below this scaled squared distance the Matern distance r = sqrt(sq) is taken at the floor:
# r^2 = 1e-36 keeps d r / d sq = 1 / (2 r) finite, and k differs from its value at sq = 0 by
# 5/6 * 1e-36 relative, far below rounding.
_MIN_SQ = 1e-36


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class Matern52(_Stationary):
    """Matern kernel of smoothness 5/2:
    k(x, x') = s^2 (1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r), r = |x - x'| / l.

    Sample paths are twice differentiable, rougher than the RBF's. Fields, parameters,
    priors and starting values as for every stationary kernel (``_Stationary``).

    The derivative in sq = r^2, -(5/6) (1 + sqrt(5) r) exp(-sqrt(5) r), is finite at r = 0,
    but autodiff through r = sqrt(sq) is not; sq is floored at 1e-36 so gradients at
    coincident points are finite (and correct to rounding).

    Example:
        >>> import jax.numpy as jnp
        >>> from ppgpc.gp.kernels import Matern52, gram
        >>> X = jnp.zeros((3, 2))
        >>> gram(Matern52(), {"variance": 2.0, "lengthscale": jnp.ones(2)}, X)[0, 1]
        Array(2., dtype=float64)
    """

    name = "matern52"

    def profile(self, sq: jax.Array) -> jax.Array:
        """(1 + sqrt(5 sq) + 5 sq / 3) exp(-sqrt(5 sq))."""
        r5 = jnp.sqrt(5.0 * jnp.maximum(sq, _MIN_SQ))
        return (1.0 + r5 + r5 * r5 / 3.0) * jnp.exp(-r5)


def _check_inputs(X1: jax.Array, X2: jax.Array) -> None:
    if X1.ndim != 2 or X2.ndim != 2:
        raise ValueError(
            f"kernel inputs must be 2-D arrays (n, D); got shapes {X1.shape} and {X2.shape}"
        )
    if X1.shape[1] != X2.shape[1]:
        raise ValueError(
            f"kernel inputs disagree on the input dimension D: {X1.shape} versus {X2.shape}"
        )


def gram(kernel, params: Params, X1: jax.Array, X2: jax.Array | None = None) -> jax.Array:
    """Gram matrix K[i, j] = k(X1[i], X2[j]).

    Args:
        kernel: a kernel object with ``evaluate(params, x, x2)``.
        params: its parameters.
        X1: (n, D) inputs.
        X2: (m, D) inputs; ``None`` means X1 (the symmetric case).

    Returns:
        (n, m) matrix.
    """
    X2 = X1 if X2 is None else X2
    _check_inputs(X1, X2)
    row = jax.vmap(kernel.evaluate, in_axes=(None, None, 0))
    return jax.vmap(row, in_axes=(None, 0, None))(params, X1, X2)


def gram_diag(kernel, params: Params, X: jax.Array) -> jax.Array:
    """Diagonal k(x_i, x_i) of the Gram matrix, shape (n,), without forming the matrix."""
    _check_inputs(X, X)
    return kernel.diag(params, X)


_KERNELS = {
    "rbf": lambda: RBF(ard=False),
    "rbf-iso": lambda: RBF(ard=False),
    "rbf-ard": lambda: RBF(ard=True),
    "matern52": lambda: Matern52(ard=False),
    "matern52-iso": lambda: Matern52(ard=False),
    "matern52-ard": lambda: Matern52(ard=True),
}


def make_kernel(spec):
    """A kernel object from a name ("rbf", "rbf-iso", "rbf-ard", "matern52",
    "matern52-iso", "matern52-ard"; without a suffix: one lengthscale) or a kernel object."""
    if isinstance(spec, str):
        try:
            return _KERNELS[spec.lower()]()
        except KeyError:
            raise ValueError(
                f"unknown kernel {spec!r}; known kernels: {sorted(_KERNELS)}"
            ) from None
    if not hasattr(spec, "evaluate") or not hasattr(spec, "param_shapes"):
        raise TypeError(f"kernel must be a name or a kernel object, got {type(spec).__name__}")
    return spec


def site_name(param: str) -> str:
    """NumPyro site name of a kernel parameter: ``kernel_variance``, ``kernel_lengthscale``."""
    return SITE_PREFIX + param


def kernel_params(hypers: Params) -> dict:
    """The kernel parameters in a hyperparameter dict keyed by site name: every
    ``kernel_<name>`` entry as ``<name>`` (``kernel_variance`` -> ``variance``); other sites
    (``mean``, ``noise_scale``, ``inducing_inputs``, ...) are left out.

    Example:
        >>> kernel_params({"kernel_variance": 2.0, "kernel_lengthscale": 1.0, "mean": 0.0})
        {'variance': 2.0, 'lengthscale': 1.0}
    """
    return {name.removeprefix(SITE_PREFIX): value for name, value in hypers.items()
            if name.startswith(SITE_PREFIX)}


def kernel_log_prior(kernel, input_dim: int, params: Params) -> jax.Array:
    """log p(theta) of kernel parameters under ``kernel.priors(input_dim)``, a scalar.

    Args:
        params: parameter values keyed by parameter name (``variance``, ``lengthscale``),
            or by site name (``kernel_variance``, ...); each may carry leading batch axes
            (one kernel per latent: (L,) variances, (L, D) ARD lengthscales), over which
            the log densities are summed.
    """
    priors = kernel.priors(input_dim)
    return sum(jnp.sum(priors[name.removeprefix(SITE_PREFIX)].log_prob(value))
               for name, value in params.items())


def sample_kernel_params(kernel, input_dim: int, fixed: Params | None = None) -> dict:
    """Sample the kernel parameters as NumPyro sites ``kernel_<name>`` from their priors.

    Every model module calls this so that hyperparameter sites have the same names in all
    four classifiers. With ``fixed`` (a dict keyed by site name), the values are used as
    they are and no site is created (the latent-form model with fixed hyperparameters).

    Returns:
        The kernel parameter dict, keyed by parameter name (``variance``, ``lengthscale``).
    """
    if fixed is not None:
        return {name: jnp.asarray(fixed[site_name(name)]) for name in kernel.param_shapes(input_dim)}
    priors = kernel.priors(input_dim)
    return {name: numpyro.sample(site_name(name), prior) for name, prior in priors.items()}
