"""Training data padded to fixed sizes change nothing (``ppgpc.runtime.padding``).

The driver fits a model with a ``pad`` function on its data padded to ``bucket(N)`` rows.
Each test fits the same data twice, with the model's spec as registered and with a copy
whose ``pad`` is None (fitted at its own N, as before padding existed), and compares:

* ``exact`` and ``map`` (deterministic given the key): hyperparameters, the optimiser's
  objective, predictions and the closed-form leave-one-out predictive, to 1e-10 relative,
  and the draws of the latent at the training inputs to 1e-8 (they go through the factor
  of the noise-free Gram matrix, whose condition number reaches 1e11);
* ``cavi`` (the logistic-softmax GP's full CAVI): as the point fits;
* ``nuts``: the padded rows change the floating-point rounding of the log-density (the
  collapsed form) or add independent standard-normal coordinates to the sampler (the
  latent form), so the chains are not the same draws. The density NUTS samples and its
  gradient are compared at random points, for every model and form; one fit's posteriors
  are compared entry by entry with Monte Carlo standard errors
  (``conftest.compare_samplers``).

And the point of padding: a second fit at another N of the same bucket compiles nothing.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from compile_count import count_compilations
from conftest import compare_samplers, toy_problem
from ppgpc.models.svgp import variational as svgp_schedule
from ppgpc import ConvergenceWarning
from ppgpc.infer import fit
from ppgpc.infer.loo import loo_latent
from ppgpc.models import get_spec
from ppgpc.runtime import padding

PADDED_MODELS = ("ilr_gp", "dirichlet_gp")

MODEL_OPTIONS = {
    "ilr_gp": [{}, {"learn_noise_scale": True}],
    "dirichlet_gp": [{}, {"learn_noise_scale": True, "shared_kernel": False,
                          "predict_from": "noisy"}],
}
"""Model options of the point-fit comparisons. A learned noise scale is compared under
type-II MAP only: under type-II ML its optimum is degenerate on these data (the scale runs
towards zero, 5e-5 for ILR, along a flat ridge), where rounding differences of 1e-16 move
where L-BFGS stops by 1e-10 relative."""


def _relative(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _unpadded(spec):
    return dataclasses.replace(spec, pad=None)


# ------------------------------------------------------------------ buckets
def test_buckets_hold_every_size_with_bounded_padding():
    sizes = np.arange(1, 5000)
    buckets = np.array([padding.bucket(n) for n in sizes])
    assert np.all(buckets >= sizes) and np.all(np.diff(buckets) >= 0)
    assert np.all(buckets[sizes <= 64] == 64)
    middle = (sizes > 64) & (sizes <= padding.FINE_ABOVE)
    assert np.max(buckets[middle] / sizes[middle]) <= 1.25
    assert np.max(buckets[sizes > padding.FINE_ABOVE] / sizes[sizes > padding.FINE_ABOVE]) \
        <= 1.125
    assert padding.bucket(1000) == 1008 and padding.bucket(2000) == 2016
    assert padding.bucket(1010) == 1024 and padding.bucket(2020) == 2048
    assert len({padding.bucket(n) for n in range(20, 2001)}) == 27


def test_padded_rows_are_a_decoupled_identity_block():
    K = np.array([[2.0, 0.5], [0.5, 1.5]])
    mask = padding.row_mask(2, 4)
    full = np.zeros((4, 4))
    full[:2, :2] = 1.0 + K
    masked = np.asarray(padding.mask_gram(full, mask))
    np.testing.assert_array_equal(masked[:2, :2], 1.0 + K)
    np.testing.assert_array_equal(masked[2:, 2:], np.eye(2))
    np.testing.assert_array_equal(masked[:2, 2:], 0.0)


def test_padded_rows_take_no_jitter():
    """A singular Gram matrix (a repeated input) needs jitter: padded, its real rows get
    the jitter the unpadded matrix gets (scaled by their own mean diagonal), and the
    padded identity block stays exact."""
    from ppgpc.gp import linalg

    x = np.array([0.0, 0.0, 1.0, 2.5])
    K = 3.0 * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2)
    mask = padding.row_mask(4, 7)
    padded = padding.mask_gram(np.pad(K, ((0, 3), (0, 3))), mask)
    plain = linalg.cholesky(K)
    factor = linalg.cholesky(padded, rows=mask)
    assert float(plain.jitter) > 0.0
    assert float(factor.jitter) == float(plain.jitter)
    np.testing.assert_allclose(factor.factor[:4, :4], plain.factor, rtol=1e-12, atol=0.0)
    np.testing.assert_array_equal(factor.factor[4:, 4:], np.eye(3))
    np.testing.assert_array_equal(factor.factor[4:, :4], 0.0)


# ------------------------------------------------------------------ point fits
@pytest.mark.parametrize("method", ["exact", "map"])
@pytest.mark.parametrize("model", PADDED_MODELS)
def test_point_fits_equal_the_unpadded_fit(model, method):
    X, y = toy_problem(37, 3, seed=4)
    Xs = toy_problem(9, 3, seed=5)[0]
    spec = get_spec(model)
    assert padding.bucket(37) == 64
    for options in MODEL_OPTIONS[model]:
        if method == "exact" and options.get("learn_noise_scale"):
            continue
        padded = fit(spec, X, y, method=method, num_draws=50, model_options=options)
        plain = fit(_unpadded(spec), X, y, method=method, num_draws=50,
                    model_options=options)
        assert padded.latent.shape == plain.latent.shape == (1, 50, 37, padded.latent.shape[-1])
        # the two objectives agree to rounding (1e-15 relative); L-BFGS carries that along
        # its path, most where the problem is worst conditioned: GPD's per-class kernels with
        # learned noise scales stop on the relative objective change after 35 iterations,
        # at gradient 1e-3, with hyperparameters 1.5e-10 apart, and the predictions, smooth
        # in them, inherit that (a padding error, such as a padded row entering the
        # likelihood, moves both by 1e-2 or more)
        fitted = 1e-9
        for site, value in plain.hypers.items():
            assert _relative(padded.hypers[site], value) < fitted, (options, site)
        assert padded.info.optimizer.objective == plain.info.optimizer.objective == (
            "log_posterior" if method == "map" else "log_marginal_likelihood")
        assert abs(padded.info.optimizer.value - plain.info.optimizer.value) < 1e-10 * abs(
            plain.info.optimizer.value)
        # the draws pass through the Cholesky factor of the noise-free Gram matrix
        # (Matheron's rule), whose condition number reaches 2e11 here (GPD's per-class
        # kernels): rounding of 1e-16 differs between the two factorisations by up to that
        assert _relative(padded.latent, plain.latent) < 1e-8, options
        assert _relative(padded.predict_proba(Xs), plain.predict_proba(Xs)) < fitted
        for a, b in zip(loo_latent(padded), loo_latent(plain)):
            assert _relative(a, b) < fitted, options


def _repeated_rows():
    """(X (37, 2), y (37,)): 20 points and 17 of them again, so every Gram matrix of the
    training inputs is singular and its factorisation needs jitter."""
    X, y = toy_problem(20, 3, seed=4)
    return np.concatenate([X, X[:17]]), np.concatenate([y, y[:17]])


SINGULAR_HYPERS = {"kernel_variance": 3.0, "kernel_lengthscale": np.array([0.8, 1.2])}
"""Kernel variance 3 against the padded identity block's 1: a jitter scaled by the mean
diagonal of every row, padded ones included, would differ from the unpadded one."""


@pytest.mark.parametrize("model", ["ilr_gp", "dirichlet_gp", "logistic_softmax",
                                   "softmax_svgp"])
def test_a_singular_prior_is_jittered_as_unpadded_through_the_model(model):
    """The model's own factor of its prior covariance (``Latent.prior_factor``, which NUTS
    and Gibbs use) on padded data: the real rows get the jitter they get unpadded, and
    their factor is the unpadded one."""
    from ppgpc.gp.kernels import make_kernel

    X, y = _repeated_rows()
    spec = get_spec(model)
    options = {"num_inducing": 1, "seed": 0} if spec.seeded_prepare else {}
    data = spec.prepare(X, y, 3, **options)
    kernel = make_kernel("rbf-ard")
    hypers = {**spec.initial_hypers(data, kernel), **SINGULAR_HYPERS}
    plain = spec.latent.prior_factor(data, kernel, hypers)
    padded = spec.latent.prior_factor(spec.pad(data, padding.bucket(37)), kernel, hypers)
    assert float(np.max(plain.jitter)) > 0.0
    np.testing.assert_allclose(np.max(padded.jitter), np.max(plain.jitter), rtol=1e-12)
    # the singular block's factor entries are sqrt(jitter) ~ 2e-5 and are fixed only to
    # rounding / sqrt(jitter) ~ eps * 3 / 2e-5 ~ 1e-11 by the matrix: held to ten times that
    real = np.asarray(padded.factor)[..., :37, :37]
    np.testing.assert_allclose(real, np.asarray(plain.factor), rtol=0, atol=1e-10)


def test_a_singular_gram_matrix_is_jittered_as_unpadded_through_the_cavi_fit():
    """The full CAVI on repeated inputs (K_nn singular): padded, the fit reports the
    jitter and gives the latent draws and predictions of the unpadded fit."""
    X, y = _repeated_rows()
    Xs = toy_problem(9, 3, seed=5)[0]
    spec = get_spec("logistic_softmax")
    options = dict(hyperparameters=SINGULAR_HYPERS, num_draws=50, max_iter=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # (20 CAVI iterations)
        padded = fit(spec, X, y, method="cavi", **options)
        plain = fit(_unpadded(spec), X, y, method="cavi", **options)
    jitter = plain.info.convergence.max_jitter
    assert jitter > 0.0
    assert padded.info.convergence.max_jitter == pytest.approx(jitter, rel=1e-12)
    assert _relative(padded.latent, plain.latent) < 1e-6
    assert _relative(padded.predict_proba(Xs), plain.predict_proba(Xs)) < 1e-8


def test_full_cavi_equals_the_unpadded_fit():
    """The logistic-softmax GP's full CAVI (type-II MAP of the kernel on the ELBO): the
    padded rows' q(v) stays the prior and their terms weigh nothing, so the fit is the
    unpadded one; the draws of q at the training inputs take row i's normals from
    fold_in(key, i), so they agree too."""
    X, y = toy_problem(37, 3, seed=4)
    Xs = toy_problem(9, 3, seed=5)[0]
    spec = get_spec("logistic_softmax")
    padded = fit(spec, X, y, method="cavi", num_draws=50)
    plain = fit(_unpadded(spec), X, y, method="cavi", num_draws=50)
    assert padded.latent.shape == plain.latent.shape == (1, 50, 37, 3)
    assert padded.info.cavi.iterations == plain.info.cavi.iterations
    for site, value in plain.hypers.items():
        assert _relative(padded.hypers[site], value) < 1e-10, site
    assert abs(padded.info.cavi.elbo - plain.info.cavi.elbo) < 1e-10 * abs(plain.info.cavi.elbo)
    assert _relative(padded.latent, plain.latent) < 1e-8
    assert _relative(padded.predict_proba(Xs), plain.predict_proba(Xs)) < 1e-10


def test_the_methods_that_do_not_pad_run_at_their_own_size():
    """The Gibbs samplers and the sparse and stochastic CAVI honour no mask: the driver
    fits them at N, and their predictions use the unpadded data."""
    spec = get_spec("logistic_softmax")
    assert spec.pads_fit("nuts", {}) and spec.pads_fit("cavi", {"num_inducing": None})
    for method, options in (("gibbs", {}), ("cavi", {"num_inducing": 10}),
                            ("cavi", {"batch_size": 16})):
        assert not spec.pads_fit(method, options)
    X, y = toy_problem(37, 3, seed=4)
    result = fit(spec, X, y, method="gibbs", num_warmup=5, num_samples=5, max_samples=5,
                 num_chains=1, progress_bar=False,
                 hyperparameters={"kernel_variance": 2.0, "kernel_lengthscale": 1.0})
    assert result.latent.shape[2] == 37
    assert result.predict_proba(X[:4]).shape == (4, 3)


# ------------------------------------------------------------------ SVI
def _svi_loss_and_grad(data, params, batch_size):
    """The SVGP's ELBO estimate (TraceMeanField_ELBO, key 3) and its gradient at params."""
    import jax
    from numpyro.handlers import substitute
    from numpyro.infer import TraceMeanField_ELBO

    from ppgpc.gp.kernels import make_kernel
    from ppgpc.models import svgp

    kernel = make_kernel("rbf-ard")

    def loss(p):
        return TraceMeanField_ELBO().loss(jax.random.PRNGKey(3), {},
                                          substitute(svgp.model, data=p),
                                          substitute(svgp.guide, data=p), data, kernel,
                                          batch_size)

    return jax.value_and_grad(loss)(params)


def _svgp_start(data, M_pad, seed=0):
    """A point away from SVI's start (q not the prior), with the padded inducing inputs'
    entries where ``pad`` puts them: zero inputs, q the prior N(0, I)."""
    rng = np.random.default_rng(seed)
    M, D = data.inducing_init.shape
    L = data.num_latent
    R = np.tril(0.1 * rng.normal(size=(L, M, M))) + np.eye(M)
    real = {"kernel_variance": np.asarray(1.7), "kernel_lengthscale": np.full(D, 0.9),
            "inducing_inputs": np.asarray(data.inducing_init) + 0.1 * rng.normal(size=(M, D)),
            "mixing": np.eye(L) + 0.1 * rng.normal(size=(L, L)),
            "q_mean": rng.normal(size=(L, M)), "q_scale_tril": R}
    padded = dict(real)
    if M_pad > M:
        R_pad = np.zeros((L, M_pad, M_pad))
        R_pad[:, :M, :M], R_pad[:, M:, M:] = R, np.eye(M_pad - M)
        padded.update(inducing_inputs=np.pad(real["inducing_inputs"], ((0, M_pad - M), (0, 0))),
                      q_mean=np.pad(real["q_mean"], ((0, 0), (0, M_pad - M))),
                      q_scale_tril=R_pad)
    return real, padded


@pytest.mark.parametrize("num_points, batch_size", [(37, None), (300, 64)])
def test_svi_objective_and_gradient_equal_the_unpadded(num_points, batch_size):
    """The SVGP's ELBO estimate and its gradient with the same key: a full batch of 37
    points (the inducing inputs, one per point, padded with the rows to 64) to 1e-10; a
    minibatch of 64 of 300 points (M = 200 inducing inputs, not padded) bit for bit, the
    same rows drawn and the same normals."""
    from ppgpc.models import svgp

    X, y = toy_problem(num_points, 3, seed=12)
    data = svgp.prepare(X, y, 3)
    padded_data = svgp.pad(data, padding.bucket(num_points))
    M = data.num_inducing
    real, padded = _svgp_start(data, padded_data.num_inducing)
    value, grad = _svi_loss_and_grad(data, real, batch_size)
    padded_value, padded_grad = _svi_loss_and_grad(padded_data, padded, batch_size)
    tolerance = 1e-10 if batch_size is None else 0.0
    assert abs(float(padded_value) - float(value)) <= tolerance * abs(float(value))
    for site, g in grad.items():
        cut = np.asarray(padded_grad[site])
        if site == "inducing_inputs":
            cut = cut[:M]
        elif site == "q_mean":
            cut = cut[:, :M]
        elif site == "q_scale_tril":
            cut = cut[:, :M, :M]
        assert _relative(cut, g) <= tolerance, site
    if padded_data.num_inducing > M:  # the padded inducing inputs' q is not pulled
        np.testing.assert_array_equal(np.asarray(padded_grad["q_mean"])[:, M:], 0.0)
        np.testing.assert_array_equal(np.asarray(padded_grad["inducing_inputs"])[M:], 0.0)


@pytest.mark.parametrize("num_points, batch_size", [(37, None), (300, 64)])
def test_svi_fits_equal_the_unpadded_fit(num_points, batch_size):
    """Whole SVI fits, padded against unpadded: bit for bit in minibatches; with a full
    batch, the rounding of the sums over 37 rows against 64 (1e-13 in the gradient) grows
    through Adam's steps (its step divides by the gradient's running size, so entries with
    small gradients carry rounding at full step length) to 2e-5 in the inducing inputs and
    5e-6 in the probabilities after 300 steps, 1e-2 of the differences between two seeds."""
    X, y = toy_problem(num_points, 3, seed=4)
    Xs = toy_problem(9, 3, seed=5)[0]
    spec = get_spec("softmax_svgp")
    options = dict(max_iter=300, num_draws=50, progress_bar=False, batch_size=batch_size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # (300 steps)
        padded = fit(spec, X, y, method="svi", **options)
        plain = fit(_unpadded(spec), X, y, method="svi", **options)
        other_seed = fit(spec, X, y, method="svi", seed=1, **options)
    M = min(num_points, 200)
    assert padded.inducing.shape == plain.inducing.shape == (1, 50, M, 3)
    assert padded.hypers["inducing_inputs"].shape == (1, 1, M, 2)
    if batch_size is not None:
        for site, value in plain.hypers.items():
            np.testing.assert_array_equal(padded.hypers[site], value)
        np.testing.assert_array_equal(padded.inducing, plain.inducing)
        np.testing.assert_array_equal(padded.predict_proba(Xs), plain.predict_proba(Xs))
        return
    seeds_apart = _relative(other_seed.predict_proba(Xs), plain.predict_proba(Xs))
    assert _relative(padded.predict_proba(Xs), plain.predict_proba(Xs)) < 1e-2 * seeds_apart
    assert _relative(padded.hypers["inducing_inputs"], plain.hypers["inducing_inputs"]) < 1e-4


def test_padded_kmeans_rows_are_never_centres():
    """k-means on data padded with far-away rows of weight 0: no centre is a padded row or
    pulled towards one."""
    import jax

    from ppgpc.gp.kmeans import kmeans, kmeans_plus_plus_indices

    X = toy_problem(50, 3, seed=13)[0]
    padded = np.concatenate([X, np.full((14, X.shape[1]), 1e3)])
    weights = padding.row_mask(50, 64)
    for seed in range(5):
        key = jax.random.PRNGKey(seed)
        assert np.all(np.asarray(kmeans_plus_plus_indices(key, padded, 40, weights)) < 50)
        centres = np.asarray(kmeans(key, padded, 40, 10, weights))
        assert np.all(np.abs(centres) <= np.max(np.abs(X)))


# ------------------------------------------------------------------ NUTS
SAMPLED = [(model, form) for model in PADDED_MODELS for form in ("collapsed", "latent")] + [
    ("logistic_softmax", "latent"), ("softmax_svgp", "latent")]
"""(model, form) of NUTS's targets: both forms of the conjugate models, and the latent form of
the two that have no collapsed one."""
GIVEN = {"kernel_variance": 4.0, "kernel_lengthscale": np.array([1.5, 0.7]),
         "mean": np.array([-0.3])}
"""Point hyperparameters of a latent-form NUTS fit (the Dirichlet GP's one level beside the
kernel's)."""


@pytest.mark.parametrize("model, form", SAMPLED)
def test_the_sampled_density_is_the_unpadded_one_and_padded_rows_are_standard_normal(model,
                                                                                    form):
    """The potential (minus the log joint density) NUTS samples, and its gradient, at 6
    random points of the unconstrained space, padded data against unpadded
    (``ppgpc.infer.nuts``'s model and arguments):

    * collapsed form: the same function, U_pad(theta) = U(theta) and equal gradients;
    * latent form: the padded rows add independent standard-normal coordinates e of the
      whitened latent, U_pad(theta, v, e) = U(theta, v) + |e|^2 / 2 + n_e log(2 pi) / 2,
      the gradient in (theta, v) equal and in e equal to e; with the hyperparameters sampled
      and, where the model has one, with them given and the prior's factor computed once
      from the padded data (as the driver runs a point fit's NUTS).

    Values to 1e-10 relative; gradients to 1e-6 relative to their largest entry, since they
    pass through the Cholesky factor of the Gram matrix, factorised at 30 and at 64 rows,
    whose condition number at these random points reaches 1e10 (the largest difference
    seen, 5e-8, in ILR-GP's kernel variance).

    So NUTS on the padded data samples the unpadded posterior of (theta, v), whatever its
    chains do; ``test_nuts_samples_the_unpadded_posterior`` checks one fit end to end."""
    import jax
    import jax.numpy as jnp
    from numpyro.infer.util import initialize_model, potential_energy

    from ppgpc.gp.kernels import make_kernel

    X, y = toy_problem(30, 3, seed=6)
    spec = get_spec(model)
    kernel = make_kernel("rbf-ard")
    data = spec.prepare(X, y, 3)
    padded = spec.pad(data, padding.bucket(30))
    extra_rows = padding.bucket(30) - 30
    assert extra_rows == 64 - 30
    if form == "collapsed":
        sampled = spec.conjugate.collapsed_model
        variants = [lambda d: (d, kernel)]
    else:
        sampled = spec.latent.latent_model
        variants = [lambda d: (d, kernel, None, None)]
    sites = initialize_model(jax.random.PRNGKey(0), sampled, model_args=variants[0](data))[0].z
    if form == "latent" and spec.latent.prior_factor is not None:
        hypers = {k: jnp.asarray(v) for k, v in GIVEN.items() if k in sites}
        variants.append(lambda d: (d, kernel, hypers, spec.latent.prior_factor(d, kernel,
                                                                               hypers)))

    @jax.jit
    def value_and_grad(z, args):
        return jax.value_and_grad(lambda z: potential_energy(sampled, args, {}, z))(z)

    gen = np.random.default_rng(11)
    checked = 0
    for number, arguments in enumerate(variants):
        plain_args, padded_args = arguments(data), arguments(padded)
        z0 = sites if number == 0 else initialize_model(
            jax.random.PRNGKey(0), sampled, model_args=plain_args)[0].z
        for _ in range(6):
            z = {k: jnp.asarray(v + 0.7 * gen.normal(size=np.shape(v))) for k, v in
                 z0.items()}
            z_pad, extra = dict(z), 0.0
            if "f_white" in z:  # (L, N): the padded rows' coordinates follow the real ones
                e = gen.normal(size=(z["f_white"].shape[0], extra_rows))
                z_pad["f_white"] = jnp.concatenate([z["f_white"], jnp.asarray(e)], axis=1)
                extra = 0.5 * np.sum(e ** 2) + 0.5 * e.size * np.log(2 * np.pi)
            value, grad = value_and_grad(z, plain_args)
            value_pad, grad_pad = value_and_grad(z_pad, padded_args)
            assert abs(float(value_pad) - float(value) - extra) <= 1e-10 * (
                abs(float(value)) + extra), (number, float(value_pad) - extra, float(value))
            for site, g in grad.items():
                got = np.asarray(grad_pad[site])
                if site == "f_white":
                    np.testing.assert_allclose(got[:, 30:], e, rtol=1e-12, atol=1e-12)
                    got = got[:, :30]
                assert _relative(got, g) < 1e-6, (number, site, _relative(got, g))
            checked += 1
    assert checked == 6 * len(variants)


NUTS = dict(num_warmup=500, num_samples=1000, max_samples=1000, num_chains=4, progress_bar=False)
"""The defaults, at both test sizes: with 400 draws per chain the Monte Carlo standard error
of a standard deviation is itself so uncertain that over six seeds of ILR-GP's latent form
one run had an entry at |z_sd| = 4.73 (the others 2.1-3.3); with the defaults, 2.4-3.5."""


@pytest.mark.slow
def test_nuts_samples_the_unpadded_posterior():
    """End to end on ILR-GP's latent form (hyperparameters and the whitened latent sampled,
    the padded rows' coordinates beside them; the other targets are checked through their
    densities above): draws of the latent at the training inputs and predictive
    probabilities at new inputs, padded against unpadded chains, every entry's mean and sd
    within 4.5 combined Monte Carlo standard errors (about 90 entries each: a false alarm
    has probability below 1e-3)."""
    X, y = toy_problem(30, 3, seed=6)
    Xs = toy_problem(6, 3, seed=7)[0]
    spec = get_spec("ilr_gp")
    padded = fit(spec, X, y, method="nuts", form="latent", seed=1, **NUTS)
    plain = fit(_unpadded(spec), X, y, method="nuts", form="latent", seed=2, **NUTS)
    for a, b in ((padded.latent, plain.latent),
                 (padded.predict_proba_draws(Xs), plain.predict_proba_draws(Xs))):
        z = compare_samplers(a, b)
        assert np.max(np.abs(z.z_mean)) < 4.5, np.max(np.abs(z.z_mean))
        assert np.max(np.abs(z.z_sd)) < 4.5, np.max(np.abs(z.z_sd))


# ------------------------------------------------------------------ compilation
def _hold_programs(monkeypatch):
    """Empty caches, as in a fresh process (after this module's earlier tests, the second
    default logistic-softmax fit compiled 38 small eager programs again, which it does not
    alone or in a new process), an empty record of training shapes and no ceiling
    (``ppgpc.runtime.programs``), so that no release falls between a test's fits."""
    import jax

    from ppgpc.runtime import programs

    jax.clear_caches()
    monkeypatch.setattr(programs, "_live", type(programs._live)())
    monkeypatch.setattr(programs, "CEILING_MEMORY_MAPS", 10 ** 9)


@pytest.mark.parametrize("model", PADDED_MODELS)
def test_a_new_size_in_the_same_bucket_compiles_nothing(model, monkeypatch):
    _hold_programs(monkeypatch)
    X, y = toy_problem(60, 3, seed=8)
    first = fit(model, X[:40], y[:40], method="map", num_draws=20)
    first.predict_proba(X[:5])
    loo_latent(first)
    with count_compilations() as compiled:
        result = fit(model, X[:52], y[:52], method="map", num_draws=20)
        result.predict_proba(X[:5])
        loo_latent(result)
    assert compiled == [], compiled


def test_the_default_estimator_compiles_once_per_bucket(monkeypatch):
    """Both fits' programs held (an empty record of training shapes, ``ppgpc.runtime.programs``,
    so that no release falls between them, whatever ran before in this process)."""
    from ppgpc import ILRGPClassifier

    _hold_programs(monkeypatch)

    X, y = toy_problem(60, 3, seed=9)
    ILRGPClassifier(progress=False).fit(X[:45], y[:45]).predict_proba(X[:5])
    with count_compilations() as compiled:
        ILRGPClassifier(progress=False).fit(X[:57], y[:57]).predict_proba(X[:5])
    assert compiled == [], compiled


def test_the_default_logistic_softmax_estimator_compiles_nothing_at_a_new_size(monkeypatch):
    """Its defaults (the full CAVI for the kernel, then NUTS on the latent form) at another
    N of the bucket compile nothing: the CAVI, NUTS's windows (the data, the kernel's
    hyperparameters and its Cholesky factor are the programs' arguments) and the
    predictions. The draws kept are held at one checkpoint length for both fits: where the
    check stops varies with the data, and each of the few checkpoint lengths
    (``ppgpc.infer.mcmc.CHECKPOINTS``) compiles the programs that read the draws once."""
    from ppgpc import LogisticSoftmaxGPClassifier

    _hold_programs(monkeypatch)
    X, y = toy_problem(60, 3, seed=11)
    draws = {"num_samples": 300, "max_samples": 300}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        LogisticSoftmaxGPClassifier(progress=False, inference_options=draws).fit(
            X[:45], y[:45]).predict_proba(X[:5])
        with count_compilations() as compiled:
            LogisticSoftmaxGPClassifier(progress=False, inference_options=draws).fit(
                X[:57], y[:57]).predict_proba(X[:5])
    assert compiled == [], compiled


@pytest.mark.parametrize("sizes", [(45, 57), (290, 310), (700, 760)])
def test_the_default_svgp_estimator_compiles_nothing_at_a_new_size(monkeypatch, sizes):
    """Its defaults at another N of the bucket: a full batch with one inducing input per
    point (both padded), a full batch with 200 inducing inputs (k-means on the padded rows),
    and, above ``FULL_BATCH_POINTS``, minibatches of 256 with 200 inducing inputs."""
    from ppgpc import SoftmaxSVGPClassifier

    _hold_programs(monkeypatch)
    first, second = sizes
    assert padding.bucket(first) == padding.bucket(second)
    limit = svgp_schedule.FULL_BATCH_POINTS
    assert (first > limit) == (second > limit)
    X, y = toy_problem(second, 3, seed=14)
    options = {} if first < 256 else {"inference_options": {"max_iter": 200}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # (200 steps)
        SoftmaxSVGPClassifier(progress=False, **options).fit(X[:first], y[:first]) \
            .predict_proba(X[:5])
        with count_compilations() as compiled:
            SoftmaxSVGPClassifier(progress=False, **options).fit(X, y).predict_proba(X[:5])
    assert compiled == [], compiled


def test_gibbs_refits_on_new_data_of_the_same_size_compile_and_grow_nothing(monkeypatch):
    """The Gibbs programs take the data and the hyperparameters as arguments
    (``ppgpc.infer.gibbs.gibbs_programs``): after one fit, fits on other data of the same
    size with other hyperparameters, and their predictions, compile nothing, and the
    process's memory mappings stay where they stood (within 50)."""
    from ppgpc.runtime.programs import memory_maps

    _hold_programs(monkeypatch)
    short = dict(method="gibbs", num_warmup=20, num_samples=100, max_samples=100,
                 num_chains=2, progress_bar=False)
    X, y = toy_problem(40, 3, seed=15)
    fit("logistic_softmax", X, y, hyperparameters={"kernel_variance": 2.0,
                                                   "kernel_lengthscale": 1.0},
        **short).predict_proba(X[:5])
    maps = memory_maps()
    with count_compilations() as compiled:
        for seed in (16, 17, 18):
            X, y = toy_problem(40, 3, seed=seed)
            fit("logistic_softmax", X, y, seed=seed, hyperparameters={
                "kernel_variance": 1.0 + seed / 10, "kernel_lengthscale": 1.5},
                **short).predict_proba(X[:5])
    assert compiled == [], compiled
    if maps is not None:
        assert memory_maps() <= maps + 50, (maps, memory_maps())


def test_latent_form_predictions_compile_nothing_at_a_new_size(monkeypatch):
    """Predictions from latent draws pad the draws too (on the host): after a fit of the
    latent form at another N of the bucket, its predictions compile nothing. (The NUTS fit
    itself compiles NumPyro's sampling loop again, one program per MCMC object.)"""
    _hold_programs(monkeypatch)
    X, y = toy_problem(60, 3, seed=10)
    short = dict(form="latent", num_warmup=5, num_samples=5, max_samples=5, num_chains=1,
                 progress_bar=False)
    fit("ilr_gp", X[:40], y[:40], method="nuts", **short).predict_proba(X[:5])
    second = fit("ilr_gp", X[:52], y[:52], method="nuts", **short)
    with count_compilations() as compiled:
        second.predict_proba(X[:5])
    assert compiled == [], compiled
