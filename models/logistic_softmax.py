"""Logistic-softmax GP classifier with its conjugate augmentation (MATH.md section 3).

Model, for N points and C classes (one latent GP per class, one shared kernel):

    f^c ~ GP(0, k_theta),   c = 1..C
    p(y_i = k | f_i) = sigma(f_i^k) / sum_c sigma(f_i^c)          (sigma the logistic)

Augmented model (appendix A.1; exact, every conditional conjugate):

    lambda_i ~ flat on (0, inf),   n_ic | lambda_i ~ Poisson(lambda_i),
    omega_ic | n_ic ~ PG(y'_ic + n_ic, 0),
    p(y_i | f_i, n_i, omega_i)
        = prod_c 2^-(y'_ic + n_ic) exp((y'_ic - n_ic) f_ic / 2 - f_ic^2 omega_ic / 2)

with y' the one-hot labels. Integrating (lambda, n, omega) out gives back the likelihood above.

NumPyro sites (stable names, shared with the other classifiers):

* ``kernel_variance`` (), ``kernel_lengthscale`` (D,) or (): kernel hyperparameters;
* ``f_white`` (C, N) and the deterministic ``f`` (N, C): the whitened latent,
  f^c = chol(K) v^c;
* ``y`` (N,): the observed labels, categorical with log-probabilities ``log_link(f)``, one
  per point inside the plate ``data`` (``latent_model``), or
* ``lambda`` (N,), ``n`` (N, C), ``omega`` (N, C) and the factor ``y_augmented``
  (``augmented_model``, for documentation and ``Predictive``; lambda's flat prior is improper).

Inference (all through ``ppgpc.infer.fit``):

* ``"gibbs"``: the blocked Gibbs sampler of MATH.md section 3 (``gibbs_kernel``), an
  init/step pair over ``GibbsState`` plugged into NumPyro's ``MCMC``; hyperparameters fixed
  or sampled by an HMC step per sweep (HMC-within-Gibbs, ``hyper_potential``);
* ``"cavi"``: coordinate-ascent VI of appendix A.2 (``cavi``), full (M = N) or sparse, with
  type-II ML of the kernel hyperparameters (and inducing inputs) on the ELBO; with
  ``batch_size``/``class_batch_size`` the stochastic version of appendix A.3
  (``stochastic_step``: minibatches of points and classes, natural-gradient steps on q(v)
  with a Robbins-Monro step size). The full version is held as joint draws of f at the
  training inputs (``sample_q_f``); a sparse one as draws of the whitened inducing values
  (``sample_q_v``), which predicts with q's own predictive p(f* | u) q(u)
  (``inducing_latent``), so nothing N x N is formed and its cost is O(N M^2);
* ``"nuts"`` (``form="latent"``): NUTS on ``latent_model`` (hyperparameters given or sampled).

Note on (12): the optimal Poisson rate of q(n_ic) is
gamma_ic = exp(psi(alpha_i)) / beta_i * exp(-m_ic / 2) / (2 cosh(fbar_ic / 2)), i.e. the
expected value of lambda_i sigma(-f_ic) with sigma(-f) = e^{-f/2} / (2 cosh(f/2)); the factor
1/2 comes from the 2^-n_ic of the Polya-Gamma identity (the appendix's (12) omits it; without
it the ELBO below is not maximised by the update and decreases). We compute it in log space
with an overflow-free log cosh, so no variance-free approximation is needed.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax import lax
from jax.scipy.special import digamma, gammaln, xlogy

from ppgpc import gp, linalg
from ppgpc.infer.spec import ModelSpec
from ppgpc.kernels import gram, gram_diag, kernel_log_prior, sample_kernel_params
from ppgpc.progress import bar as progress_bar
from ppgpc.validation import check_count
from ppgpc.polyagamma import PolyaGamma, polyagamma_mean, sample_polyagamma

__all__ = [
    "LSMData",
    "GibbsState",
    "GibbsInfo",
    "HyperGibbsInfo",
    "CAVIState",
    "CAVIResult",
    "prepare",
    "num_latent",
    "log_link",
    "initial_hypers",
    "latent_model",
    "augmented_model",
    "latent_conditional",
    "gibbs_kernel",
    "f_block",
    "hyper_potential",
    "hyper_sampler",
    "cavi",
    "sample_q_v",
    "sample_q_f",
    "inducing_latent",
    "elbo",
    "SVIState",
    "minibatch",
    "stochastic_step",
    "fit_hypers",
    "SPEC",
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


def prepare(X, y, num_classes: int) -> LSMData:
    """One-hot labels; no model options."""
    if num_classes < 2:
        raise ValueError(f"logistic-softmax needs at least 2 classes, got {num_classes}")
    y = jnp.asarray(y)
    return LSMData(
        X=jnp.asarray(X, dtype=jnp.float64), y=y, num_classes=int(num_classes),
        onehot=jax.nn.one_hot(y, num_classes, dtype=jnp.float64),
    )


def num_latent(num_classes: int) -> int:
    """L = C latent GPs."""
    return num_classes


def log_link(f: jax.Array) -> jax.Array:
    """log p(y = k | f) = log sigma(f_k) - log sum_c sigma(f_c), (..., C) -> (..., C).

    log sigma(f) = -softplus(-f) and a log-sum-exp over classes: finite for any finite f.
    """
    log_sig = -jax.nn.softplus(-f)
    return log_sig - jax.nn.logsumexp(log_sig, axis=-1, keepdims=True)


def _kernel_params(hypers: dict) -> dict:
    return {"variance": hypers["kernel_variance"], "lengthscale": hypers["kernel_lengthscale"]}


def initial_hypers(data: LSMData, kernel) -> dict:
    """Kernel variance 4 (logits of order +-2), lengthscales at sqrt(D)."""
    start = kernel.initial_params(data.X.shape[1], variance=4.0)
    return {"kernel_" + k: v for k, v in start.items()}


def _whitened_latent(data: LSMData, kernel, fixed_hypers):
    N, C = data.onehot.shape
    params = sample_kernel_params(kernel, data.X.shape[1], fixed=fixed_hypers)
    chol_K = linalg.cholesky(gram(kernel, params, data.X)).factor
    with numpyro.plate("latent", C, dim=-1):
        v = numpyro.sample("f_white", dist.Normal(jnp.zeros(N), 1.0).to_event(1))
    return numpyro.deterministic("f", chol_K @ v.T)


def latent_model(data: LSMData, kernel, fixed_hypers: dict | None = None) -> None:
    """Plain (non-augmented) model: f^c = chol(K) v^c, y_i ~ Categorical(log_link(f_i)).

    Sites: ``kernel_*`` (unless fixed), ``f_white`` (C, N), deterministic ``f`` (N, C),
    ``y`` observed (N,), one label per point inside ``numpyro.plate("data", N)`` (one
    log-likelihood term per point for ``az.from_numpyro``; dims from
    ``ppgpc.infer.arviz_dims``).
    """
    f = _whitened_latent(data, kernel, fixed_hypers)
    with numpyro.plate("data", data.y.shape[0], dim=-1):
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
    mean, var = gp.conditional_from_latent(kernel, _kernel_params(hypers), data.X, f, Xs)
    return mean, jnp.broadcast_to(var[:, None], mean.shape)


# ------------------------------------------------------------------------------------------
# Blocked Gibbs sampler (MATH.md section 3)
# ------------------------------------------------------------------------------------------


class GibbsState(NamedTuple):
    """State of the blocked Gibbs sampler."""

    f: jax.Array
    """(N, C) latent values at the training inputs."""
    lam: jax.Array
    """(N,) lambda_i > 0."""
    n: jax.Array
    """(N, C) Poisson counts n_ic (stored as floats)."""
    omega: jax.Array
    """(N, C) Polya-Gamma variables omega_ic >= 0."""
    hypers: dict
    """Kernel hyperparameters of the current sweep by site name when they are sampled
    (HMC-within-Gibbs); ``{}`` when they are fixed."""
    hmc: Any
    """NumPyro ``HMCState`` of the hyperparameter step on log-hyperparameters (step size and
    mass matrix adapted during warm-up); ``None`` when the hyperparameters are fixed."""


class GibbsInfo(NamedTuple):
    """What one sweep reports."""

    mean_count: jax.Array
    """Mean of n_ic over points and classes (the PG sampler's cost grows with y' + n)."""


class HyperGibbsInfo(NamedTuple):
    """What one sweep reports when the hyperparameters are sampled."""

    mean_count: jax.Array
    """As in ``GibbsInfo``."""
    hyper_accept_prob: jax.Array
    """Acceptance statistic of the HMC/NUTS step on the hyperparameters."""
    hyper_num_steps: jax.Array
    """Leapfrog steps of that step."""
    hyper_diverging: jax.Array
    """Whether its trajectory diverged."""


def f_block(key, K, chol_K, omega, kappa):
    """Draw f^c ~ N(Sigma kappa^c, Sigma), Sigma = (K^-1 + diag(omega^c))^-1, for every c.

    Never inverts K: with W = diag(omega^c) and B = I + W^1/2 K W^1/2 (eigenvalues >= 1,
    Rasmussen & Williams Alg. 3.2), Matheron's rule with pseudo-observations gives

        a = K kappa + chol(K) e1,          e1 ~ N(0, I)     (a ~ N(K kappa, K))
        f = a - K W^1/2 B^-1 (W^1/2 a + e2),  e2 ~ N(0, I),

    which has mean K kappa - K W^1/2 B^-1 W^1/2 K kappa = Sigma kappa and covariance
    K - K W^1/2 B^-1 W^1/2 K = Sigma; omega_ic = 0 is allowed (no W^-1 appears).

    Args:
        key: PRNG key; K, chol_K: (N, N) Gram matrix and its Cholesky factor;
        omega, kappa: (N, C).

    Returns:
        (N, C) draws.
    """
    k_prior, k_noise = jax.random.split(key)
    N, C = omega.shape
    a = K @ kappa + chol_K @ jax.random.normal(k_prior, (N, C))   # (N, C)
    sw = jnp.sqrt(omega)                                           # (N, C)
    r = sw * a + jax.random.normal(k_noise, (N, C))                # W^1/2 a + e2

    def solve_one(sw_c, r_c):                                      # (N,), (N,) -> (N,)
        B = jnp.eye(N) + sw_c[:, None] * K * sw_c[None, :]
        L_B = jnp.linalg.cholesky(B)
        return sw_c * linalg.cho_solve(L_B, r_c)                   # W^1/2 B^-1 r

    t = jax.vmap(solve_one, in_axes=(1, 1), out_axes=1)(sw, r)    # (N, C)
    return a - K @ t


def hyper_potential(kernel, X, f, log_hypers: dict) -> jax.Array:
    """Potential energy (negative log density, up to a constant) of the log-hyperparameters
    given the latent, the target of the HMC-within-Gibbs step (MATH.md section 3):

        -log p(log theta | f) = -sum_c log N(f^c | 0, K_theta) - log p(theta) - sum log theta
                              = 1/2 sum_c |L^-1 f^c|^2 + C/2 log|K_theta|
                                - log p(theta) - sum log theta + const,

    with L = chol(K_theta) and p(theta) the kernel's priors (the same as ``latent_model``'s);
    the last term is the Jacobian of theta = exp(log theta). Given f, the labels and the
    augmentation variables carry no information about theta, so this is the full conditional.

    Args:
        kernel: the kernel; X: (N, D) inputs; f: (N, C) latent values;
        log_hypers: log kernel hyperparameters by site name.

    Returns:
        Scalar potential.
    """
    hypers = jax.tree.map(jnp.exp, log_hypers)
    L = linalg.cholesky(gram(kernel, _kernel_params(hypers), X)).factor
    alpha = linalg.tri_solve(L, f)                                  # (N, C)
    C = f.shape[1]
    log_lik = -0.5 * jnp.sum(alpha**2) - 0.5 * C * linalg.logdet(L)
    log_jacobian = sum(jnp.sum(v) for v in log_hypers.values())
    return -(log_lik + kernel_log_prior(kernel, X.shape[1], hypers) + log_jacobian)


def hyper_sampler(data: LSMData, kernel, *, num_warmup: int, algo: str = "HMC",
                  num_steps: int = 8, max_tree_depth: int = 6, target_accept: float = 0.8):
    """HMC or NUTS on ``hyper_potential`` as a pure pair, through NumPyro's functional ``hmc``.

    The target changes with f at every sweep, so each step first refreshes the cached
    potential and gradient at the current point for the current f (as NumPyro's
    ``HMCGibbs`` does) and then takes one transition; step size and diagonal mass matrix
    adapt during the first ``num_warmup`` steps. ``algo="HMC"`` (default) takes
    ``num_steps`` leapfrog steps and compiles in a fraction of NUTS's time inside the Gibbs
    sweep (measured on a loaded 2-core machine: about 30 s more than fixed hyperparameters,
    against 120 s for NUTS); ``algo="NUTS"`` builds trees up to ``max_tree_depth``.

    Mixing: this is the centred conditional theta | f, whose lengthscale moves slowly when
    f is well determined (with the likelihood removed, N = 6, C = 2, its ESS was about 0.5%
    of the draws, the variance's 5%; see the tests). Run long chains, or fix the
    hyperparameters at their CAVI estimate, when only f matters.

    Returns:
        ``init(key, hypers, f) -> HMCState`` (call it before tracing ``step``: it configures
        the adaptation schedule of the pair) and ``step(key, hmc_state, f) -> HMCState``,
        whose ``z`` holds the log-hyperparameters by site name.
    """
    from numpyro.infer.hmc import hmc

    X = data.X

    def potential_gen(f):
        return lambda z: hyper_potential(kernel, X, f, z)

    if algo not in ("HMC", "NUTS"):
        raise ValueError(f"hyperparameter step algo must be 'HMC' or 'NUTS', got {algo!r}")
    init_kernel, sample_kernel = hmc(potential_fn_gen=potential_gen, algo=algo)
    # fixed leapfrog count with an adapted step size (a fixed trajectory length would fix
    # the step size instead)
    length = ({"num_steps": int(num_steps), "trajectory_length": None} if algo == "HMC"
              else {"max_tree_depth": int(max_tree_depth)})

    def init(key, hypers: dict, f):
        z = {k: jnp.log(jnp.asarray(v, dtype=jnp.float64)) for k, v in hypers.items()}
        return init_kernel(z, int(num_warmup), target_accept_prob=float(target_accept),
                           model_args=(f,), rng_key=key, **length)

    def step(key, hmc_state, f):
        pe, grad = jax.value_and_grad(lambda z: hyper_potential(kernel, X, f, z))(hmc_state.z)
        hmc_state = hmc_state._replace(potential_energy=pe, z_grad=grad, rng_key=key)
        return sample_kernel(hmc_state, model_args=(f,))

    return init, step


def gibbs_kernel(data: LSMData, kernel, hypers: dict, *, collapse_lambda: bool = False,
                 sample_hypers: bool = False, num_warmup: int = 0, hyper_algo: str = "HMC",
                 hyper_num_steps: int = 8, max_tree_depth: int = 6,
                 target_accept: float = 0.8):
    """The blocked Gibbs sampler as a pure ``(init, step)`` pair (BlackJAX style).

    One sweep draws, each from its full conditional (MATH.md section 3):

    0. with ``sample_hypers``: the kernel hyperparameters theta | f by one HMC (or NUTS)
       step on ``hyper_potential`` (HMC-within-Gibbs), then K_theta and its Cholesky factor;
    1. lambda_i | n_i ~ Gamma(1 + sum_c n_ic, rate C), or with ``collapse_lambda`` the pair
       (lambda_i, n_i) | f_i jointly: lambda_i | f_i ~ Gamma(1, rate sum_c sigma(f_ic))
       (lambda integrated against the Poisson counts), which makes n_i | f_i negative
       multinomial (a Gamma-Poisson mixture);
    2. n_ic | lambda_i, f_ic ~ Poisson(lambda_i sigma(-f_ic));
    3. omega_ic | n_ic, f_ic ~ PG(y'_ic + n_ic, |f_ic|) (PG(0, z) = 0);
    4. f^c | omega^c, n^c, theta by ``f_block`` with kappa^c = (y'^c - n^c) / 2.

    With fixed hyperparameters the Gram matrix and its Cholesky factor are computed once here.

    Args:
        data, kernel: prepared data and kernel.
        hypers: kernel hyperparameters by site name (the starting point when sampled).
        collapse_lambda: the collapsed (lambda, n) block of step 1.
        sample_hypers: HMC-within-Gibbs on the hyperparameters (step 0).
        num_warmup, hyper_algo, hyper_num_steps, max_tree_depth, target_accept: of that
            step (``hyper_sampler``; ``num_warmup`` sweeps adapt its step size and mass
            matrix: pass the MCMC warm-up length).

    Returns:
        ``init(key) -> GibbsState`` (f from the prior, n = 0) and
        ``step(key, state) -> (GibbsState, GibbsInfo or HyperGibbsInfo)``.
    """
    Y = data.onehot
    N, C = Y.shape

    def factors(h):
        K = gram(kernel, _kernel_params(h), data.X)
        return K, linalg.cholesky(K).factor

    K0, chol_K0 = factors(hypers)
    if sample_hypers:
        hyper_init, hyper_step = hyper_sampler(
            data, kernel, num_warmup=num_warmup, algo=hyper_algo, num_steps=hyper_num_steps,
            max_tree_depth=max_tree_depth, target_accept=target_accept)

    def init(key) -> GibbsState:
        k_f, k_hmc = jax.random.split(key)
        f = chol_K0 @ jax.random.normal(k_f, (N, C))
        if sample_hypers:
            start = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in hypers.items()}
            extra = (start, hyper_init(k_hmc, start, f))
        else:
            extra = ({}, None)
        return GibbsState(f, jnp.ones(N), jnp.zeros((N, C)), jnp.zeros((N, C)), *extra)

    def step(key, state: GibbsState):
        k_hyp, k_lam, k_n, k_omega, k_f = jax.random.split(key, 5)
        f = state.f
        # 0. hyperparameters
        if sample_hypers:
            hmc_state = hyper_step(k_hyp, state.hmc, f)
            h = jax.tree.map(jnp.exp, hmc_state.z)
            K, chol_K = factors(h)
        else:
            hmc_state, h, (K, chol_K) = None, {}, (K0, chol_K0)
        # 1. lambda
        if collapse_lambda:
            rate = jnp.sum(jax.nn.sigmoid(f), axis=1)
            lam = jax.random.exponential(k_lam, (N,)) / rate
        else:
            lam = jax.random.gamma(k_lam, 1.0 + jnp.sum(state.n, axis=1)) / C
        # 2. n (omega integrated out)
        n = jax.random.poisson(k_n, lam[:, None] * jax.nn.sigmoid(-f), (N, C)).astype(f.dtype)
        # 3. omega
        omega = sample_polyagamma(k_omega, Y + n, f)
        # 4. f
        f = f_block(k_f, K, chol_K, omega, 0.5 * (Y - n))
        new = GibbsState(f, lam, n, omega, h, hmc_state)
        if sample_hypers:
            return new, HyperGibbsInfo(jnp.mean(n), hmc_state.accept_prob,
                                       hmc_state.num_steps, hmc_state.diverging)
        return new, GibbsInfo(jnp.mean(n))

    return init, step


# ------------------------------------------------------------------------------------------
# CAVI (appendix A.2), full (inducing inputs = training inputs) or sparse
# ------------------------------------------------------------------------------------------


class CAVIState(NamedTuple):
    """Variational parameters; q(u^c) is whitened: u^c = chol(K_mm) v^c, q(v^c) = N(m^c, S^c)."""

    m: jax.Array
    """(M, C) means of q(v)."""
    S: jax.Array
    """(C, M, M) covariances of q(v)."""
    alpha: jax.Array
    """(N,) shapes of q(lambda_i) = Gamma(alpha_i, rate C)."""
    gamma: jax.Array
    """(N, C) rates of q(n_ic) = Poisson(gamma_ic)."""
    c: jax.Array
    """(N, C) tilts of q(omega_ic | n_ic) = PG(y'_ic + n_ic, c_ic)."""


class CAVIResult(NamedTuple):
    """Outcome of ``cavi``."""

    hypers: dict
    """Kernel hyperparameters by site name (learnt or given)."""
    inducing: jax.Array
    """(M, D) inducing inputs Z."""
    state: CAVIState
    """Final variational parameters."""
    elbo: np.ndarray
    """ELBO after every outer iteration (non-decreasing with fixed hyperparameters)."""
    converged: bool
    """The relative ELBO change fell below ``tol``."""
    sparse: bool
    """Inducing inputs differ from the training inputs (M < N)."""


class _Projection(NamedTuple):
    A: jax.Array        # (M, N) chol(K_mm)^-1 K_mn
    ktilde: jax.Array   # (N,) K_ii - A_i^T A_i >= 0
    chol_mm: jax.Array  # (M, M)


def _projection(kernel, hypers, X, Z) -> _Projection:
    params = _kernel_params(hypers)
    chol_mm = linalg.cholesky(gram(kernel, params, Z)).factor
    A = linalg.tri_solve(chol_mm, gram(kernel, params, Z, X))
    ktilde = jnp.maximum(gram_diag(kernel, params, X) - jnp.sum(A * A, axis=0), 0.0)
    return _Projection(A, ktilde, chol_mm)


def _q_f(proj: _Projection, m, S):
    """Marginals of q(f_ic): mean (N, C) = A^T m, variance (N, C) = ktilde + diag(A^T S A)."""
    mean = proj.A.T @ m
    var = proj.ktilde[:, None] + jnp.einsum("mi,cmk,ki->ic", proj.A, S, proj.A)
    return mean, var


def _log_2cosh_half(c):
    """log(2 cosh(c / 2)), overflow-free."""
    u = 0.5 * jnp.abs(c)
    return u + jnp.log1p(jnp.exp(-2.0 * u))


def elbo(Y, proj: _Projection, state: CAVIState) -> jax.Array:
    """The evidence lower bound of the augmented model for q = q(v) q(lambda) q(n, omega).

    With m_ic, s_ic the mean and variance of q(f_ic), E f^2 = s + m^2, beta_i = C and
    theta_ic = E[omega_ic] = (y'_ic + gamma_ic) tanh(c_ic / 2) / (2 c_ic):

        sum_ic [ -(y' + gamma) log 2cosh(c/2) + (y' - gamma) m / 2 - theta (E f^2 - c^2) / 2
                 + gamma (psi(alpha_i) - log C) - gamma log gamma + gamma ]
        + sum_i [ -alpha_i + H(Gamma(alpha_i, C)) ]  -  sum_c KL(N(m^c, S^c) || N(0, I))

    (the prior of lambda is flat; PG(b, 0) base densities and log n! cancel between p and q).
    """
    N, C = Y.shape
    m_f, s_f = _q_f(proj, state.m, state.S)
    lik = _lik_terms(Y, m_f, s_f, state.alpha, state.gamma, state.c, C)
    a = state.alpha
    entropy_lam = a - math.log(C) + gammaln(a) + (1.0 - a) * digamma(a)
    chol_S = jnp.linalg.cholesky(state.S)
    M = state.m.shape[0]
    kl = 0.5 * (jnp.trace(state.S, axis1=1, axis2=2) + jnp.sum(state.m**2, axis=0) - M
                - linalg.logdet(chol_S))
    return jnp.sum(lik) + jnp.sum(entropy_lam - a) - jnp.sum(kl)


def _lik_terms(Y, m_f, s_f, alpha, gamma, c, num_classes: int):
    """The (n, k) per-(point, class) terms of ``elbo``'s first sum, for any subset of points
    (rows) and classes (columns); ``num_classes`` is the full C (beta_i = C)."""
    b = Y + gamma
    theta = polyagamma_mean(b, c)
    return (-b * _log_2cosh_half(c) + 0.5 * (Y - gamma) * m_f
            - 0.5 * theta * (s_f + m_f**2 - c**2)
            + gamma * (digamma(alpha) - math.log(num_classes))[:, None]
            - xlogy(gamma, gamma) + gamma)


def _local_updates(Y, m_f, s_f, alpha, num_classes: int, inner_iters: int = 5):
    """The local CAVI updates of the points and classes given (the columns of Y, m_f, s_f;
    (n, k)), from the current alpha (n,):

        c = sqrt(s + m^2)                                                      (14)
        gamma_ic = exp(psi(alpha_i)) / C * exp(-m_ic / 2) / (2 cosh(c_ic / 2))  (12) x 1/2
        alpha_i = 1 + C / k sum_{c in K} gamma_ic                    (13), (17) if k < C

    with (12) and (13)/(17) alternated ``inner_iters`` times (appendix A.2). The factor 1/2
    of (12), missing in the appendix and MATH.md, is derived in the module docstring; the
    ratio is computed in log space with an overflow-free log cosh.

    Returns:
        c (n, k), alpha (n,), gamma (n, k), theta = E[omega] (n, k), kappa = (y' - gamma)/2.
    """
    C, k = num_classes, Y.shape[1]
    c = jnp.sqrt(s_f + m_f**2)                                        # (14)
    log_sig_part = -0.5 * m_f - _log_2cosh_half(c)                    # log e^{-m/2} / 2cosh(c/2)

    def inner(_, ag):
        alpha, _ = ag
        gamma = jnp.exp(digamma(alpha)[:, None] - math.log(C) + log_sig_part)   # (12)
        return 1.0 + (C / k) * jnp.sum(gamma, axis=1), gamma                    # (13), (17)

    gamma0 = jnp.zeros_like(m_f)
    alpha, gamma = lax.fori_loop(0, inner_iters, inner, (alpha, gamma0))
    return c, alpha, gamma, polyagamma_mean(Y + gamma, c), 0.5 * (Y - gamma)


def _natural_targets(A, theta, kappa, scale):
    """(15), (16) in whitened natural form for each class column: the precision
    I + scale A diag(theta^c) A^T (k, M, M) and scale A kappa^c (M, k); ``scale`` = N / |B|
    (1 for the full data)."""
    M = A.shape[0]

    def one(theta_c, kappa_c):
        return jnp.eye(M) + scale * ((A * theta_c[None, :]) @ A.T), scale * (A @ kappa_c)

    return jax.vmap(one, in_axes=(1, 1), out_axes=(0, 1))(theta, kappa)


def _moments_from_natural(prec, eta1):
    """S = prec^-1 (two triangular solves with its Cholesky factor), m = S eta1, per class:
    prec (k, M, M), eta1 (M, k) -> m (M, k), S (k, M, M)."""
    M = prec.shape[-1]

    def one(P, e):
        S = linalg.cho_solve(jnp.linalg.cholesky(P), jnp.eye(M))
        return S @ e, 0.5 * (S + S.T)

    return jax.vmap(one, in_axes=(0, 1), out_axes=(1, 0))(prec, eta1)


def _cavi_sweep(Y, proj: _Projection, state: CAVIState, inner_iters: int = 5) -> CAVIState:
    """One round of coordinate updates, each maximising the ELBO in its block:
    c = fbar (14), then (gamma, alpha) alternated ``inner_iters`` times ((12), (13)), then
    q(v) ((15), (16) in whitened form: S = (I + A diag(theta) A^T)^-1, m = S A kappa)."""
    N, C = Y.shape
    m_f, s_f = _q_f(proj, state.m, state.S)
    c, alpha, gamma, theta, kappa = _local_updates(Y, m_f, s_f, state.alpha, C, inner_iters)
    m, S = _moments_from_natural(*_natural_targets(proj.A, theta, kappa, 1.0))
    return CAVIState(m=m, S=S, alpha=alpha, gamma=gamma, c=c)


def _init_state(N, C, M) -> CAVIState:
    return CAVIState(m=jnp.zeros((M, C)), S=jnp.broadcast_to(jnp.eye(M), (C, M, M)),
                     alpha=jnp.full((N,), 1.0 + C / 2.0), gamma=jnp.full((N, C), 0.5),
                     c=jnp.ones((N, C)))


@functools.partial(jax.jit, static_argnames=("kernel", "learn_hypers", "learn_inducing",
                                             "include_prior", "num_steps"))
def _outer_iteration(Y, X, kernel, log_hypers, Z, state, opt_state, learning_rate, *,
                     learn_hypers, learn_inducing, include_prior, num_steps):
    """One CAVI sweep, then ``num_steps`` Adam steps on (log hypers, Z) of the ELBO with the
    variational parameters held fixed; returns the new values and the ELBO."""
    hypers = jax.tree.map(jnp.exp, log_hypers)
    state = _cavi_sweep(Y, _projection(kernel, hypers, X, Z), state)
    if learn_hypers or learn_inducing:
        D = X.shape[1]

        def objective(params):
            lh, z = params
            h = jax.tree.map(jnp.exp, lh)
            value = elbo(Y, _projection(kernel, h, X, z), state)
            if include_prior:
                value = value + kernel_log_prior(kernel, D, h)
            return -value

        (log_hypers, Z), opt_state = _adam_steps(
            objective, (log_hypers, Z), opt_state, learning_rate, num_steps,
            learn_hypers=learn_hypers, learn_inducing=learn_inducing)
    hypers = jax.tree.map(jnp.exp, log_hypers)
    value = elbo(Y, _projection(kernel, hypers, X, Z), state)
    return log_hypers, Z, state, opt_state, value


CAVI_WINDOW = 50
"""Full CAVI: outer iterations per device call (``_cavi_window``); the host checks nothing
inside a window, and the ELBO trace comes back once per window."""


@functools.partial(jax.jit, static_argnames=("kernel", "learn_hypers", "learn_inducing",
                                             "include_prior", "num_steps"))
def _cavi_window(Y, X, kernel, carry, learning_rate, limit, tol, *, learn_hypers,
                 learn_inducing, include_prior, num_steps):
    """Up to ``limit`` (<= ``CAVI_WINDOW``) outer iterations (``_outer_iteration``) in one
    ``lax.while_loop``, stopping early once the ELBO's relative change falls below ``tol``.

    Args:
        carry: (log hypers, Z, state, Adam state, last ELBO or NaN before the first).

    Returns:
        (carry, ELBO per iteration (CAVI_WINDOW,), iterations done, converged).
    """
    def cond(loop):
        _, _, i, converged = loop
        return (i < limit) & ~converged

    def body(loop):
        (log_hypers, Z, state, opt_state, last), values, i, _ = loop
        log_hypers, Z, state, opt_state, value = _outer_iteration.__wrapped__(
            Y, X, kernel, log_hypers, Z, state, opt_state, learning_rate,
            learn_hypers=learn_hypers, learn_inducing=learn_inducing,
            include_prior=include_prior, num_steps=num_steps)
        converged = jnp.abs(value - last) < tol * jnp.abs(value)  # False while last is NaN
        return ((log_hypers, Z, state, opt_state, value), values.at[i].set(value), i + 1,
                converged)

    values = jnp.full((CAVI_WINDOW,), jnp.nan)
    carry, values, done, converged = lax.while_loop(
        cond, body, (carry, values, jnp.asarray(0), jnp.asarray(False)))
    return carry, values, done, converged


def _adam_steps(objective, params, opt_state, learning_rate, num_steps, *, learn_hypers,
                learn_inducing):
    """``num_steps`` Adam steps minimising ``objective((log hypers, Z))``; the gradient of a
    block that is not learnt is zeroed."""
    grad_fn = jax.grad(objective)

    def adam(_, carry):
        params, (mu, nu, t) = carry
        g = grad_fn(params)
        if not learn_inducing:
            g = (g[0], jnp.zeros_like(g[1]))
        if not learn_hypers:
            g = (jax.tree.map(jnp.zeros_like, g[0]), g[1])
        t = t + 1
        mu = jax.tree.map(lambda a, b: 0.9 * a + 0.1 * b, mu, g)
        nu = jax.tree.map(lambda a, b: 0.999 * a + 0.001 * b * b, nu, g)
        params = jax.tree.map(
            lambda p, a, b: p - learning_rate * (a / (1 - 0.9**t))
            / (jnp.sqrt(b / (1 - 0.999**t)) + 1e-8), params, mu, nu)
        return params, (mu, nu, t)

    return lax.fori_loop(0, num_steps, adam, (params, opt_state))


# ------------------------------------------------------------------------------------------
# Stochastic CAVI: data minibatches and class subsampling (appendix A.3, Algorithm 2)
# ------------------------------------------------------------------------------------------


class SVIState(NamedTuple):
    """Stochastic CAVI state: q(v^c) in natural form (the Robbins-Monro averages live there),
    plus the local parameters of every point (updated when the point is visited)."""

    prec: jax.Array
    """(C, M, M) precisions S_c^-1 of q(v^c)."""
    eta1: jax.Array
    """(M, C) natural means S_c^-1 m^c."""
    alpha: jax.Array
    """(N,) shapes of q(lambda_i)."""
    gamma: jax.Array
    """(N, C) Poisson rates of q(n_ic)."""
    c: jax.Array
    """(N, C) Polya-Gamma tilts."""


def minibatch(key, num_points: int, num_classes: int, batch_size: int,
              class_batch_size: int):
    """Indices (B (|B|,), K (|K|,)) drawn uniformly without replacement; the full range, in
    order, when the size is the whole set."""
    k_b, k_k = jax.random.split(key)
    B = (jnp.arange(num_points) if batch_size >= num_points
         else jax.random.choice(k_b, num_points, (batch_size,), replace=False))
    K = (jnp.arange(num_classes) if class_batch_size >= num_classes
         else jax.random.choice(k_k, num_classes, (class_batch_size,), replace=False))
    return B, K


def stochastic_step(Y, proj_B: _Projection, state: SVIState, B, K, rho) -> SVIState:
    """One iteration of Algorithm 2 (appendix A.3) on the points B and classes K.

    1. q(f_ic) for i in B, c in K from the current q(v^c);
    2. local updates of those points and classes (``_local_updates``: (14), (12), and (17),
       alpha_i = 1 + C/|K| sum_{c in K} gamma_ic);
    3. natural-gradient step on q(v^c), c in K: with scale N/|B|,
           prec_c <- (1 - rho) prec_c + rho (I + N/|B| A_B diag(theta^c) A_B^T),
           eta1_c <- (1 - rho) eta1_c + rho N/|B| A_B kappa^c,
       the whitened (15), (16) from the minibatch (for an exponential family, the natural
       gradient of the ELBO in the natural parameters is target - current).

    With B and K the full sets and rho = 1 this is exactly one full CAVI sweep.

    Args:
        Y: (N, C) one-hot labels; proj_B: the projection at the inputs X[B];
        B: (|B|,) point indices; K: (|K|,) class indices; rho: step size in (0, 1].
    """
    N, C = Y.shape
    m_K, S_K = _moments_from_natural(state.prec[K], state.eta1[:, K])
    m_f, s_f = _q_f(proj_B, m_K, S_K)                                   # (|B|, |K|)
    Y_BK = Y[B][:, K]
    c, alpha, gamma, theta, kappa = _local_updates(Y_BK, m_f, s_f, state.alpha[B], C)
    prec_hat, eta_hat = _natural_targets(proj_B.A, theta, kappa, N / B.shape[0])
    prec = state.prec.at[K].set((1.0 - rho) * state.prec[K] + rho * prec_hat)
    eta1 = state.eta1.at[:, K].set((1.0 - rho) * state.eta1[:, K] + rho * eta_hat)
    rows, cols = B[:, None], K[None, :]
    return SVIState(prec=prec, eta1=eta1, alpha=state.alpha.at[B].set(alpha),
                    gamma=state.gamma.at[rows, cols].set(gamma),
                    c=state.c.at[rows, cols].set(c))


def _svi_init_state(N, C, M) -> SVIState:
    start = _init_state(N, C, M)  # q(v) = prior: precision I, natural mean 0
    return SVIState(prec=start.S, eta1=start.m, alpha=start.alpha, gamma=start.gamma,
                    c=start.c)


@functools.partial(jax.jit, static_argnames=("kernel", "batch_size", "class_batch_size",
                                             "learn_hypers", "learn_inducing",
                                             "include_prior", "num_steps"))
def _stochastic_iteration(key, Y, X, kernel, log_hypers, Z, state, opt_state, rho,
                          learning_rate, *, batch_size, class_batch_size, learn_hypers,
                          learn_inducing, include_prior, num_steps):
    """``stochastic_step`` on a fresh minibatch, then ``num_steps`` Adam steps on (log hypers,
    Z) of the unbiased minibatch estimate of the ELBO's likelihood terms,
    N/|B| C/|K| sum_{B x K} (the rest of the ELBO does not depend on them)."""
    N, C = Y.shape
    B, K = minibatch(key, N, C, batch_size, class_batch_size)
    X_B = X[B]
    hypers = jax.tree.map(jnp.exp, log_hypers)
    state = stochastic_step(Y, _projection(kernel, hypers, X_B, Z), state, B, K, rho)
    if learn_hypers or learn_inducing:
        m_K, S_K = _moments_from_natural(state.prec[K], state.eta1[:, K])
        Y_BK, alpha_B = Y[B][:, K], state.alpha[B]
        gamma_BK, c_BK = state.gamma[B][:, K], state.c[B][:, K]
        scale = (N / B.shape[0]) * (C / K.shape[0])

        def objective(params):
            lh, z = params
            h = jax.tree.map(jnp.exp, lh)
            m_f, s_f = _q_f(_projection(kernel, h, X_B, z), m_K, S_K)
            value = scale * jnp.sum(_lik_terms(Y_BK, m_f, s_f, alpha_B, gamma_BK, c_BK, C))
            if include_prior:
                value = value + kernel_log_prior(kernel, X.shape[1], h)
            return -value

        (log_hypers, Z), opt_state = _adam_steps(
            objective, (log_hypers, Z), opt_state, learning_rate, num_steps,
            learn_hypers=learn_hypers, learn_inducing=learn_inducing)
    return log_hypers, Z, state, opt_state


@functools.partial(jax.jit, static_argnames=("kernel", "num_iters", "batch_size",
                                             "class_batch_size", "learn_hypers",
                                             "learn_inducing", "include_prior", "num_steps"))
def _stochastic_window(key, start, Y, X, kernel, log_hypers, Z, state, opt_state,
                       learning_rate, step_size_delay, step_size_power, *, num_iters,
                       batch_size, class_batch_size, learn_hypers, learn_inducing,
                       include_prior, num_steps):
    """Iterations t = start, ..., start + num_iters - 1 of ``_stochastic_iteration`` in one
    ``lax.scan``: minibatch key fold_in(key, t), step size rho_t = (t + delay)^-power."""
    def body(carry, t):
        log_hypers, Z, state, opt_state = carry
        rho = (t + step_size_delay) ** -step_size_power
        out = _stochastic_iteration.__wrapped__(
            jax.random.fold_in(key, t), Y, X, kernel, log_hypers, Z, state, opt_state, rho,
            learning_rate, batch_size=batch_size, class_batch_size=class_batch_size,
            learn_hypers=learn_hypers, learn_inducing=learn_inducing,
            include_prior=include_prior, num_steps=num_steps)
        return out, None

    carry, _ = lax.scan(body, (log_hypers, Z, state, opt_state),
                        start + jnp.arange(num_iters))
    return carry


@functools.partial(jax.jit, static_argnames=("kernel",))
def _svi_full_elbo(Y, X, kernel, log_hypers, Z, state: SVIState):
    """The full-data ELBO at the current q(v) and hyperparameters, with every point's local
    parameters updated first (one local sweep from the stored alpha); returns the ELBO and
    the equivalent ``CAVIState``."""
    N, C = Y.shape
    proj = _projection(kernel, jax.tree.map(jnp.exp, log_hypers), X, Z)
    m, S = _moments_from_natural(state.prec, state.eta1)
    m_f, s_f = _q_f(proj, m, S)
    c, alpha, gamma, _, _ = _local_updates(Y, m_f, s_f, state.alpha, C)
    full = CAVIState(m=m, S=S, alpha=alpha, gamma=gamma, c=c)
    return elbo(Y, proj, full), full


def _elbo_converged(trace: list[float], tol: float) -> bool:
    """Whether the last two ELBO values differ by less than ``tol`` relative to the last."""
    return len(trace) > 1 and abs(trace[-1] - trace[-2]) < tol * abs(trace[-1])


def cavi(data: LSMData, kernel, hypers: dict | None = None, *, num_inducing: int | None = None,
         learn_hypers: bool | None = None, learn_inducing: bool = True,
         include_prior: bool = False, max_iter: int = 300, tol: float = 1e-6,
         hyper_steps: int = 1, learning_rate: float = 0.05, seed: int = 0,
         batch_size: int | None = None, class_batch_size: int | None = None,
         step_size_delay: float = 1.0, step_size_power: float = 0.6,
         elbo_every: int = 10, progress: bool = False) -> CAVIResult:
    """Coordinate-ascent VI for the augmented model (appendix A.2), or its stochastic
    version with data minibatches and class subsampling (appendix A.3, Algorithm 2) when
    ``batch_size`` or ``class_batch_size`` is given.

    Args:
        data: prepared data; kernel: the kernel.
        hypers: kernel hyperparameters (the start when learnt); ``None``: ``initial_hypers``.
        num_inducing: M; ``None`` or >= N is the full version (Z = X, not learnt).
        learn_hypers: type-II ML (MAP with ``include_prior``) of the hyperparameters by Adam
            steps on the ELBO between CAVI sweeps; default: learn iff ``hypers`` is None.
        learn_inducing: learn Z too (sparse version only).
        max_iter: outer iterations (CAVI sweep + ``hyper_steps`` Adam steps each).
        tol: stop when the relative ELBO change falls below it.
        seed: for the random initial inducing inputs (a subset of X) and the minibatches.
        batch_size: |B| points per stochastic iteration (``None``: all N).
        class_batch_size: |K| classes per stochastic iteration (``None``: all C).
        step_size_delay, step_size_power: Robbins-Monro step size of the stochastic version,
            rho_t = (t + delay)^-power, t = 0, 1, ... (power in (0.5, 1] for convergence).
        elbo_every: stochastic version: evaluate the full-data ELBO (``_svi_full_elbo``)
            every this many iterations; ``tol`` compares consecutive evaluations.
        progress: show the iterations and the ELBO on stderr (``ppgpc.progress.bar``).

    Returns:
        ``CAVIResult``; with fixed hyperparameters the full version's ELBO trace never
        decreases (the stochastic version's trace is noisy: one value per evaluation).
    """
    Y, X = data.onehot, data.X
    N, C = Y.shape
    stochastic = batch_size is not None or class_batch_size is not None
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
        num_inducing = check_count("num_inducing", num_inducing)
    if learn_hypers is None:
        learn_hypers = hypers is None
    include_prior = include_prior and learn_hypers  # (one compiled sweep for fixed hypers)
    hypers = initial_hypers(data, kernel) if hypers is None else hypers
    if num_inducing is None or num_inducing >= N:
        Z, learn_inducing = X, False
    else:
        idx = np.random.default_rng(seed).choice(N, size=int(num_inducing), replace=False)
        Z = X[np.sort(idx)]
    log_hypers = {k: jnp.log(jnp.asarray(v, dtype=jnp.float64)) for k, v in hypers.items()}
    state = _init_state(N, C, Z.shape[0])
    zeros = (jax.tree.map(jnp.zeros_like, log_hypers), jnp.zeros_like(Z))
    opt_state = (zeros, zeros, jnp.asarray(0))
    trace, converged = [], False
    if stochastic:
        sstate = _svi_init_state(N, C, Z.shape[0])
        key = jax.random.PRNGKey(seed)
        done, every = 0, int(elbo_every)
        bar = progress_bar(max_iter, "CAVI (stochastic)", progress, unit="it")
        while done < max_iter:
            steps = min(every, max_iter - done)  # the last window may be shorter
            log_hypers, Z, sstate, opt_state = _stochastic_window(
                key, jnp.asarray(done), Y, X, kernel, log_hypers, Z, sstate, opt_state,
                learning_rate, step_size_delay, step_size_power, num_iters=steps,
                batch_size=batch_size, class_batch_size=class_batch_size,
                learn_hypers=bool(learn_hypers), learn_inducing=bool(learn_inducing),
                include_prior=bool(include_prior), num_steps=int(hyper_steps))
            done += steps
            value, state = _svi_full_elbo(Y, X, kernel, log_hypers, Z, sstate)
            trace.append(float(value))
            bar.update(steps)
            bar.set_postfix(elbo=f"{trace[-1]:.6g}", refresh=False)
            if _elbo_converged(trace, tol):
                converged = True
                break
        bar.close()
    else:
        carry = (log_hypers, Z, state, opt_state, jnp.asarray(jnp.nan))
        bar = progress_bar(max_iter, "CAVI", progress, unit="it")
        while len(trace) < max_iter and not converged:
            limit = min(CAVI_WINDOW, max_iter - len(trace))
            carry, values, done, converged = _cavi_window(
                Y, X, kernel, carry, learning_rate, jnp.asarray(limit), jnp.asarray(tol),
                learn_hypers=bool(learn_hypers), learn_inducing=bool(learn_inducing),
                include_prior=bool(include_prior), num_steps=int(hyper_steps))
            trace.extend(np.asarray(values)[:int(done)].tolist())
            converged = bool(converged)
            bar.update(int(done))
            bar.set_postfix(elbo=f"{trace[-1]:.6g}", refresh=False)
        bar.close()
        log_hypers, Z, state, opt_state, _ = carry
    hypers = {k: jnp.exp(v) for k, v in log_hypers.items()}
    return CAVIResult(hypers, Z, state, np.asarray(trace), converged, Z.shape[0] < N)


def sample_q_v(key, result: CAVIResult, num_samples: int):
    """(S, M, C) draws of the whitened inducing values from q(v) = prod_c N(m^c, S^c)."""
    M, C = result.state.m.shape
    chol_S = jnp.linalg.cholesky(result.state.S)                      # (C, M, M)
    eps = jax.random.normal(key, (num_samples, C, M))
    v = result.state.m.T[None] + jnp.einsum("cmk,sck->scm", chol_S, eps)   # (S, C, M)
    return jnp.swapaxes(v, 1, 2)


def sample_q_f(key, data: LSMData, kernel, result: CAVIResult, num_samples: int):
    """(S, N, C) joint draws of f(X) from q for the full version (Z = X): v ~ q(v),
    f = chol(K) v (the driver's predictive kind ``"latent"``).

    A sparse result is held as draws of v instead (``sample_q_v``, predictive kind
    ``"inducing"``): drawing f jointly at all N inputs would need the N x N covariance of
    p(f | u)."""
    if result.sparse:
        raise ValueError("sample_q_f draws f of the full version (Z = X); a sparse CAVI "
                         "result is sampled at its inducing inputs by sample_q_v")
    proj = _projection(kernel, result.hypers, data.X, result.inducing)
    v = sample_q_v(jax.random.split(key)[0], result, num_samples)      # (S, M = N, C)
    return jnp.einsum("mn,smc->snc", proj.A, v)


def inducing_latent(data: LSMData, kernel, hypers: dict, v, Xs, eps):
    """Draws of f(Xs) from a sparse CAVI posterior, one per whitened inducing draw (the
    driver's predictive kind ``"inducing"``): f = a^T v + sqrt(k** - |a|^2) eps with
    a = chol(K_mm)^-1 k(Z, x*), the marginal of q(f*) = int p(f* | u) q(u) du.

    Args:
        hypers: point hyperparameters by site (``kernel_*`` and ``inducing_inputs`` (M, D)).
        v: (S, M, C) whitened inducing draws; Xs: (n, D); eps: (S, n, C) standard normals.

    Returns:
        (S, n, C) draws of f(Xs).
    """
    proj = _projection(kernel, hypers, Xs, hypers["inducing_inputs"])
    return jnp.einsum("mn,smc->snc", proj.A, v) + jnp.sqrt(proj.ktilde)[None, :, None] * eps


def fit_hypers(data: LSMData, kernel, *, include_prior: bool = True, **options):
    """Kernel hyperparameters on the full CAVI ELBO, and facts for ``info``.

    Type-II MAP by default (ELBO plus the kernel's log-prior): with ARD lengthscales, type-II
    ML on the ELBO drove most of wine's 13 lengthscales above 100 and the variance to 200
    without converging in 300 iterations (test accuracy 0.92-0.94).
    """
    res = cavi(data, kernel, None, include_prior=include_prior, **options)
    kind = "type-II MAP" if include_prior else "type-II ML"
    info = {"hyperparameters": f"CAVI ELBO ({kind})", "elbo": float(res.elbo[-1]),
            "cavi_iterations": int(len(res.elbo)), "cavi_converged": bool(res.converged)}
    return res.hypers, info


SPEC = ModelSpec(
    name="logistic_softmax",
    description="Logistic-softmax GP classifier (C latent GPs), Polya-Gamma augmented",
    prepare=prepare,
    num_latent=num_latent,
    log_link=log_link,
    initial_hypers=initial_hypers,
    latent_model=latent_model,
    latent_conditional=latent_conditional,
    extras={
        "gibbs_kernel": gibbs_kernel,
        "fit_hypers": fit_hypers,
        "cavi": cavi,
        "sample_q_f": sample_q_f,
        "sample_q_v": sample_q_v,
        "inducing_latent": inducing_latent,
        "augmented_model": augmented_model,
        # the sparse CAVI (M < N inducing inputs) costs O(N M^2) and is held as draws of v
        # (predictive kind "inducing"), so the driver exempts it from max_exact_points;
        # Gibbs, NUTS and the full CAVI form N x N matrices
        "sparse_alternative": "use the sparse CAVI with M < N inducing inputs: "
                              'LogisticSoftmaxGPClassifier(inference="svi") (M = 200 by '
                              'default), or inference="cavi" with inference_options='
                              '{"num_inducing": M}; driver: method="cavi", num_inducing=M',
    },
)
