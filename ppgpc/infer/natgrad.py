"""Natural-gradient steps for Gaussian variational factors, beside an ordinary optimiser for
everything else (Hensman, Fusi & Lawrence 2013; Salimbeni, Eleftheriadis & Hensman 2018,
"Natural gradients in practice").

A Gaussian factor q(v) = N(m, S), S = R R^T, is held by two ``numpyro.param`` sites: a mean
(..., M) and a lower-triangular scale R (..., M, M) under ``constraints.lower_cholesky``.
Its natural parameters are theta = (S^-1 m, -1/2 S^-1) and its expectation parameters
eta = (m, S + m m^T). For an exponential family, the natural gradient with respect to theta
is the ordinary gradient with respect to eta, so a natural-gradient descent step of size
gamma on a loss ell (the negative ELBO) is

    theta <- theta - gamma d ell / d eta.                                         (NG)

With a Gaussian likelihood and the full data, gamma = 1 lands on the optimal q(v) in one
step; with a log-concave one (softmax, inverse ILR) and gamma < 1 the precision stays
positive definite in expectation. d ell / d eta comes from the gradient that SVI already has,
d ell / d(m, R_unconstrained), pulled back through the map eta -> (m, R_unconstrained) by one
vector-Jacobian product. Back from theta: the precision P = -2 theta_2 is factorised, and
the Cholesky factor of S = P^-1 is read off the factor of the reversed precision J P J
(J the reversal permutation): if J P J = L' L'^T then S = (J L'^-T J)(J L'^-T J)^T, whose
left factor is lower triangular. Only triangular solves are used, no general inverse.

In terms of the expected log-likelihood ELL and the whitened prior N(0, I), (NG) reads
theta <- (1 - gamma) theta + gamma (theta_prior + d ELL / d eta), so the new precision is
(1 - gamma) P + gamma (I - 2 d ELL / d S). It is positive definite whenever the estimate of
d ELL / d S is negative semi-definite, which Price's theorem gives for a log-concave
likelihood on every draw (``ell_estimator="price"`` in ``ppgpc.models.svgp``); the
reparameterisation estimate has either sign. A step that still leaves the precision
indefinite is refused for that factor, which keeps its old value; the number of refusals
is counted in the optimiser state (``NaturalGradientState.refused``).
"""

from __future__ import annotations

from typing import Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax import lax
from numpyro.distributions import constraints
from numpyro.distributions.transforms import biject_to

from ppgpc.gp.linalg import tri_solve

__all__ = ["NaturalGradientState", "natural_gradient_optimizer", "natural_step"]

_TRIL = biject_to(constraints.lower_cholesky)
"""Unconstrained vector (..., M (M + 1) / 2) <-> lower-triangular factor with a positive
diagonal (..., M, M): the transform NumPyro's SVI optimises ``q_scale_tril`` through."""


def _flip(A):
    """J A J: both matrix axes reversed."""
    return A[..., ::-1, ::-1]


def _from_expectation(eta1, eta2):
    """eta = (m, S + m m^T) -> (m, R unconstrained), for one factor."""
    S = eta2 - jnp.outer(eta1, eta1)
    return eta1, _TRIL.inv(jnp.linalg.cholesky(S))


def _factor_step(mean, tril_unc, grad_mean, grad_tril, gamma):
    """The factorisations of (NG) for one factor: mean (M,), tril_unc (M (M + 1) / 2,) and
    the loss gradients with respect to both -> (R, d ell / d eta_1, the precision S^-1, the
    new scale's factor). Every LAPACK call of a step is here (see ``natural_step``)."""
    M = mean.shape[-1]
    R = _TRIL(tril_unc)
    eta2 = R @ R.T + jnp.outer(mean, mean)
    _, pullback = jax.vjp(_from_expectation, mean, eta2)
    d1, d2 = pullback((grad_mean, grad_tril))
    d2 = 0.5 * (d2 + d2.T)
    eye = jnp.eye(M, dtype=mean.dtype)
    R_inv = tri_solve(R, eye)                                  # R^-1
    precision = R_inv.T @ R_inv                                 # S^-1
    new_precision = precision + 2.0 * gamma * d2                # -2 (theta_2 - gamma d2)
    new_precision = 0.5 * (new_precision + new_precision.T)
    L_rev = jnp.linalg.cholesky(_flip(new_precision))           # J P J = L' L'^T
    new_R = _flip(tri_solve(L_rev, eye).T)                     # J L'^-T J, lower
    return R, d1, precision, new_R


def _mean_step(mean, tril_unc, R, d1, precision, new_R, gamma):
    """The rest of (NG) for one factor, given ``_factor_step``'s results: the new (mean,
    tril_unc) and whether the step was refused."""
    theta1 = precision @ mean
    new_theta1 = theta1 - gamma * d1
    new_mean = new_R @ (new_R.T @ new_theta1)                   # S theta_1
    ok = (jnp.all(jnp.isfinite(new_R)) & jnp.all(jnp.isfinite(new_mean))
          & jnp.all(jnp.diagonal(new_R) > 0))
    safe_R = jnp.where(ok, new_R, R)
    return (jnp.where(ok, new_mean, mean), jnp.where(ok, _TRIL.inv(safe_R), tril_unc),
            jnp.logical_not(ok))


def natural_step(mean, tril_unc, grad_mean, grad_tril, gamma):
    """One natural-gradient step (NG) on a batch of Gaussian factors.

    Args:
        mean: (..., M) means m; tril_unc: (..., M (M + 1) / 2) unconstrained scales (NumPyro's
            ``lower_cholesky`` transform); grad_mean, grad_tril: the loss gradients with
            respect to both, same shapes; gamma: step size in (0, 1].

    Returns:
        new mean, new unconstrained scale (same shapes) and the number of factors whose step
        was refused because the new precision was not positive definite.
    """
    batch = mean.shape[:-1]
    flat = tuple(x.reshape((-1,) + x.shape[len(batch):])
                 for x in (mean, tril_unc, grad_mean, grad_tril))
    # The factorisations run one factor at a time (lax.map), not under jax.vmap: a batched
    # Cholesky or triangular solve in jaxlib 0.10 splits its batch over XLA's intra-op thread
    # pool and blocks the pool thread that called it until the pieces finish. When as many
    # such calls run at once as the pool has threads (two on a 2-core machine; the vjp's
    # Cholesky and the solve R^-1 are independent), no thread is left to run the pieces and
    # the program never completes (docs/records/speed.md). An unbatched call runs inline.
    # The matrix-vector products stay under vmap, which keeps the steps' rounding as it was.
    means, trils = flat[0], flat[1]
    R, d1, precision, new_R = lax.map(lambda factor: _factor_step(*factor, gamma), flat)
    new_mean, new_tril, refused = jax.vmap(_mean_step, in_axes=(0,) * 6 + (None,))(
        means, trils, R, d1, precision, new_R, gamma)
    return (new_mean.reshape(mean.shape), new_tril.reshape(tril_unc.shape),
            jnp.sum(refused))


class NaturalGradientState(NamedTuple):
    """Optimiser state: step count, the ordinary optimiser's state and the refusals."""

    count: jax.Array
    inner: optax.OptState
    refused: jax.Array


def natural_gradient_optimizer(gaussian_sites: Mapping[str, str],
                               step_size: Callable[[jax.Array], jax.Array] | float,
                               others: optax.GradientTransformation
                               ) -> optax.GradientTransformation:
    """An optax transformation over NumPyro's parameter dictionary: natural-gradient steps
    (NG) on the Gaussian factors, ``others`` on every other site.

    Args:
        gaussian_sites: mean site name -> scale site name (``lower_cholesky``), e.g.
            ``{"q_mean": "q_scale_tril"}``.
        step_size: gamma, a float or an optax schedule (step -> gamma).
        others: the optimiser of the remaining sites (e.g. Adam on hyperparameters).

    The parameters are the unconstrained values SVI optimises; the updates returned move the
    Gaussian sites to their new values exactly.
    """
    gaussian_sites = dict(gaussian_sites)
    natural_names = set(gaussian_sites) | set(gaussian_sites.values())
    schedule = step_size if callable(step_size) else (lambda count: step_size)

    def split(tree):
        return {k: v for k, v in tree.items() if k not in natural_names}

    def init(params):
        missing = natural_names - set(params)
        if missing:
            raise ValueError(f"natural-gradient sites {sorted(missing)} are not parameters of "
                             f"this model; it has {sorted(params)}")
        zero = jnp.zeros((), dtype=int)  # the default integer type (int64 under x64)
        return NaturalGradientState(count=zero, inner=others.init(split(params)),
                                    refused=zero)

    def update(grads, state, params=None, **extra):
        if params is None:
            raise ValueError("natural-gradient steps need the current parameters")
        inner_updates, inner_state = optax.with_extra_args_support(others).update(
            split(grads), state.inner, split(params), **extra)
        updates = dict(inner_updates)
        gamma = schedule(state.count)
        refused = state.refused
        for mean_name, tril_name in gaussian_sites.items():
            new_mean, new_tril, n_refused = natural_step(
                params[mean_name], params[tril_name], grads[mean_name], grads[tril_name],
                gamma)
            updates[mean_name] = new_mean - params[mean_name]
            updates[tril_name] = new_tril - params[tril_name]
            refused = refused + n_refused.astype(refused.dtype)
        return updates, NaturalGradientState(state.count + 1, inner_state, refused)

    return optax.GradientTransformationExtraArgs(init, update)
