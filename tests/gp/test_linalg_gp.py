"""Cholesky with adaptive jitter, and the exact multi-output GP algebra (docs/math.md section 1)."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import pytest
from scipy.stats import lognorm, multivariate_normal

from ppgpc.gp import exact, linalg
from ppgpc.gp.kernels import RBF, Matern52, gram, kernel_log_prior, kernel_params, make_kernel


def _spd(n, seed):
    A = np.random.default_rng(seed).normal(size=(n, n))
    return A @ A.T + n * np.eye(n)


def test_cholesky_without_jitter_on_a_well_conditioned_matrix():
    A = _spd(6, 0)
    chol = linalg.cholesky(jnp.asarray(A))
    assert float(chol.jitter) == 0.0
    np.testing.assert_allclose(chol.factor, np.linalg.cholesky(A), rtol=1e-12)


def test_cholesky_adds_and_reports_jitter_on_a_singular_matrix():
    A = jnp.ones((5, 5))  # rank one
    chol = linalg.cholesky(A)
    jitter = float(chol.jitter)
    assert jitter > 0
    assert np.all(np.isfinite(chol.factor))
    np.testing.assert_allclose(chol.factor @ chol.factor.T, A + jitter * np.eye(5), atol=1e-10)


def test_cholesky_gives_nan_when_every_try_fails():
    A = -jnp.eye(3)  # negative definite: no jitter of 1e-3 * |diag| helps
    chol = linalg.cholesky(A, max_tries=3)
    assert not np.all(np.isfinite(chol.factor))


def test_cholesky_gradient_matches_jax_and_finite_differences():
    A = jnp.asarray(_spd(5, 1))
    B = jnp.asarray(np.random.default_rng(2).normal(size=(5, 2)))

    def ours(A):
        L = linalg.cholesky(A).factor
        return linalg.logdet(L) + jnp.sum(linalg.cho_solve(L, B) ** 2)

    def reference(A):
        L = jnp.linalg.cholesky(A)
        return 2 * jnp.sum(jnp.log(jnp.diag(L))) + jnp.sum(jnp.linalg.solve(A, B) ** 2)

    g1, g2 = jax.grad(ours)(A), jax.grad(reference)(A)
    sym = lambda G: 0.5 * (G + G.T)  # noqa: E731  (only the symmetric part is defined)
    np.testing.assert_allclose(sym(g1), sym(g2), rtol=1e-9, atol=1e-12)
    # a finite difference along a symmetric direction
    E = jnp.asarray(_spd(5, 3)) * 1e-6
    fd = (ours(A + E) - ours(A - E)) / 2
    assert float(jnp.sum(g1 * E)) == pytest.approx(float(fd), rel=1e-5)


def test_cho_solve_solves():
    A = _spd(7, 4)
    B = np.random.default_rng(5).normal(size=(7, 3))
    L = linalg.cholesky(jnp.asarray(A)).factor
    np.testing.assert_allclose(linalg.cho_solve(L, B), np.linalg.solve(A, B), rtol=1e-10)
    np.testing.assert_allclose(linalg.logdet(L), np.linalg.slogdet(A)[1], rtol=1e-12)


@pytest.fixture
def regression():
    gen = np.random.default_rng(7)
    X = gen.normal(size=(15, 2))
    Y = gen.normal(size=(15, 3))
    kernel = RBF(ard=True)
    params = {"variance": jnp.asarray(1.7), "lengthscale": jnp.asarray([0.8, 1.3])}
    return X, Y, kernel, params


def test_log_marginal_likelihood_equals_sum_of_direct_mvn_densities(regression):
    X, Y, kernel, params = regression
    K = np.asarray(gram(kernel, params, jnp.asarray(X)))
    noise = 0.3
    expected = sum(
        multivariate_normal(np.zeros(15), K + noise * np.eye(15)).logpdf(Y[:, d]) for d in range(3)
    )
    got = exact.log_marginal_likelihood(jnp.asarray(K), jnp.asarray(Y), noise)
    assert float(got) == pytest.approx(expected, rel=1e-10)
    # heteroscedastic noise vector
    noise_vec = np.linspace(0.1, 0.9, 15)
    expected = sum(
        multivariate_normal(np.zeros(15), K + np.diag(noise_vec)).logpdf(Y[:, d]) for d in range(3)
    )
    got = exact.log_marginal_likelihood(jnp.asarray(K), jnp.asarray(Y), jnp.asarray(noise_vec))
    assert float(got) == pytest.approx(expected, rel=1e-10)


def test_predictive_equals_textbook_formulas(regression):
    X, Y, kernel, params = regression
    Xs = np.random.default_rng(8).normal(size=(4, 2))
    noise = 0.2
    post = exact.condition(kernel, params, jnp.asarray(X), jnp.asarray(Y), noise)
    mean, var = exact.predict(kernel, params, post, jnp.asarray(Xs))
    K = np.asarray(gram(kernel, params, jnp.asarray(X)))
    Ks = np.asarray(gram(kernel, params, jnp.asarray(Xs), jnp.asarray(X)))
    A = K + noise * np.eye(15)
    np.testing.assert_allclose(mean, Ks @ np.linalg.solve(A, Y), rtol=1e-9)
    expected_var = 1.7 - np.einsum("ij,ji->i", Ks, np.linalg.solve(A, Ks.T))
    np.testing.assert_allclose(var, expected_var, rtol=1e-8)


def test_matheron_draws_have_the_posterior_moments(regression):
    """Sample mean and covariance of Matheron draws against the closed form, with
    tolerances from the sampling error of S independent draws."""
    X, Y, kernel, params = regression
    noise = 0.25
    post = exact.condition(kernel, params, jnp.asarray(X), jnp.asarray(Y), noise)
    S = 20_000
    draws = np.asarray(exact.sample_posterior_at_inputs(
        jax.random.PRNGKey(0), kernel, params, post, jnp.asarray(Y), noise, S))
    K = np.asarray(gram(kernel, params, jnp.asarray(X)))
    A = K + noise * np.eye(15)
    mean = K @ np.linalg.solve(A, Y)
    cov = K - K @ np.linalg.solve(A, K)
    sd = np.sqrt(np.diag(cov))
    z = (draws.mean(0) - mean) / (sd[:, None] / np.sqrt(S))
    assert np.max(np.abs(z)) < 4.5
    # variances: the sample variance of S normals has relative s.e. sqrt(2 / (S - 1))
    rel = draws.var(0, ddof=1) / np.diag(cov)[:, None] - 1
    assert np.max(np.abs(rel)) < 4.5 * np.sqrt(2 / (S - 1))
    # one off-diagonal covariance (outputs are independent, so pool them)
    c01 = np.mean([np.cov(draws[:, 0, d], draws[:, 1, d])[0, 1] for d in range(3)])
    se = np.sqrt((cov[0, 0] * cov[1, 1] + cov[0, 1] ** 2) / (3 * (S - 1)))
    assert abs(c01 - cov[0, 1]) < 4.5 * se


def test_kernel_shape_errors_name_the_shapes():
    k = RBF(ard=True)
    params = {"variance": 1.0, "lengthscale": jnp.ones(2)}
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(4, 3\)"):
        gram(k, params, jnp.zeros((3, 2)), jnp.zeros((4, 3)))
    with pytest.raises(ValueError, match="2-D"):
        gram(k, params, jnp.zeros(3))



def _difference_form_gram(params, X1, X2):
    """s^2 exp(-|x - x'|^2 / (2 l^2)) from the (n, m, D) differences: the textbook form that
    the RBF's dot-product pair function must reproduce."""
    diff = (X1[:, None, :] - X2[None, :, :]) / params["lengthscale"]
    return params["variance"] * jnp.exp(-0.5 * jnp.sum(diff * diff, axis=-1))


def _difference_form_matern52(params, X1, X2):
    """s^2 (1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r), r = |x - x'| / l, from the
    differences (Rasmussen & Williams eq. 4.17 with nu = 5/2)."""
    diff = (X1[:, None, :] - X2[None, :, :]) / params["lengthscale"]
    r = jnp.sqrt(jnp.sum(diff * diff, axis=-1))
    return params["variance"] * (1 + np.sqrt(5) * r + 5 * r * r / 3) * jnp.exp(-np.sqrt(5) * r)


@pytest.mark.parametrize("kernel_class, textbook", [(RBF, _difference_form_gram),
                                                    (Matern52, _difference_form_matern52)])
@pytest.mark.parametrize("ard", [True, False])
def test_gram_equals_the_difference_form_in_value_and_gradient(ard, kernel_class, textbook):
    rng = np.random.default_rng(7)
    X1, X2 = jnp.asarray(rng.normal(size=(9, 3))), jnp.asarray(rng.normal(size=(5, 3)))
    k = kernel_class(ard=ard)
    params = {"variance": jnp.asarray(1.7),
              "lengthscale": jnp.asarray([0.6, 1.3, 2.1]) if ard else jnp.asarray(0.9)}
    W = jnp.asarray(rng.normal(size=(9, 5)))
    np.testing.assert_allclose(gram(k, params, X1, X2), textbook(params, X1, X2),
                               rtol=1e-12, atol=1e-14)
    g_dot = jax.grad(lambda p, A: jnp.sum(gram(k, p, A, X2) * W), argnums=(0, 1))(params, X1)
    g_diff = jax.grad(lambda p, A: jnp.sum(textbook(p, A, X2) * W), argnums=(0, 1))(params, X1)
    for got, want in zip(jax.tree_util.tree_leaves(g_dot), jax.tree_util.tree_leaves(g_diff)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("kernel_class", [RBF, Matern52])
def test_gram_at_coincident_points_has_the_variance_and_finite_exact_gradients(kernel_class):
    """A point shared by the two sets (distance exactly 0, where the Matern's sqrt has no
    derivative): the value is s^2, and the gradients in the inputs and the parameters are
    finite and agree with central finite differences (both kernels are twice differentiable
    in x, so the differences are accurate to O(h^2))."""
    rng = np.random.default_rng(3)
    X1, X2 = jnp.asarray(rng.normal(size=(4, 3))), jnp.asarray(rng.normal(size=(3, 3)))
    X1 = X1.at[1].set(X2[2])
    k = kernel_class(ard=True)
    params = {"variance": jnp.asarray(1.7), "lengthscale": jnp.asarray([0.6, 1.3, 2.1])}
    K = gram(k, params, X1, X2)
    assert float(K[1, 2]) == pytest.approx(1.7, rel=1e-14)
    np.testing.assert_allclose(np.diag(gram(k, params, X1)), 1.7, rtol=1e-14)
    W = jnp.asarray(rng.normal(size=(4, 3)))

    def objective(flat):
        p = {"variance": flat[0], "lengthscale": flat[1:4]}
        return jnp.sum(gram(k, p, flat[4:].reshape(4, 3), X2) * W)

    flat = jnp.concatenate([params["variance"][None], params["lengthscale"], X1.ravel()])
    grad = jax.grad(objective)(flat)
    assert np.all(np.isfinite(grad))
    h = 1e-5
    fd = np.array([(objective(flat.at[i].add(h)) - objective(flat.at[i].add(-h))) / (2 * h)
                   for i in range(flat.size)])
    np.testing.assert_allclose(grad, fd, rtol=1e-7, atol=1e-8)


def test_make_kernel_knows_the_kernel_names():
    assert make_kernel("rbf-ard") == RBF(ard=True) and make_kernel("RBF") == RBF(ard=False)
    assert make_kernel("matern52-ard") == Matern52(ard=True)
    assert make_kernel("matern52") == make_kernel("matern52-iso") == Matern52(ard=False)
    assert Matern52() != RBF()  # same fields, different kernels
    kernel = Matern52(lengthscale_prior_scale=0.5)
    assert make_kernel(kernel) is kernel
    with pytest.raises(ValueError, match=r"unknown kernel 'matern32'; known kernels: .*matern52"):
        make_kernel("matern32")
    with pytest.raises(TypeError, match="kernel must be a name or a kernel object, got int"):
        make_kernel(3)


@pytest.mark.parametrize("kernel_class", [RBF, Matern52])
@pytest.mark.parametrize("ard, ls_scale", [(True, 1.0), (False, 1.0), (True, 0.3),
                                            (False, 2.5)])
def test_kernel_log_prior_sums_the_priors_over_parameters_and_batch_axes(ard, ls_scale,
                                                                         kernel_class):
    """``kernel_log_prior`` against SciPy's log-normal densities (variance LogNormal(0, 1.5),
    lengthscales LogNormal(log sqrt(D), s) with s = ``lengthscale_prior_scale``, 1 by
    default), for one kernel and for a batch of three, keyed by parameter or by site name."""
    D = 4
    gen = np.random.default_rng(0)
    shape = (D,) if ard else ()
    single = {"variance": 0.7, "lengthscale": gen.uniform(0.5, 3.0, shape)}
    batch = {"variance": gen.uniform(0.5, 3.0, 3),
             "lengthscale": gen.uniform(0.5, 3.0, (3,) + shape)}
    for params in (single, batch):
        expected = (lognorm.logpdf(params["variance"], s=1.5).sum()
                    + lognorm.logpdf(params["lengthscale"], s=ls_scale, scale=np.sqrt(D)).sum())
        jparams = {k: jnp.asarray(v) for k, v in params.items()}
        by_site = {"kernel_" + k: v for k, v in jparams.items()}
        for given in (jparams, by_site):
            kernel = kernel_class(ard=ard, lengthscale_prior_scale=ls_scale)
            assert np.isclose(float(kernel_log_prior(kernel, D, given)), expected, rtol=1e-12)


@pytest.mark.parametrize("kernel_class", [RBF, Matern52])
def test_lengthscale_prior_scale_defaults_to_one_and_refuses_bad_values(kernel_class):
    k = kernel_class
    assert k().lengthscale_prior_scale == 1.0 and k() == k(lengthscale_prior_scale=1)
    assert hash(k(lengthscale_prior_scale=2)) == hash(k(lengthscale_prior_scale=2.0))
    for bad in (True, "0.5", None):
        with pytest.raises(ValueError, match="lengthscale_prior_scale must be a positive number"):
            k(lengthscale_prior_scale=bad)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="lengthscale_prior_scale must be finite and positive"):
            k(lengthscale_prior_scale=bad)


@pytest.mark.parametrize("ard", [True, False])
def test_rbf_initial_params_start_at_the_prior_median_or_where_asked(ard):
    """Without a lengthscale the start is sqrt(D) (the prior median); with one it is that
    value in every dimension; the variance is the one given; shapes follow ``ard``."""
    D = 9
    shape = (D,) if ard else ()
    k = RBF(ard=ard)
    default = k.initial_params(D, variance=2.5)
    asked = k.initial_params(D, variance=2.5, lengthscale=0.7)
    for start in (default, asked):
        assert float(start["variance"]) == 2.5
        assert start["lengthscale"].shape == shape
    np.testing.assert_array_equal(default["lengthscale"], np.full(shape, 3.0))
    np.testing.assert_array_equal(asked["lengthscale"], np.full(shape, 0.7))


# ------------------------------------------------- shared helpers of the model modules
def test_latent_conditional_equals_the_closed_form_on_a_tiny_example():
    """exact.latent_conditional (every model's ``latent_conditional``): mean K*n K^-1 f and
    variance k** - K*n K^-1 Kn*, equal for every latent, against numpy's solve on 3 points
    and 2 latents; at a training input it returns f itself with variance 0."""
    kernel, params = RBF(ard=False), {"variance": 1.7, "lengthscale": 0.8}
    X = np.array([[0.0], [0.7], [1.9]])
    f = np.array([[0.3, -1.0], [1.1, 0.2], [-0.4, 0.9]])
    Xs = np.array([[0.35], [3.0], [0.7]])

    def k(a, b):
        return 1.7 * np.exp(-0.5 * (a[:, None, 0] - b[None, :, 0]) ** 2 / 0.8**2)

    K, Ksn = k(X, X), k(Xs, X)
    want_mean = Ksn @ np.linalg.solve(K, f)
    want_var = 1.7 - np.einsum("ij,ji->i", Ksn, np.linalg.solve(K, Ksn.T))
    mean, var = exact.latent_conditional(kernel, params, jnp.asarray(X), jnp.asarray(f),
                                      jnp.asarray(Xs))
    assert mean.shape == (3, 2) and var.shape == (3, 2)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(var, np.repeat(want_var[:, None], 2, axis=1), rtol=1e-9,
                               atol=1e-12)
    np.testing.assert_allclose(mean[2], f[1], atol=1e-9)
    assert float(var[2, 0]) < 1e-9


@pytest.mark.parametrize("per_latent", [False, True])
def test_whitened_latent_is_chol_times_the_white_site(per_latent):
    """exact.whitened_latent: site ``f_white`` (L, N) standard normal, deterministic ``f`` (N, L)
    = chol(K_l) v_l + mean_l, with one factor for all latents or one per latent."""
    N, L = 4, 3
    chol = np.stack([np.linalg.cholesky(_spd(N, s)) for s in range(L)])
    chol_K = jnp.asarray(chol if per_latent else chol[0])
    mean = jnp.array([0.5, -1.0, 2.0])
    with numpyro.handlers.trace() as tr, numpyro.handlers.seed(rng_seed=3):
        f = exact.whitened_latent(chol_K, L, mean)
    v = np.asarray(tr["f_white"]["value"])
    assert v.shape == (L, N) and f.shape == (N, L)
    assert tr["f_white"]["fn"].batch_shape == (L,) and tr["f_white"]["fn"].event_shape == (N,)
    want = np.stack([(chol[l] if per_latent else chol[0]) @ v[l] for l in range(L)], axis=1)
    np.testing.assert_allclose(tr["f"]["value"], want + np.asarray(mean)[None, :], rtol=1e-12)


def test_kernel_params_takes_the_kernel_sites_only():
    hypers = {"kernel_variance": 2.0, "kernel_lengthscale": jnp.ones(3), "mean": 1.0,
              "noise_scale": 0.5, "inducing_inputs": jnp.zeros((2, 3))}
    params = kernel_params(hypers)
    assert set(params) == {"variance", "lengthscale"} and params["variance"] == 2.0
    assert float(gram(RBF(), params, jnp.zeros((1, 3)))[0, 0]) == 2.0


def _ard_gram(X, mask):
    """theta (2,) -> masked RBF Gram matrix on X (padded rows a decoupled identity)."""
    def K_of(theta):
        sq = jnp.sum((X[:, None] - X[None]) ** 2, -1)
        K = jnp.exp(theta[0]) * jnp.exp(-0.5 * sq / jnp.exp(theta[1]) ** 2)
        return K * mask[:, None] * mask[None] + jnp.diag(1.0 - mask)
    return K_of


def _scipy_log_densities(A, R):
    return np.array([multivariate_normal(np.zeros(A.shape[-1]), A).logpdf(r) for r in R])


def test_marginal_gaussian_equals_the_mvn_density_and_its_gradient():
    rng = np.random.default_rng(3)
    N, k = 25, 3
    X, mask = jnp.asarray(rng.normal(size=(N, 2))), jnp.ones(N)
    K_of = _ard_gram(X, mask)
    R = jnp.asarray(rng.normal(size=(k, N)))
    theta, g = jnp.array([0.3, -0.2]), jnp.array([1.0, 2.0, 0.5])

    def ours(theta, noise, R):
        A = K_of(theta) + noise * jnp.eye(N)
        return jnp.sum(g * exact.MarginalGaussian(jnp.zeros(N), A).log_prob(R))

    def reference(theta, noise, R):  # differentiated through the factorisation by JAX
        A = K_of(theta) + noise * jnp.eye(N)
        return jnp.sum(g * numpyro.distributions.MultivariateNormal(
            jnp.zeros(N), covariance_matrix=A).log_prob(R))

    A = np.asarray(K_of(theta)) + 0.3 * np.eye(N)
    np.testing.assert_allclose(exact.gaussian_log_densities(jnp.asarray(A), R),
                               _scipy_log_densities(A, np.asarray(R)), rtol=1e-12)
    got = jax.grad(ours, (0, 1, 2))(theta, 0.3, R)
    want = jax.grad(reference, (0, 1, 2))(theta, 0.3, R)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)
    # one covariance per batch entry, and draws of the right shape
    As = jnp.stack([K_of(theta + 0.1 * i) + 0.2 * jnp.eye(N) for i in range(k)])
    d = exact.MarginalGaussian(jnp.zeros((k, N)), As)
    np.testing.assert_allclose(
        d.log_prob(R), [_scipy_log_densities(np.asarray(a), np.asarray(r)[None])[0]
                        for a, r in zip(As, R)], rtol=1e-12)
    assert d.sample(jax.random.PRNGKey(0), (4,)).shape == (4, k, N)


@pytest.mark.parametrize("padded", [False, True])
def test_two_level_marginal_equals_one_factorisation_per_class(padded):
    """Woodbury's form of the GPD's C marginals against C separate Cholesky factorisations,
    in value and gradient (kernel, means), padded rows included."""
    rng = np.random.default_rng(4)
    N, C, real = 36, 4, 30 if padded else 36
    X = jnp.asarray(rng.normal(size=(N, 2)))
    mask = jnp.asarray((np.arange(N) < real).astype(float))
    y = np.where(np.arange(N) < real, rng.integers(0, C, N), 0)
    onehot = jnp.asarray(np.eye(C)[y]) * mask[:, None]
    low, high = np.log1p(1 / 0.01), np.log1p(1 / 1.01)
    K_of = _ard_gram(X, mask)
    R = jnp.asarray(rng.normal(size=(C, N))) * mask
    g = jnp.array([1.0, 2.0, 0.5, 3.0])

    def two_level(theta, loc):
        d = exact.TwoLevelMarginalGaussian(loc, K_of(theta), onehot, low, high,
                                           mask if padded else None)
        return jnp.sum(g * d.log_prob(R))

    def per_class(theta, loc):
        noise = jnp.where(onehot > 0, high, low) * mask[:, None]
        A = K_of(theta) + jax.vmap(jnp.diag)(noise.T)
        return jnp.sum(g * exact.MarginalGaussian(loc, A, mask if padded else None)
                       .log_prob(R))

    theta, loc = jnp.array([0.4, -0.3]), jnp.asarray(rng.normal(size=(C, N))) * mask
    np.testing.assert_allclose(two_level(theta, loc), per_class(theta, loc), rtol=1e-12)
    for a, b in zip(jax.grad(two_level, (0, 1))(theta, loc),
                    jax.grad(per_class, (0, 1))(theta, loc)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)
