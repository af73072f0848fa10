"""Collapsed sparse GP (Titsias bound, optimal q(u)), k-means++ and the sparse model specs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import toy_problem
from ppgpc.gp import exact, inducing, sparse
from ppgpc.gp.kernels import RBF, gram
from ppgpc.gp.kmeans import kmeans, kmeans_plus_plus_indices
from ppgpc.infer import fit, to_inference_data
from ppgpc.models import dirichlet_gp, ilr_gp, logistic_softmax, svgp as softmax_svgp

KERNEL = RBF(ard=True)
PARAMS = {"variance": jnp.asarray(2.0), "lengthscale": jnp.asarray([0.8, 1.3])}


@pytest.fixture(scope="module")
def problem():
    gen = np.random.default_rng(5)
    X = jnp.asarray(gen.uniform(-2, 2, size=(40, 2)))
    Y = jnp.asarray(np.stack([np.sin(2 * X[:, 0]), np.cos(X[:, 1]) * X[:, 0]], 1)
                    + 0.2 * gen.normal(size=(40, 2)))
    hetero = jnp.asarray(gen.uniform(0.02, 0.5, size=40))
    return X, Y, hetero


@pytest.mark.parametrize("noise", ["homoscedastic", "heteroscedastic"])
def test_bound_is_below_the_exact_evidence_and_tight_at_the_training_inputs(problem, noise):
    X, Y, hetero = problem
    noise_var = 0.05 if noise == "homoscedastic" else hetero
    full = float(exact.log_marginal_likelihood(gram(KERNEL, PARAMS, X), Y, noise_var))
    for M in (5, 20):
        bound = float(sparse.collapsed_bound(KERNEL, PARAMS, X, Y, X[:M], noise_var))
        assert bound < full
    at_X = float(sparse.collapsed_bound(KERNEL, PARAMS, X, Y, X, noise_var, kmm_jitter=0.0))
    assert at_X == pytest.approx(full, rel=1e-8)


def test_sparse_predictive_converges_to_the_exact_one(problem):
    X, Y, hetero = problem
    Xs = jnp.asarray(np.random.default_rng(1).uniform(-2, 2, size=(25, 2)))
    post = exact.condition(KERNEL, PARAMS, X, Y, hetero)
    mean, var = exact.predict(KERNEL, PARAMS, post, Xs)
    errors = []
    for M in (3, 10, 40):  # nested subsets of the training inputs, the last all of them
        Z = X[:M]
        q = sparse.condition(KERNEL, PARAMS, X, Y, Z, hetero, kmm_jitter=0.0)
        m, v = sparse.predict(KERNEL, PARAMS, q, Xs)
        errors.append(float(jnp.max(jnp.abs(m - mean)) + jnp.max(jnp.abs(v - var))))
    assert errors[0] > 0.1
    assert all(b < a for a, b in zip(errors, errors[1:])), errors
    assert errors[-1] < 1e-6


def test_kmeans_plus_plus_is_deterministic_per_key_and_picks_distinct_points():
    X = jnp.asarray(np.random.default_rng(0).normal(size=(60, 3)))
    a = np.asarray(kmeans_plus_plus_indices(jax.random.PRNGKey(7), X, 20))
    b = np.asarray(kmeans_plus_plus_indices(jax.random.PRNGKey(7), X, 20))
    c = np.asarray(kmeans_plus_plus_indices(jax.random.PRNGKey(8), X, 20))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert len(set(a.tolist())) == 20
    # duplicated rows: 5 distinct points repeated; 5 centres must be the 5 distinct points
    Xd = jnp.repeat(X[:5], 4, axis=0)
    idx = np.asarray(kmeans_plus_plus_indices(jax.random.PRNGKey(1), Xd, 5))
    assert len({tuple(np.asarray(Xd[i]).round(12)) for i in idx}) == 5
    with pytest.raises(ValueError, match="num_centers"):
        kmeans_plus_plus_indices(jax.random.PRNGKey(0), X, 61)
    # Lloyd refinement from the seeds does not increase the within-cluster sum of squares
    def sse(C):
        return float(jnp.sum(jnp.min(jnp.sum((X[:, None] - C[None]) ** 2, -1), 1)))
    assert sse(kmeans(jax.random.PRNGKey(7), X, 20, num_iters=5)) <= sse(X[a]) + 1e-12


def test_collapsed_ilr_learns_inducing_inputs_and_predicts():
    X, y = toy_problem(40, 3, seed=6)
    result = fit("ilr_gp_sparse", X, y, method="exact", num_draws=50,
                 model_options={"epsilon": 0.99, "num_inducing": 6, "seed": 2})
    Z = np.asarray(result.hypers["inducing_inputs"][0, 0])
    assert Z.shape == (6, 2)
    assert not np.allclose(Z, np.asarray(result.data.inducing_init))  # optimised
    assert result.latent is None and result.inducing.shape == (1, 50, 6, 2)
    probs = result.predict_proba(X)
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-12)
    assert np.mean(probs.argmax(1) == y) > 0.9


def test_two_level_noise_bound_equals_the_per_output_bound_in_value_and_gradient():
    """``collapsed_bound_two_level`` (GPD's structure: output l has noise ``noise_in[l]`` on
    its own group of points and ``noise_out[l]`` elsewhere) equals ``collapsed_bound`` summed
    over outputs with that (N,) noise, in value and in the gradients with respect to the
    kernel parameters, inducing inputs, targets and both noise vectors; one group is empty."""
    gen = np.random.default_rng(11)
    N, L, M = 30, 4, 6
    X = jnp.asarray(gen.normal(size=(N, 2)))
    Y = jnp.asarray(gen.normal(size=(N, L)))
    labels = gen.choice([0, 1, 3], size=N)                       # group 2 is empty
    sizes = tuple(int(n) for n in np.bincount(labels, minlength=L))
    Z = X[:M] + 0.1
    noise_in = jnp.asarray(gen.uniform(0.1, 0.4, L))
    noise_out = jnp.asarray(gen.uniform(1.0, 3.0, L))

    def two_level(params, Z, Y, noise_in, noise_out):
        return sparse.collapsed_bound_two_level(KERNEL, params, X, Y, Z, jnp.asarray(labels),
                                                sizes, noise_in, noise_out)

    def per_output(params, Z, Y, noise_in, noise_out):
        total = 0.0
        for l in range(L):
            noise = jnp.where(jnp.asarray(labels) == l, noise_in[l], noise_out[l])
            total = total + sparse.collapsed_bound(KERNEL, params, X, Y[:, l:l + 1], Z, noise)
        return total

    args = (PARAMS, Z, Y, noise_in, noise_out)
    value, grads = jax.value_and_grad(two_level, argnums=(0, 1, 2, 3, 4))(*args)
    want, want_grads = jax.value_and_grad(per_output, argnums=(0, 1, 2, 3, 4))(*args)
    assert float(value) == pytest.approx(float(want), rel=1e-11)
    for got, ref in zip(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(want_grads)):
        np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-10)
    with pytest.raises(ValueError, match="group_sizes .* sum to N = 30"):
        sparse.collapsed_bound_two_level(KERNEL, PARAMS, X, Y, Z, jnp.asarray(labels),
                                         (10, 10, 5, 4), noise_in, noise_out)


# ---------------------------------------------- one set of inducing inputs per output
def _distinct_sets(X, L, M):
    """L different (M, D) inducing sets: shifted subsets of the training inputs."""
    return jnp.stack([X[3 * l:3 * l + M] + 0.05 * l for l in range(L)])


def test_per_output_bound_is_the_sum_of_single_output_bounds(problem):
    """With distinct Z_l the per-output bound is sum_l F(y_l; Z_l); with every Z_l = Z it
    equals the shared bound in value and gradient; with every Z_l = X (no K_mm jitter) it
    equals the exact evidence; with M < N it is below it."""
    X, Y, hetero = problem
    L = Y.shape[1]
    Zs = _distinct_sets(X, L, 8)
    got = float(sparse.collapsed_bound_per_output(KERNEL, PARAMS, X, Y, Zs, hetero))
    want = sum(float(sparse.collapsed_bound(KERNEL, PARAMS, X, Y[:, l:l + 1], Zs[l], hetero))
               for l in range(L))
    assert got == pytest.approx(want, rel=1e-12)
    full = float(exact.log_marginal_likelihood(gram(KERNEL, PARAMS, X), Y, hetero))
    assert got < full
    at_X = sparse.collapsed_bound_per_output(KERNEL, PARAMS, X, Y, jnp.stack([X] * L), hetero,
                                             kmm_jitter=0.0)
    assert float(at_X) == pytest.approx(full, rel=1e-8)

    Z = X[:8] + 0.1
    per = jax.value_and_grad(lambda p, Z: sparse.collapsed_bound_per_output(
        KERNEL, p, X, Y, jnp.stack([Z] * L), 0.05), argnums=(0, 1))
    shared = jax.value_and_grad(lambda p, Z: sparse.collapsed_bound(KERNEL, p, X, Y, Z, 0.05),
                                argnums=(0, 1))
    (v1, g1), (v2, g2) = per(PARAMS, Z), shared(PARAMS, Z)
    assert float(v1) == pytest.approx(float(v2), rel=1e-12)
    for a, b in zip(jax.tree_util.tree_leaves(g1), jax.tree_util.tree_leaves(g2)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
    with pytest.raises(ValueError, match=r"\(L, M, D\) with L = 2"):
        sparse.collapsed_bound_per_output(KERNEL, PARAMS, X, Y, Zs[:1], 0.05)


def test_per_output_noise_scales_multiply_each_outputs_noise(problem):
    """noise_scale s (L,): output l's bound and q(u_l) use s_l times the noise variance."""
    X, Y, hetero = problem
    Zs = _distinct_sets(X, 2, 8)
    s = jnp.asarray([0.3, 2.5])
    got = float(sparse.collapsed_bound_per_output(KERNEL, PARAMS, X, Y, Zs, hetero,
                                                  noise_scale=s))
    want = sum(float(sparse.collapsed_bound(KERNEL, PARAMS, X, Y[:, l:l + 1], Zs[l],
                                            s[l] * hetero)) for l in range(2))
    assert got == pytest.approx(want, rel=1e-12)
    q = sparse.condition_per_output(KERNEL, PARAMS, X, Y, Zs, hetero, noise_scale=s)
    mean, var = sparse.predict_per_output(KERNEL, PARAMS, q, X[:5])
    for l in range(2):
        one = sparse.condition(KERNEL, PARAMS, X, Y[:, l:l + 1], Zs[l], s[l] * hetero)
        m, v = sparse.predict(KERNEL, PARAMS, one, X[:5])
        np.testing.assert_allclose(mean[:, l], m[:, 0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(var[:, l], v, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match=r"noise_scale must be a scalar or \(2,\)"):
        sparse.collapsed_bound_per_output(KERNEL, PARAMS, X, Y, Zs, hetero,
                                          noise_scale=jnp.ones(3))


def test_per_output_noise_columns_and_kernels_are_each_outputs_own(problem):
    """noise_var (N, L) gives output l the column noise[:, l]; params with a leading output
    axis (params_per_output=True) give it kernel l. The bound, q(u_l) and its predictive
    are then each output's single-output ones."""
    X, Y, hetero = problem
    L = Y.shape[1]
    Zs = _distinct_sets(X, L, 8)
    noise = jnp.stack([hetero, 0.1 + hetero[::-1]], axis=1)                       # (N, L)
    s = jnp.asarray([0.5, 2.0])
    per = {"variance": jnp.asarray([2.0, 0.7]), "lengthscale": jnp.asarray([[0.8, 1.3],
                                                                            [1.5, 0.4]])}
    one_params = [{k: v[l] for k, v in per.items()} for l in range(L)]
    got = float(sparse.collapsed_bound_per_output(KERNEL, per, X, Y, Zs, noise, noise_scale=s,
                                                  params_per_output=True))
    want = sum(float(sparse.collapsed_bound(KERNEL, one_params[l], X, Y[:, l:l + 1], Zs[l],
                                            s[l] * noise[:, l])) for l in range(L))
    assert got == pytest.approx(want, rel=1e-12)

    Xs = X[:5] + 0.3
    q = sparse.condition_per_output(KERNEL, per, X, Y, Zs, noise, noise_scale=s,
                                    params_per_output=True)
    mean, var = sparse.predict_per_output(KERNEL, per, q, Xs, params_per_output=True)
    for l in range(L):
        one = sparse.condition(KERNEL, one_params[l], X, Y[:, l:l + 1], Zs[l],
                               s[l] * noise[:, l])
        m, v = sparse.predict(KERNEL, one_params[l], one, Xs)
        np.testing.assert_allclose(mean[:, l], m[:, 0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(var[:, l], v, rtol=1e-10, atol=1e-12)
    shared = sparse.collapsed_bound_per_output(KERNEL, PARAMS, X, Y, Zs, noise)
    assert float(shared) != pytest.approx(float(sparse.collapsed_bound_per_output(
        KERNEL, PARAMS, X, Y, Zs, hetero)), rel=1e-6)  # the second column is used
    with pytest.raises(ValueError, match=r"per-output noise_var must be \(N, L\) = \(40, 2\)"):
        sparse.collapsed_bound_per_output(KERNEL, PARAMS, X, Y, Zs, jnp.ones((40, 3)))


def test_per_output_predictive_is_each_outputs_own_and_exact_at_the_training_inputs(problem):
    X, Y, hetero = problem
    L = Y.shape[1]
    Xs = jnp.asarray(np.random.default_rng(2).uniform(-2, 2, size=(15, 2)))
    Zs = _distinct_sets(X, L, 8)
    q = sparse.condition_per_output(KERNEL, PARAMS, X, Y, Zs, hetero)
    assert q.c.shape == (L, 8, 1) and q.jitter.shape == ()
    mean, var = sparse.predict_per_output(KERNEL, PARAMS, q, Xs)
    assert mean.shape == var.shape == (15, L)
    for l in range(L):
        one = sparse.condition(KERNEL, PARAMS, X, Y[:, l:l + 1], Zs[l], hetero)
        m, v = sparse.predict(KERNEL, PARAMS, one, Xs)
        np.testing.assert_allclose(mean[:, l], m[:, 0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(var[:, l], v, rtol=1e-10, atol=1e-12)
    assert not np.allclose(var[:, 0], var[:, 1])  # the outputs' own inducing inputs
    exact_mean, exact_var = exact.predict(KERNEL, PARAMS, exact.condition(KERNEL, PARAMS, X, Y, hetero),
                                       Xs)
    qX = sparse.condition_per_output(KERNEL, PARAMS, X, Y, jnp.stack([X] * L), hetero,
                                     kmm_jitter=0.0)
    m, v = sparse.predict_per_output(KERNEL, PARAMS, qX, Xs)
    np.testing.assert_allclose(m, exact_mean, atol=1e-6)
    np.testing.assert_allclose(v, np.broadcast_to(np.asarray(exact_var)[:, None], v.shape),
                               atol=1e-6)


def test_collapsed_ilr_with_inducing_inputs_per_coordinate():
    """``shared_inducing=False``: (C-1, M, D) inducing inputs, each set optimised from its
    own k-means++ start; predictions normalised and accurate; the ArviZ ``u`` of latent c
    is drawn at latent c's own inputs (its mean over draws within 5 Monte Carlo s.e. of the
    predictive mean there)."""
    X, y = toy_problem(40, 3, seed=6)
    result = fit("ilr_gp_sparse", X, y, method="exact", num_draws=400,
                 model_options={"epsilon": 0.99, "num_inducing": 6, "seed": 2,
                                "shared_inducing": False})
    init = np.asarray(result.data.inducing_init)
    assert init.shape == (2, 6, 2) and not np.allclose(init[0], init[1])
    Z = np.asarray(result.hypers["inducing_inputs"][0, 0])
    assert Z.shape == (2, 6, 2) and not np.allclose(Z, init)
    assert result.latent is None and result.inducing.shape == (1, 400, 6, 2)
    probs = result.predict_proba(X)
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-12)
    assert np.mean(probs.argmax(1) == y) > 0.9
    idata = to_inference_data(result)
    assert idata.constant_data["inducing_inputs"].dims == ("latent", "inducing", "feature")
    u = idata.posterior["u"].values                                  # (4, 100, M, L)
    assert u.shape == (4, 100, 6, 2)
    u = u.reshape((1, 400, 6, 2))            # the 4 chains in order: the fit's one chain
    for c in range(2):
        draws = np.asarray(result.predict_latent(Z[c]))[0, :, :, c]      # (400, M)
        se = draws.std(0) / np.sqrt(u.shape[1])
        assert np.all(np.abs(u[0, :, :, c].mean(0) - draws.mean(0)) < 5 * np.sqrt(2) * se)


def _gpd_bound(data, hypers):
    import functools

    from numpyro.infer.util import log_density

    from ppgpc.models import dirichlet_gp

    _, tr = log_density(functools.partial(dirichlet_gp.sparse_collapsed_model, data, KERNEL),
                        (), {}, hypers)
    site = tr["collapsed_bound"]
    return float(jnp.sum(site["fn"].log_prob(site["value"])))


def _np_rbf(A, B, variance, lengthscale):
    """The ARD RBF kernel s^2 exp(-|(a - b) / l|^2 / 2) in NumPy (docs/math.md section 0)."""
    d = (np.asarray(A)[:, None, :] - np.asarray(B)[None, :, :]) / np.asarray(lengthscale)
    return float(variance) * np.exp(-0.5 * np.sum(d * d, axis=-1))


def _np_titsias(X, Z, y, noise, variance, lengthscale, kmm_jitter=1e-6):
    """Titsias's bound of one output written out densely:
    log N(y | 0, Q_nn + diag(noise)) - tr(diag(noise)^-1 (K_nn - Q_nn)) / 2, with
    Q_nn = K_nm K_mm^-1 K_mn and K_mm carrying ppgpc's fixed jitter (1e-6 times the kernel
    variance, ``ppgpc.gp.sparse.DEFAULT_KMM_JITTER``)."""
    K = _np_rbf(X, X, variance, lengthscale)
    K_nm = _np_rbf(X, Z, variance, lengthscale)
    K_mm = _np_rbf(Z, Z, variance, lengthscale) + kmm_jitter * variance * np.eye(len(Z))
    Q = K_nm @ np.linalg.solve(K_mm, K_nm.T)
    cov = Q + np.diag(noise)
    _, logdet = np.linalg.slogdet(cov)
    log_normal = -0.5 * (len(y) * np.log(2 * np.pi) + logdet + y @ np.linalg.solve(cov, y))
    return log_normal - 0.5 * np.sum((np.diag(K) - np.diag(Q)) / noise)


def _np_ilr_targets(y, C, epsilon):
    """ILR targets ilr(p^(y_i)), p^(k) = epsilon e_k + (1 - epsilon) / C, with the Helmert
    basis V of docs/math.md section 1: (N, C-1)."""
    V = np.zeros((C, C - 1))
    for j in range(1, C):
        V[:j, j - 1] = 1 / np.sqrt(j * (j + 1))
        V[j, j - 1] = -j / np.sqrt(j * (j + 1))
    P = epsilon * np.eye(C) + (1 - epsilon) / C
    return (np.log(P) @ V)[np.asarray(y)]


def _model_factor(module, data, hypers):
    """The value of a sparse model's ``collapsed_bound`` factor at the given sites."""
    import functools

    from numpyro.infer.util import log_density

    _, tr = log_density(functools.partial(module.sparse_collapsed_model, data, KERNEL), (), {},
                        hypers)
    site = tr["collapsed_bound"]
    return float(jnp.sum(site["fn"].log_prob(site["value"])))


@pytest.mark.parametrize("shared_inducing", [True, False])
def test_collapsed_ilr_bound_equals_the_dense_formula(shared_inducing):
    """Collapsed-ILR's factor is Titsias's bound (docs/math.md section 1) written out here
    with dense NumPy matrices: sum_d log N(z_d | 0, Q_nn + s sigma^2 I)
    - (C - 1) tr(K_nn - Q_nn) / (2 s sigma^2), to 1e-8 (relative); the ILR targets and
    Proposition 1's sigma^2 = (delta / (2 Phi^-1(1 - tau / (C - 1))))^2 are recomputed here
    too. With one inducing set per coordinate, coordinate d uses its own Z_d and scale s_d."""
    from scipy.stats import norm

    X, y = toy_problem(30, 3, seed=2)
    C, epsilon, tau, variance, ls = 3, 0.99, 0.05, 3.0, np.array([0.7, 1.4])
    base = ilr_gp.prepare(X, y, C, epsilon=epsilon, tau=tau, learn_noise_scale=True)
    targets = _np_ilr_targets(y, C, epsilon)
    delta = np.sqrt(2) * np.log1p(C * epsilon / (1 - epsilon))
    sigma2 = (delta / (2 * norm.ppf(1 - tau / (C - 1)))) ** 2
    gen = np.random.default_rng(3)
    if shared_inducing:
        Z, scale = gen.uniform(-2, 2, size=(6, 2)), np.array(0.4)
        Zs, scales = [Z, Z], [0.4, 0.4]
    else:
        Z, scale = gen.uniform(-2, 2, size=(C - 1, 6, 2)), np.array([0.4, 1.7])
        Zs, scales = list(Z), list(scale)
    hypers = {"kernel_variance": jnp.asarray(variance), "kernel_lengthscale": jnp.asarray(ls),
              "noise_scale": jnp.asarray(scale), "inducing_inputs": jnp.asarray(Z)}
    got = _model_factor(ilr_gp, sparse.SparseData(base, jnp.asarray(Z)), hypers)
    want = sum(_np_titsias(X, Zs[d], targets[:, d], np.full(len(y), scales[d] * sigma2),
                           variance, ls) for d in range(C - 1))
    assert got == pytest.approx(want, rel=1e-8), f"model bound {got!r}, dense formula {want!r}"


@pytest.mark.parametrize("shared_kernel, shared_inducing", [(True, True), (False, True),
                                                            (True, False)])
def test_sparse_gpd_bound_equals_the_dense_formula(shared_kernel, shared_inducing):
    """The sparse GPD factor is the sum over classes of Titsias's bound with the class's
    noise (docs/math.md section 2), written out here with dense NumPy matrices:
    sum_c log N(t_c - mean_c | 0, Q_nn + diag(s_c s2_c))
    - tr(diag(s_c s2_c)^-1 (K_nn - Q_nn)) / 2, with alpha_ic = alpha_eps + [y_i = c],
    s2_ic = log(1 / alpha_ic + 1) and t_ic = log alpha_ic - s2_ic / 2 recomputed here; to
    1e-8 (relative). Cases: one kernel (the two-level sums of ``collapsed_bound_two_level``),
    one kernel per class, and one inducing set per class."""
    X, y = toy_problem(30, 3, seed=2)
    C, alpha_eps = 3, 0.05
    base = dirichlet_gp.prepare(X, y, C, alpha_eps=alpha_eps, shared_kernel=shared_kernel,
                                learn_noise_scale=True)
    alpha = alpha_eps + np.eye(C)[y]
    s2 = np.log(1 / alpha + 1)
    t = np.log(alpha) - s2 / 2
    gen = np.random.default_rng(4)
    if shared_kernel:
        variance, ls = np.full(C, 1.7), np.tile([0.9, 1.4], (C, 1))
        kernel_sites = {"kernel_variance": jnp.asarray(1.7),
                        "kernel_lengthscale": jnp.asarray([0.9, 1.4])}
    else:
        variance, ls = np.array([1.7, 0.8, 2.2]), np.array([[0.9, 1.4], [1.1, 0.6], [0.7, 0.7]])
        kernel_sites = {"kernel_variance": jnp.asarray(variance),
                        "kernel_lengthscale": jnp.asarray(ls)}
    Z = gen.uniform(-2, 2, size=(6, 2) if shared_inducing else (C, 6, 2))
    Zs = [Z] * C if shared_inducing else list(Z)
    mean, scale = np.array([-0.3, 0.1, 0.2]), np.array([0.5, 1.0, 2.0])
    hypers = {**kernel_sites, "mean": jnp.asarray(mean), "noise_scale": jnp.asarray(scale),
              "inducing_inputs": jnp.asarray(Z)}
    got = _model_factor(dirichlet_gp, sparse.SparseData(base, jnp.asarray(Z)), hypers)
    want = sum(_np_titsias(X, Zs[c], t[:, c] - mean[c], scale[c] * s2[:, c], variance[c], ls[c])
               for c in range(C))
    assert got == pytest.approx(want, rel=1e-8), f"model bound {got!r}, dense formula {want!r}"


@pytest.mark.parametrize("shared_kernel", [True, False])
def test_sparse_gpd_with_inducing_inputs_per_class_is_the_sum_of_class_bounds(shared_kernel):
    """Sparse GPD with (C, M, D) inducing inputs: the factor is the sum over classes of the
    single-output bound of class c's residual at Z_c with its own noise s2_:c times its
    learned scale; with every Z_c = Z it equals the shared-inducing model's factor."""
    from ppgpc.models import dirichlet_gp

    X, y = toy_problem(30, 3, seed=4)
    base = dirichlet_gp.prepare(X, y, 3, alpha_eps=0.05, shared_kernel=shared_kernel,
                                learn_noise_scale=True)
    C = 3
    gen = np.random.default_rng(8)
    Zs = jnp.asarray(gen.uniform(-2, 2, size=(C, 5, 2)))
    variance, ls = jnp.asarray(1.7), jnp.asarray([0.9, 1.4])
    if not shared_kernel:
        variance, ls = jnp.asarray([1.7, 0.8, 2.2]), jnp.asarray([[0.9, 1.4], [1.1, 0.6],
                                                                  [0.7, 0.7]])
    hypers = {"kernel_variance": variance, "kernel_lengthscale": ls,
              "mean": jnp.asarray([-0.3, 0.1, 0.2]), "noise_scale": jnp.asarray([0.5, 1.0, 2.0]),
              "inducing_inputs": Zs}
    got = _gpd_bound(sparse.SparseData(base, Zs), hypers)
    want = 0.0
    for c in range(C):
        params = {"variance": variance if shared_kernel else variance[c],
                  "lengthscale": ls if shared_kernel else ls[c]}
        resid = base.targets[:, c:c + 1] - hypers["mean"][c]
        want += float(sparse.collapsed_bound(KERNEL, params, base.X, resid, Zs[c],
                                             base.noise_var[:, c] * hypers["noise_scale"][c]))
    assert got == pytest.approx(want, rel=1e-10)
    same = jnp.stack([Zs[0]] * C)
    shared = _gpd_bound(sparse.SparseData(base, Zs[0]), {**hypers, "inducing_inputs": Zs[0]})
    assert _gpd_bound(sparse.SparseData(base, same),
                      {**hypers, "inducing_inputs": same}) == pytest.approx(shared, rel=1e-9)


def test_sparse_gpd_with_inducing_inputs_per_class_fits_and_predicts(tmp_path):
    """``shared_inducing=False`` for sparse GPD: (C, M, D) inducing inputs, each set moved
    from its own k-means++ start; the predictive equals each class's own sparse predictive
    (plus its mean); accurate normalised predictions; the ArviZ ``u`` of class c is drawn at
    class c's inputs (its mean over 400 draws within 5 Monte Carlo s.e. of the predictive
    mean there); the estimator passes the option on, saves and loads it bit for bit, and
    refuses it for exact inference."""
    from ppgpc import DirichletGPClassifier

    X, y = toy_problem(40, 3, seed=6)
    result = fit("dirichlet_gp_sparse", X, y, method="exact", num_draws=400,
                 model_options={"alpha_eps": 0.05, "num_inducing": 6, "seed": 2,
                                "shared_inducing": False})
    init = np.asarray(result.data.inducing_init)
    Z = np.asarray(result.hypers["inducing_inputs"][0, 0])
    assert Z.shape == init.shape == (3, 6, 2)
    assert not np.allclose(init[0], init[1]) and not np.allclose(Z, init)
    hypers = result.hyper_draw(0, 0)
    q = result.spec.conjugate.condition(result.data, result.kernel, hypers)
    Xs = jnp.asarray(X[:7])
    mean, var = result.spec.conjugate.predict(result.data, result.kernel, hypers, q, Xs)
    params = {"variance": hypers["kernel_variance"], "lengthscale": hypers["kernel_lengthscale"]}
    resid = result.data.base.targets - hypers["mean"][None, :]
    from ppgpc.models import dirichlet_gp

    noise = dirichlet_gp.noise_var(result.data.base, hypers)
    for c in range(3):
        one = sparse.condition(KERNEL, params, result.data.X, resid[:, c:c + 1], Z[c],
                               noise[:, c])
        m, v = sparse.predict(KERNEL, params, one, Xs)
        np.testing.assert_allclose(mean[:, c], m[:, 0] + hypers["mean"][c], rtol=1e-9)
        np.testing.assert_allclose(var[:, c], v, rtol=1e-9)
    probs = result.predict_proba(X)
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-12)
    assert np.mean(probs.argmax(1) == y) > 0.9
    u = to_inference_data(result).posterior["u"].values             # (4, 100, M, C)
    assert u.shape == (4, 100, 6, 3)
    u = u.reshape((1, 400, 6, 3))            # the 4 chains in order: the fit's one chain
    for c in range(3):
        draws = np.asarray(result.predict_latent(Z[c]))[0, :, :, c]      # (400, M)
        se = draws.std(0) / np.sqrt(u.shape[1])
        assert np.all(np.abs(u[0, :, :, c].mean(0) - draws.mean(0)) < 5 * np.sqrt(2) * se)
    clf = DirichletGPClassifier(alpha_eps=0.05, inference="collapsed", num_inducing=6,
                                shared_inducing=False, learn_noise_scale=True).fit(X, y)
    assert np.asarray(clf.result_.hypers["inducing_inputs"]).shape[2:] == (3, 6, 2)
    assert clf.noise_scale_.shape == (3,)
    clf.save(tmp_path / "gpd")
    back = DirichletGPClassifier.load(tmp_path / "gpd")
    assert back.shared_inducing is False
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))
    with pytest.raises(ValueError, match="applies to inference='collapsed'"):
        DirichletGPClassifier(alpha_eps=0.05, shared_inducing=False).fit(X, y)


@pytest.mark.parametrize("shared_inducing", [True, False])
def test_sparse_gpd_arviz_u_is_the_latent_without_pseudo_observation_noise(shared_inducing):
    """With ``predict_from="noisy"`` the predictive adds each class's pseudo-observation
    noise (the latent draws at new inputs have the noisy predictive's variance), but the
    ArviZ ``u`` is the latent at the inducing inputs: over 4000 draws its mean and variance
    match the noiseless predictive there (mean within 5 Monte Carlo s.e., variance ratio
    within 5 s.d. of the sample variance, sqrt(2 / (S - 1))), well below the noisy one."""
    X, y = toy_problem(40, 3, seed=6)
    S = 4000
    result = fit("dirichlet_gp_sparse", X, y, method="exact", num_draws=S,
                 model_options={"alpha_eps": 0.05, "num_inducing": 6, "seed": 2,
                                "predict_from": "noisy", "shared_inducing": shared_inducing})
    hypers = result.hyper_draw(0, 0)
    q = result.spec.conjugate.condition(result.data, result.kernel, hypers)
    Z = np.asarray(hypers["inducing_inputs"])
    u = to_inference_data(result).posterior["u"].values                 # (4, S / 4, M, C)
    assert u.shape == (4, S // 4, 6, 3)
    u = u.reshape((1, S, 6, 3))              # the 4 chains in order: the fit's one chain
    for c in range(3):
        own = Z if shared_inducing else Z[c]
        mean, var = dirichlet_gp._sparse_latent(result.data, result.kernel, hypers, q, own)
        m_noisy, v_noisy = result.spec.conjugate.predict(result.data, result.kernel, hypers, q,
                                                         own)
        np.testing.assert_allclose(mean[:, c], m_noisy[:, c], rtol=1e-9)
        assert np.all(v_noisy[:, c] > var[:, c] + 0.5)
        se = np.sqrt(np.asarray(var[:, c]) / S)
        assert np.all(np.abs(u[0, :, :, c].mean(0) - mean[:, c]) < 5 * se)
        ratio = u[0, :, :, c].var(0, ddof=1) / np.asarray(var[:, c])
        assert np.all(np.abs(ratio - 1.0) < 5 * np.sqrt(2.0 / (S - 1)))
        draws = np.asarray(result.predict_latent(own))[0, :, :, c]          # (S, M)
        ratio = draws.var(0, ddof=1) / np.asarray(v_noisy[:, c])
        assert np.all(np.abs(ratio - 1.0) < 5 * np.sqrt(2.0 / (S - 1)))


def test_map_outputs_matches_vmap_with_mixed_axes():
    """map_outputs (one output at a time) gives vmap's result, arguments with and without
    an output axis mixed, pytree arguments included."""
    rng = np.random.default_rng(0)
    params = {"a": jnp.asarray(rng.normal(size=(3, 2))), "b": jnp.asarray(rng.normal(size=3))}
    shared = jnp.asarray(rng.normal(size=(4, 2)))
    per_output = jnp.asarray(rng.normal(size=(3, 4)))

    def fn(p, x, y):
        return x @ p["a"] * p["b"] + y

    for axes in [(0, None, 0), (None, None, 0), (0, None, None)]:
        args = (params if axes[0] == 0 else jax.tree.map(lambda v: v[0], params), shared,
                per_output if axes[2] == 0 else per_output[0])
        np.testing.assert_array_equal(sparse.map_outputs(fn, axes)(*args),
                                      jax.vmap(fn, in_axes=axes)(*args))


def test_map_outputs_rejects_other_axes_and_argument_counts():
    with pytest.raises(ValueError, match=r"in_axes must be 0 or None, got \(0, 1\)"):
        sparse.map_outputs(lambda x, y: x + y, (0, 1))
    mapped = sparse.map_outputs(lambda x, y: x + y, (0, None))
    with pytest.raises(TypeError, match="expected 2 arguments .* got 3"):
        mapped(jnp.ones((2, 3)), jnp.ones(3), jnp.ones(3))


# ------------------------------------------------------ the one rule for the number M
def test_resolve_num_inducing_default_and_the_rule_above_n():
    """None is min(DEFAULT_NUM_INDUCING, N); an integer M in 1..N is kept; M > N and
    non-integers are refused with messages that name the values."""
    assert inducing.DEFAULT_NUM_INDUCING == 200
    assert inducing.resolve_num_inducing(None, 50) == 50
    assert inducing.resolve_num_inducing(None, 5000) == 200
    assert inducing.resolve_num_inducing(30, 50) == 30
    assert inducing.resolve_num_inducing(50, 50) == 50
    with pytest.raises(ValueError, match="num_inducing M = 51 exceeds the number of training "
                                         "points N = 50"):
        inducing.resolve_num_inducing(51, 50)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="num_inducing must be a positive integer"):
            inducing.resolve_num_inducing(bad, 50)


def test_every_sparse_model_applies_the_same_rule():
    """The collapsed sparse models, the SVGP and the sparse CAVI all take M from
    ``resolve_num_inducing``: min(200, N) by default, M > N refused with the same message."""
    X, y = toy_problem(24, 3, seed=1)
    prepares = (ilr_gp.sparse_prepare, dirichlet_gp.sparse_prepare, softmax_svgp.prepare)
    for prepare in prepares:
        data = prepare(X, y, 3)
        assert data.inducing_init.shape == (24, 2), prepare
        assert prepare(X, y, 3, num_inducing=5).inducing_init.shape == (5, 2)
        with pytest.raises(ValueError, match="num_inducing M = 25 exceeds .* N = 24"):
            prepare(X, y, 3, num_inducing=25)
    data = logistic_softmax.prepare(X, y, 3)
    hypers = {"kernel_variance": jnp.asarray(1.0), "kernel_lengthscale": jnp.asarray(1.0)}
    with pytest.raises(ValueError, match="num_inducing M = 25 exceeds .* N = 24"):
        logistic_softmax.fit_cavi(data, RBF(ard=False), hypers, num_inducing=25, max_iter=1)
    full = logistic_softmax.fit_cavi(data, RBF(ard=False), hypers, num_inducing=24, max_iter=1)
    assert not full.sparse  # M = N: the inducing inputs are the training inputs


def test_per_output_inducing_inputs_start_from_distinct_streams():
    """shared_inducing=False: set l starts from k-means++ with fold_in(PRNGKey(seed), l), so
    the sets differ from each other and are fixed by the seed."""
    X, y = toy_problem(30, 4, seed=2)
    a = ilr_gp.sparse_prepare(X, y, 4, num_inducing=6, seed=3, shared_inducing=False)
    b = ilr_gp.sparse_prepare(X, y, 4, num_inducing=6, seed=3, shared_inducing=False)
    Z = np.asarray(a.inducing_init)
    assert Z.shape == (3, 6, 2)
    np.testing.assert_array_equal(Z, b.inducing_init)
    assert not np.allclose(Z[0], Z[1]) and not np.allclose(Z[1], Z[2])
