"""The blocked Gibbs sampler of the logistic-softmax GP (docs/math.md section 3), as a pure
init/step pair over ``GibbsState`` (BlackJAX style), its blocks as pure functions
(``level_block``, ``lambda_count_block``, ``omega_block``, ``f_block``), and its
HMC-within-Gibbs step on the kernel hyperparameters. The level move is an elliptical slice
sampler (``elliptical_slice``) on the plain likelihood (``link.log_link``).
Why the sweep has a level move and integrates lambda out: docs/records/gibbs.md.

The model (sites, augmentation) is ``ppgpc.models.logistic_softmax``; the driver's method
``"gibbs"`` (``ppgpc.infer.gibbs``) loops the pair inside NumPyro's ``MCMC`` through a thin
``MCMCKernel`` adapter. The data argument is the model's prepared data (``LSMData``: ``X``
(N, D) and the one-hot labels ``onehot`` (N, C)).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from numpyro.infer.hmc import hmc

from ppgpc.gp import linalg
from ppgpc.gp.kernels import gram, kernel_log_prior, kernel_params
from ppgpc.models.logistic_softmax.elliptical_slice import elliptical_slice
from ppgpc.models.logistic_softmax.link import log_link
from ppgpc.polyagamma import sample_polyagamma

__all__ = [
    "LEVEL_STEPS",
    "GibbsState",
    "GibbsInfo",
    "HyperGibbsInfo",
    "level_block",
    "lambda_count_block",
    "omega_block",
    "f_block",
    "hyper_potential",
    "hyper_sampler",
    "gibbs_kernel",
]

LEVEL_STEPS = 3
"""Elliptical-slice steps on the class-mean level per sweep (``level_block``; docs/records/gibbs.md
gives the measurements behind 3)."""


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
    jitter: jax.Array
    """The Cholesky jitter of the sweep's prior covariance (K, or K_mm)."""


class HyperGibbsInfo(NamedTuple):
    """What one sweep reports when the hyperparameters are sampled."""

    mean_count: jax.Array
    """As in ``GibbsInfo``."""
    jitter: jax.Array
    """As in ``GibbsInfo``: of K at the sweep's hyperparameters."""
    hyper_accept_prob: jax.Array
    """Acceptance statistic of the HMC/NUTS step on the hyperparameters."""
    hyper_num_steps: jax.Array
    """Leapfrog steps of that step."""
    hyper_diverging: jax.Array
    """Whether its trajectory diverged."""


def level_block(key, f, chol_K, onehot, num_steps: int = LEVEL_STEPS):
    """Move the class-mean level m = mean_c f^c given the contrasts d^c = f^c - m, with
    lambda, n and omega integrated out: ``num_steps`` elliptical slice sampling steps
    (``elliptical_slice``) on

        p(m | d, y) propto N(m | 0, K / C) prod_i sigma(m_i + d_iy_i) / sum_c sigma(m_i + d_ic).

    Under the prior f^c ~ N(0, K) independently, m ~ N(0, K / C) and m is independent of d
    (Cov(m, d^c) = K / C - K / C = 0), so this is the exact conditional of m in the
    non-augmented posterior. The likelihood is nearly flat in m where every f_ic is
    negative (there the link tends to softmax(f), which ignores a shared shift), the
    direction along which the augmented blocks mix slowest (docs/records/gibbs.md).

    Prior draws nu = chol(K) e / sqrt(C), e ~ N(0, I): O(N^2) per step (one
    triangular-matrix product) plus O(N C) per proposal.

    Args:
        key: PRNG key; f: (N, C); chol_K: (N, N) Cholesky factor of K; onehot: (N, C) y'.
        num_steps: slice-sampling steps.

    Returns:
        (N, C) latent with the new level and the same contrasts.
    """
    N, C = f.shape
    m0 = jnp.mean(f, axis=1, keepdims=True)                        # (N, 1)
    d = f - m0                                                      # (N, C)

    def prior_draw(k):                                              # ~ N(0, K / C), (N, 1)
        return chol_K @ jax.random.normal(k, (N, 1)) / jnp.sqrt(C)

    def log_lik(m):                                                 # (N, 1) -> ()
        return jnp.sum(onehot * log_link(d + m))

    return d + elliptical_slice(key, m0, prior_draw, log_lik, num_steps)[0]


def lambda_count_block(key, f):
    """Draw (lambda, n) | f jointly, lambda integrated against the counts first:

        lambda_i | f_i ~ Gamma(1, rate sum_c sigma(f_ic)),
        n_ic | lambda_i, f_ic ~ Poisson(lambda_i sigma(-f_ic)),

    so n_i | f_i is negative multinomial (a Gamma-Poisson mixture). From
    p(lambda_i, n_i | f_i) propto prod_c exp(-lambda_i) (lambda_i sigma(-f_ic))^n_ic / n_ic!
    (docs/math.md section 3): summing n out leaves exp(-lambda_i sum_c sigma(f_ic)).

    Args:
        key: PRNG key; f: (N, C).

    Returns:
        lambda (N,) and n (N, C) (counts stored as floats).
    """
    k_lam, k_n = jax.random.split(key)
    N, C = f.shape
    lam = jax.random.exponential(k_lam, (N,)) / jnp.sum(jax.nn.sigmoid(f), axis=1)
    n = jax.random.poisson(k_n, lam[:, None] * jax.nn.sigmoid(-f), (N, C)).astype(f.dtype)
    return lam, n


def omega_block(key, onehot, n, f):
    """omega_ic | n_ic, f_ic ~ PG(y'_ic + n_ic, |f_ic|) (PG(0, z) = 0), (N, C)."""
    return sample_polyagamma(key, onehot + n, f)


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
    given the latent, the target of the HMC-within-Gibbs step (docs/math.md section 3):

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
    L = linalg.cholesky(gram(kernel, kernel_params(hypers), X)).factor
    alpha = linalg.tri_solve(L, f)                                  # (N, C)
    C = f.shape[1]
    log_lik = -0.5 * jnp.sum(alpha**2) - 0.5 * C * linalg.logdet(L)
    log_jacobian = sum(jnp.sum(v) for v in log_hypers.values())
    return -(log_lik + kernel_log_prior(kernel, X.shape[1], hypers) + log_jacobian)


def hyper_sampler(data, kernel, *, num_warmup: int, algo: str = "HMC",
                  num_steps: int = 8, max_tree_depth: int = 6, target_accept: float = 0.8):
    """HMC or NUTS on ``hyper_potential`` as a pure pair, through NumPyro's functional ``hmc``.

    The target changes with f at every sweep, so each step first refreshes the cached
    potential and gradient at the current point for the current f (as NumPyro's
    ``HMCGibbs`` does) and then takes one transition; step size and diagonal mass matrix
    adapt during the first ``num_warmup`` steps. ``algo="HMC"`` (default) takes
    ``num_steps`` leapfrog steps and compiles in a fraction of NUTS's time inside the Gibbs
    sweep (``docs/records/benchmarks.md``); ``algo="NUTS"`` builds trees up to ``max_tree_depth``.

    Mixing: this is the centred conditional theta | f, whose lengthscale moves slowly when
    f is well determined (with the likelihood removed, N = 6, C = 2, its ESS was about 0.5%
    of the draws, the variance's 5%; see the tests). Run long chains, or fix the
    hyperparameters at their CAVI estimate, when only f matters.

    Returns:
        ``init(key, hypers, f) -> HMCState`` (call it before tracing ``step``: it configures
        the adaptation schedule of the pair) and ``step(key, hmc_state, f) -> HMCState``,
        whose ``z`` holds the log-hyperparameters by site name.
    """
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


def gibbs_kernel(data, kernel, hypers: dict, *, sample_hypers: bool = False,
                 num_warmup: int = 0, hyper_algo: str = "HMC", hyper_num_steps: int = 8,
                 max_tree_depth: int = 6, target_accept: float = 0.8):
    """The blocked Gibbs sampler as a pure ``(init, step)`` pair (BlackJAX style).

    One sweep (docs/math.md section 3; docs/records/gibbs.md for why these blocks):

    0. with ``sample_hypers``: the kernel hyperparameters theta | f by one HMC (or NUTS)
       step on ``hyper_potential`` (HMC-within-Gibbs), then K_theta and its Cholesky factor;
    1. the class-mean level m | d, y with lambda, n and omega integrated out
       (``level_block``: ``LEVEL_STEPS`` elliptical slice steps on the plain likelihood);
    2. (lambda, n) | f jointly (``lambda_count_block``: lambda_i | f_i ~ Gamma(1, rate
       sum_c sigma(f_ic)), then n_ic ~ Poisson(lambda_i sigma(-f_ic)));
    3. omega_ic | n_ic, f_ic ~ PG(y'_ic + n_ic, |f_ic|) (``omega_block``);
    4. f^c | omega^c, n^c, theta by ``f_block`` with kappa^c = (y'^c - n^c) / 2.

    Steps 0 and 1 leave the marginal posterior of f invariant and step 2 and 3 redraw the
    augmentation from its full conditional given f, so the sweep keeps the joint posterior
    of (f, lambda, n, omega) invariant. With fixed hyperparameters the Gram matrix and its
    Cholesky factor are computed once here.

    Args:
        data, kernel: prepared data and kernel.
        hypers: kernel hyperparameters by site name (the starting point when sampled).
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
        K = gram(kernel, kernel_params(h), data.X)
        chol = linalg.cholesky(K)
        return K, chol.factor, chol.jitter

    K0, chol_K0, jitter0 = factors(hypers)
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
        k_hyp, k_level, k_count, k_omega, k_f = jax.random.split(key, 5)
        f = state.f
        # 0. hyperparameters
        if sample_hypers:
            hmc_state = hyper_step(k_hyp, state.hmc, f)
            h = jax.tree.map(jnp.exp, hmc_state.z)
            K, chol_K, jitter = factors(h)
        else:
            hmc_state, h, (K, chol_K, jitter) = None, {}, (K0, chol_K0, jitter0)
        # 1. the class-mean level, augmentation integrated out
        f = level_block(k_level, f, chol_K, Y)
        # 2. lambda and n given f
        lam, n = lambda_count_block(k_count, f)
        # 3. omega
        omega = omega_block(k_omega, Y, n, f)
        # 4. f
        f = f_block(k_f, K, chol_K, omega, 0.5 * (Y - n))
        new = GibbsState(f, lam, n, omega, h, hmc_state)
        if sample_hypers:
            return new, HyperGibbsInfo(jnp.mean(n), jitter, hmc_state.accept_prob,
                                       hmc_state.num_steps, hmc_state.diverging)
        return new, GibbsInfo(jnp.mean(n), jitter)

    return init, step
