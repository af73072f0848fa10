"""GPD model module (docs/math.md section 2) and DirichletGPClassifier."""

import functools

import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy.stats import multivariate_normal, norm
from sklearn.exceptions import NotFittedError

from conftest import (
    SMALL,
    assert_estimator_conventions,
    assert_exact_fit_classifies,
    assert_nuts_matches_gaussian_posterior,
    toy_problem,
)
from ppgpc import DirichletGPClassifier, Selection
from ppgpc.gp.kernels import RBF, gram
from ppgpc.infer import fit, supported_methods, to_inference_data
from ppgpc.models import dirichlet_gp

HYPERS = {"kernel_variance": 10.0, "kernel_lengthscale": np.array([1.2, 0.9]),
          "mean": np.array([-4.0, -3.5, -4.5])}


@pytest.mark.parametrize("alpha", [1e-4, 0.01, 0.5, 1.01, 1.1, 30.0])
def test_lognormal_moment_match_reproduces_gamma_mean_and_variance(alpha):
    ytilde, s2 = (float(v) for v in dirichlet_gp.lognormal_targets(alpha))
    # Gamma(alpha, 1) has mean alpha and variance alpha.
    assert np.exp(ytilde + s2 / 2) == pytest.approx(alpha, rel=1e-12)
    assert (np.exp(s2) - 1) * np.exp(2 * ytilde + s2) == pytest.approx(alpha, rel=1e-12)


def test_prepare_targets_noise_and_class_count_from_argument():
    X, y = toy_problem(9, 2)  # labels 0 and 1 only
    data = dirichlet_gp.prepare(X, y, 3, alpha_eps=0.01)  # C = 3 as given, not max(y) + 1
    assert data.targets.shape == data.noise_var.shape == (9, 3)
    on, s2_on = dirichlet_gp.lognormal_targets(1.01)
    off, s2_off = dirichlet_gp.lognormal_targets(0.01)
    hit = np.eye(3, dtype=bool)[y]
    np.testing.assert_allclose(data.targets, np.where(hit, on, off))
    np.testing.assert_allclose(data.noise_var, np.where(hit, s2_on, s2_off))
    for bad, match in [({"alpha_eps": 0.0}, "alpha_eps"), ({"alpha_eps": "x"}, "alpha_eps"),
                       ({"predict_from": "both"}, "predict_from")]:
        with pytest.raises(ValueError, match=match):
            dirichlet_gp.prepare(X, y, 3, **bad)


def test_collapsed_model_density_equals_direct_mvn_per_class():
    X, y = toy_problem(12, 3)
    data = dirichlet_gp.prepare(X, y, 3, alpha_eps=0.05)
    kernel = RBF(ard=True)
    hypers = {k: jnp.asarray(v) for k, v in HYPERS.items()}
    _, trace = log_density(functools.partial(dirichlet_gp.collapsed_model, data, kernel), (), {},
                           hypers)
    K = np.asarray(gram(kernel, {"variance": 10.0, "lengthscale": jnp.asarray([1.2, 0.9])},
                        jnp.asarray(X)))
    expected = sum(
        multivariate_normal(np.full(12, HYPERS["mean"][c]),
                            K + np.diag(np.asarray(data.noise_var)[:, c])).logpdf(
            np.asarray(data.targets)[:, c]) for c in range(3))
    site = trace["ytilde"]
    assert float(jnp.sum(site["fn"].log_prob(site["value"]))) == pytest.approx(expected, rel=1e-10)


def test_supported_methods_and_sparse_refuses_nuts():
    assert set(supported_methods("dirichlet_gp")) == {"exact", "map", "nuts"}
    assert set(supported_methods("dirichlet_gp_sparse")) == {"exact", "map"}
    assert set(supported_methods("ilr_gp_sparse")) == {"exact", "map"}
    X, y = toy_problem(10, 2)
    with pytest.raises(ValueError, match="does not support method 'nuts'"):
        fit("dirichlet_gp_sparse", X, y, method="nuts")


@pytest.fixture(scope="module")
def exact_fit():
    X, y = toy_problem(30, 3)
    return fit("dirichlet_gp", X, y, method="exact", num_draws=300), X, y


def test_exact_fit_predicts_and_exports(exact_fit):
    result, X, y = exact_fit
    assert_exact_fit_classifies(result, X, y, num_classes=3, min_accuracy=0.9)
    assert result.hypers["mean"].shape == (1, 1, 3)
    assert result.latent.shape == (1, 300, 30, 3)
    idata = to_inference_data(result, X[:4])
    assert idata.constant_data["mean"].dims == ("latent",)  # GPD: latent c = class c
    assert idata.predictions["p"].shape == (4, 38, 4, 3)  # 300 draws: 4 chains, every 2nd kept


def test_noisy_prediction_adds_the_pseudo_observation_noise(exact_fit):
    result, X, _ = exact_fit
    hypers = {k: v[0, 0] for k, v in result.hypers.items()}
    noisy = result.data._replace(options=dirichlet_gp.GPDOptions(True, "noisy"))
    Xs = jnp.asarray(X[:5])
    post = dirichlet_gp.condition(result.data, result.kernel, hypers)
    m0, v0 = dirichlet_gp.predict(result.data, result.kernel, hypers, post, Xs)
    m1, v1 = dirichlet_gp.predict(noisy, result.kernel, hypers, post, Xs)
    np.testing.assert_allclose(m0, m1)
    _, s2_on = dirichlet_gp.lognormal_targets(1.0 + result.data.alpha_eps)
    _, s2_off = dirichlet_gp.lognormal_targets(result.data.alpha_eps)
    hit = np.eye(3, dtype=bool)[np.argmax(m0, 1)]
    np.testing.assert_allclose(v1 - v0, np.where(hit, s2_on, s2_off), rtol=1e-12)


def test_per_class_kernels_density_and_prediction():
    """shared_kernel=False: kernel sites get a class axis and class c uses its own kernel."""
    X, y = toy_problem(12, 3, seed=2)
    data = dirichlet_gp.prepare(X, y, 3, alpha_eps=0.05, shared_kernel=False)
    kernel = RBF(ard=True)
    init = dirichlet_gp.initial_hypers(data, kernel)
    assert init["kernel_variance"].shape == (3,) and init["kernel_lengthscale"].shape == (3, 2)
    variances, scales = np.array([1.0, 4.0, 9.0]), np.array([[0.5, 1.0], [1.0, 2.0], [2.0, 0.7]])
    hypers = {"kernel_variance": jnp.asarray(variances), "kernel_lengthscale": jnp.asarray(scales),
              "mean": jnp.asarray(HYPERS["mean"])}
    _, trace = log_density(functools.partial(dirichlet_gp.collapsed_model, data, kernel), (), {},
                           hypers)
    expected = 0.0
    for c in range(3):
        K = np.asarray(gram(kernel, {"variance": variances[c], "lengthscale": scales[c]},
                            jnp.asarray(X)))
        expected += multivariate_normal(np.full(12, HYPERS["mean"][c]),
                                        K + np.diag(np.asarray(data.noise_var)[:, c])).logpdf(
            np.asarray(data.targets)[:, c])
    site = trace["ytilde"]
    assert float(jnp.sum(site["fn"].log_prob(site["value"]))) == pytest.approx(expected, rel=1e-10)
    post = dirichlet_gp.condition(data, kernel, hypers)
    mean, var = dirichlet_gp.predict(data, kernel, hypers, post, jnp.asarray(X[:4]))
    assert mean.shape == var.shape == (4, 3)
    # far from the data each class reverts to its own prior: mean_c and variance s_c^2
    mean, var = dirichlet_gp.predict(data, kernel, hypers, post, jnp.full((1, 2), 50.0))
    np.testing.assert_allclose(mean[0], HYPERS["mean"], atol=1e-8)
    np.testing.assert_allclose(var[0], variances, atol=1e-8)


@pytest.mark.parametrize("shared_kernel", [True, False])
def test_the_classes_one_at_a_time_give_the_batched_posterior(shared_kernel, monkeypatch):
    """Past ``CLASS_BATCH_BYTES`` the class-wise steps (posterior, prediction, draws at the
    training inputs, leave-one-out) run one class at a time; they compute what the batch
    over the classes computes (eager calls: the limit is read as each call traces)."""
    import jax

    X, y = toy_problem(30, 3, seed=3)
    data = dirichlet_gp.prepare(X, y, 3, alpha_eps=0.05, shared_kernel=shared_kernel)
    kernel = RBF(ard=True)
    hypers = dirichlet_gp.initial_hypers(data, kernel)
    key, Xs = jax.random.PRNGKey(4), jnp.asarray(X[:7] + 0.1)

    def everything():
        post = dirichlet_gp.condition(data, kernel, hypers)
        return (post, dirichlet_gp.predict(data, kernel, hypers, post, Xs),
                dirichlet_gp.sample_train(key, data, kernel, hypers, post, 5),
                dirichlet_gp.loo_predictive(data, kernel, hypers, post))

    batched = everything()
    monkeypatch.setattr(dirichlet_gp, "CLASS_BATCH_BYTES", 0)
    looped = everything()
    for a, b in zip(jax.tree.leaves(batched), jax.tree.leaves(looped)):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def unequal_classes():
    """A 3-class toy problem with 14, 8 and 4 points."""
    X, y = toy_problem(42, 3, seed=5)
    keep = np.concatenate([np.flatnonzero(y == 0)[:14], np.flatnonzero(y == 1)[:8],
                           np.flatnonzero(y == 2)[:4]])
    return X[keep], y[keep]


def test_class_means_are_one_level_plus_the_centred_log_class_frequencies():
    """The site ``mean`` is b + o_c with o_c = log(n_c + alpha_eps) centred (finite for a
    class without points) and the prior Normal(0, 10) on b; type-II ML, MAP, the sparse
    bound and NUTS move b alone, so every fitted (C,) mean lies on that line."""
    X, y = unequal_classes()
    data = dirichlet_gp.prepare(X, y, 4, alpha_eps=0.05)  # class 3 has no points
    log_counts = np.log(np.array([14, 8, 4, 0]) + 0.05)
    offsets = dirichlet_gp.class_log_frequencies(data)
    np.testing.assert_allclose(offsets, log_counts - log_counts.mean(), rtol=1e-12)
    prior = dirichlet_gp.ClassMeanPrior(offsets, dirichlet_gp.MEAN_PRIOR_SCALE)
    assert float(prior.log_prob(offsets - 7.5)) == pytest.approx(
        norm(0.0, dirichlet_gp.MEAN_PRIOR_SCALE).logpdf(-7.5), rel=1e-12)
    init = dirichlet_gp.initial_hypers(data, RBF(ard=True))["mean"]
    np.testing.assert_allclose(init, np.mean(data.targets) + offsets, rtol=1e-12)

    offsets = np.asarray(dirichlet_gp.class_log_frequencies(dirichlet_gp.prepare(X, y, 3)))
    fits = {method: fit("dirichlet_gp", X, y, method=method, num_draws=20)
            for method in ("exact", "map")}
    fits["sparse"] = fit("dirichlet_gp_sparse", X, y, method="map", num_draws=20,
                         model_options={"num_inducing": 6})
    fits["nuts"] = fit("dirichlet_gp", X, y, method="nuts", num_warmup=30, num_samples=20,
                       max_samples=20,
                       num_chains=1, progress_bar=False)
    for name, result in fits.items():
        level = np.asarray(result.hypers["mean"]).reshape(-1, 3) - offsets
        np.testing.assert_allclose(level, level[:, :1].repeat(3, axis=1), atol=1e-10,
                                   err_msg=name)
    assert np.ptp(np.asarray(fits["nuts"].hypers["mean"])[0, :, 0]) > 0  # b was sampled


def test_far_from_the_data_the_predictive_is_the_class_frequencies_pulled_to_uniform():
    """Far from the data the latent predictive is the prior N(b + o_c, s^2) of every class,
    and the probabilities E[softmax] of it: between the class frequencies and uniform.
    (tests/infer/test_far_from_data.py checks every estimator's defaults on wine.)"""
    X, y = unequal_classes()
    result = fit("dirichlet_gp", X, y, method="map")
    hypers = result.hyper_draw()
    far = jnp.full((1, 2), 60.0)
    post = dirichlet_gp.condition(result.data, result.kernel, hypers)
    mean, var = dirichlet_gp.predict(result.data, result.kernel, hypers, post, far)
    np.testing.assert_allclose(mean[0], hypers["mean"], atol=1e-8)
    np.testing.assert_allclose(var[0], hypers["kernel_variance"], atol=1e-8)
    freq = np.bincount(y) / len(y)
    probs = result.predict_proba(far)[0]
    # 1000 draws, each in [0, 1]: standard error at most 0.5 / sqrt(1000) = 0.016
    assert probs.max() <= freq.max() + 4 * 0.016
    assert probs[0] > probs[1] > probs[2] and probs[0] - probs[2] < freq[0] - freq[2]


@pytest.mark.slow
def test_nuts_on_the_latent_form_matches_the_closed_form_posterior():
    """Exact per-class posterior N(m + K A_c^-1 (ytilde_c - m), K - K A_c^-1 K), A_c = K +
    diag(s2_:c), against NUTS on the whitened latent form with the same fixed hyperparameters,
    in ArviZ's Monte Carlo standard errors (``assert_nuts_matches_gaussian_posterior``).
    500 warm-up steps, as the ILR test uses 400: with 250, seed 1 gave SDs low on average
    (mean z_sd -0.61 over the 36 elements, max |z_sd| 4.6), a chain not yet mixed whose own
    MCSE cannot see it; with 500, seeds 1-4 give rms z_sd 0.97 and max |z_sd| 2.6."""
    X, y = toy_problem(12 if SMALL else 20, 3, seed=3)
    samples = 500 if SMALL else 1200
    nuts = fit("dirichlet_gp", X, y, method="nuts", form="latent", hyperparameters=HYPERS,
               model_options={"alpha_eps": 0.05}, num_warmup=500, num_samples=samples,
               max_samples=samples,
               num_chains=2, progress_bar=False, seed=1)
    data = nuts.data
    K = np.asarray(gram(nuts.kernel, {"variance": 10.0, "lengthscale": jnp.asarray([1.2, 0.9])},
                        data.X))
    N = K.shape[0]
    mean, sd = np.zeros((N, 3)), np.zeros((N, 3))
    for c in range(3):
        A = K + np.diag(np.asarray(data.noise_var)[:, c])
        mean[:, c] = HYPERS["mean"][c] + K @ np.linalg.solve(
            A, np.asarray(data.targets)[:, c] - HYPERS["mean"][c])
        sd[:, c] = np.sqrt(np.diag(K - K @ np.linalg.solve(A, K)))
    assert_nuts_matches_gaussian_posterior(nuts, mean, sd, min_ess=100, max_abs_z=4.5)


# ------------------------------------------------------------------ estimator
@pytest.fixture(scope="module")
def fitted():
    X, y = toy_problem(30, 3, seed=11)
    labels = np.array(["a", "b", "c"])[y]
    # alpha_eps by training NLL (Milios): the search fits have the final fit's shapes
    clf = DirichletGPClassifier(alpha_eps="train", selection=Selection(grid=(0.01, 0.1)), seed=3)
    return clf.fit(X, labels), X, labels


def test_estimator_conventions(fitted):
    clf, X, labels = fitted
    assert_estimator_conventions(clf, X, labels, ["a", "b", "c"], min_accuracy=0.9)
    assert clf.alpha_eps_ in (0.01, 0.1) and set(clf.alpha_eps_scores_) == {0.01, 0.1}
    np.testing.assert_array_equal(clf.predict_proba(X[:4]), clf.predict_proba(X[:4]))
    assert clf.alpha_eps_scores_[clf.alpha_eps_] == min(clf.alpha_eps_scores_.values())
    idata = clf.to_inference_data(X[:3])
    assert list(idata.predictions["p"].coords["class_label"].values) == ["a", "b", "c"]


def test_estimator_collapsed_inference_and_bad_input(fitted):
    clf, X, labels = fitted
    sparse_clf = DirichletGPClassifier(alpha_eps=0.05, inference="collapsed", num_inducing=8,
                                       max_exact_points=10).fit(X, labels)  # no size limit
    assert sparse_clf.result_.hypers["inducing_inputs"].shape == (1, 1, 8, 2)
    assert sparse_clf.score(X, labels) > 0.9
    with pytest.raises(ValueError, match="X has 3 features, but DirichletGPClassifier is "
                                         "expecting 2"):
        clf.predict_proba(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="not seen during fit"):
        clf.score(X[:2], ["a", "z"])
    with pytest.raises(ValueError, match="NaN"):
        DirichletGPClassifier(alpha_eps=0.01).fit(np.array([[0.0, np.nan], [1.0, 2.0]]), [0, 1])
    with pytest.raises(ValueError, match="single class"):
        DirichletGPClassifier(alpha_eps=0.01).fit(X, ["a"] * len(X))
    with pytest.raises(ValueError, match="alpha_eps"):
        DirichletGPClassifier(alpha_eps=-1.0).fit(X, labels)
    with pytest.raises(ValueError, match="inference='gibbs'"):
        DirichletGPClassifier(inference="gibbs").fit(X, labels)
    with pytest.raises(NotFittedError, match="not fitted"):
        DirichletGPClassifier().predict(X)


# ------------------------------------------------------------ learned noise scales
def test_learned_class_noise_scales_enter_the_density_bound_and_estimator(tmp_path):
    """With learn_noise_scale, class c's noise is r_c s2_:c in the exact density (against
    a direct MVN), in the sparse bound (against ``ppgpc.gp.sparse.collapsed_bound`` per class)
    and in the posterior; the estimator reports r as a (C,) array and saves it."""
    from ppgpc.gp import sparse

    X, y = toy_problem(12, 3)
    data = dirichlet_gp.prepare(X, y, 3, alpha_eps=0.05, learn_noise_scale=True)
    kernel = RBF(ard=True)
    scales = np.array([0.5, 2.0, 3.0])
    hypers = {**{k: jnp.asarray(v) for k, v in HYPERS.items()}, "noise_scale": jnp.asarray(scales)}
    total, trace = log_density(functools.partial(dirichlet_gp.collapsed_model, data, kernel), (),
                               {}, hypers)
    params = {"variance": 10.0, "lengthscale": jnp.asarray([1.2, 0.9])}
    K = np.asarray(gram(kernel, params, jnp.asarray(X)))
    noise = np.asarray(data.noise_var) * scales[None, :]
    expected = sum(multivariate_normal(np.full(12, HYPERS["mean"][c]),
                                       K + np.diag(noise[:, c])).logpdf(
        np.asarray(data.targets)[:, c]) for c in range(3))
    site = trace["ytilde"]
    assert float(jnp.sum(site["fn"].log_prob(site["value"]))) == pytest.approx(expected, rel=1e-10)
    assert float(trace["noise_scale"]["fn"].log_prob(jnp.asarray(scales))) == pytest.approx(
        float(np.sum(dirichlet_gp.NOISE_SCALE_PRIOR.log_prob(jnp.asarray(scales)))), rel=1e-12)
    np.testing.assert_allclose(dirichlet_gp.initial_hypers(data, kernel)["noise_scale"], 1.0)

    Zm = data.X[:5]
    _, strace = log_density(
        functools.partial(dirichlet_gp.sparse_collapsed_model, sparse.SparseData(data, Zm), kernel),
        (), {}, {**hypers, "inducing_inputs": Zm})
    resid = np.asarray(data.targets) - HYPERS["mean"][None, :]
    bound = sum(float(sparse.collapsed_bound(kernel, params, data.X, jnp.asarray(resid[:, c:c + 1]),
                                             Zm, jnp.asarray(noise[:, c]))) for c in range(3))
    site = strace["collapsed_bound"]
    assert float(site["fn"].log_prob(site["value"])) == pytest.approx(bound, rel=1e-12)

    post = dirichlet_gp.condition(data, kernel, hypers)
    mean, _ = dirichlet_gp.predict(data, kernel, hypers, post, data.X[:3])
    c = 1
    Ks = K[:3]
    direct = Ks @ np.linalg.solve(K + np.diag(noise[:, c]), resid[:, c]) + HYPERS["mean"][c]
    np.testing.assert_allclose(mean[:, c], direct, rtol=1e-9)

    Xf, yf = toy_problem(40, 3, seed=4)
    # Type-II ML drives class 1's scale to about 1e-11 on these well-separated blobs: fit
    # says so and names the class (ppgpc.estimators._common.warn_of_collapsed_noise).
    with pytest.warns(UserWarning, match=r"noise scale fell to .* for class\(es\) \[1\]:"):
        clf = DirichletGPClassifier(alpha_eps=0.01, learn_noise_scale=True,
                                    inference="exact").fit(Xf, yf)
    assert clf.noise_scale_.shape == (3,) and np.all(clf.noise_scale_ > 0)
    assert clf.noise_scale_[1] < 1e-6 < min(clf.noise_scale_[0], clf.noise_scale_[2])
    loaded = DirichletGPClassifier.load(clf.save(tmp_path / "gpd"))
    np.testing.assert_array_equal(loaded.noise_scale_, clf.noise_scale_)
    np.testing.assert_array_equal(loaded.predict_proba(Xf), clf.predict_proba(Xf))
    assert DirichletGPClassifier(alpha_eps=0.01).fit(Xf, yf).noise_scale_ is None
