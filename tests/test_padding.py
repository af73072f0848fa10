"""Training data padded to fixed sizes change nothing (``ppgpc.padding``).

The driver fits a model with a ``pad`` function on its data padded to ``bucket(N)`` rows.
Each test fits the same data twice, with the model's spec as registered and with a copy
whose ``pad`` is None (fitted at its own N, as before padding existed), and compares:

* ``exact`` and ``map`` (deterministic given the key): hyperparameters, the optimiser's
  objective, predictions and the closed-form leave-one-out predictive, to 1e-10 relative,
  and the draws of the latent at the training inputs to 1e-8 (they go through the factor
  of the noise-free Gram matrix, whose condition number reaches 1e11);
* ``nuts``: the padded rows change the floating-point rounding of the log-density (the
  collapsed form) or add independent standard-normal coordinates to the sampler (the
  latent form), so the chains are not the same draws; their posteriors are compared
  entry by entry with Monte Carlo standard errors (``conftest.compare_samplers``).

And the point of padding: a second fit at another N of the same bucket compiles nothing.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from compile_count import count_compilations
from conftest import SMALL, compare_samplers, toy_problem
from ppgpc import padding
from ppgpc.infer import fit
from ppgpc.infer.loo import loo_latent
from ppgpc.models import get_spec

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
        for site, value in plain.hypers.items():
            assert _relative(padded.hypers[site], value) < 1e-10, (options, site)
        objective = "log_posterior" if method == "map" else "log_marginal_likelihood"
        assert abs(padded.info[objective] - plain.info[objective]) < 1e-10 * abs(
            plain.info[objective])
        # the draws pass through the Cholesky factor of the noise-free Gram matrix
        # (Matheron's rule), whose condition number reaches 2e11 here (GPD's per-class
        # kernels): rounding of 1e-16 differs between the two factorisations by up to that
        assert _relative(padded.latent, plain.latent) < 1e-8, options
        assert _relative(padded.predict_proba(Xs), plain.predict_proba(Xs)) < 1e-10
        for a, b in zip(loo_latent(padded), loo_latent(plain)):
            assert _relative(a, b) < 1e-10, options


# ------------------------------------------------------------------ NUTS
NUTS = dict(num_warmup=300 if SMALL else 500, num_samples=400 if SMALL else 1000,
            num_chains=4, progress_bar=False)


@pytest.mark.slow
@pytest.mark.parametrize("form", ["collapsed", "latent"])
@pytest.mark.parametrize("model", PADDED_MODELS)
def test_nuts_samples_the_unpadded_posterior(model, form):
    """Draws of the latent at the training inputs and predictive probabilities at new
    inputs, padded against unpadded chains: every entry's mean and sd within 4.5 combined
    Monte Carlo standard errors (about 90 entries each: a false alarm has probability
    below 1e-3)."""
    X, y = toy_problem(30, 3, seed=6)
    Xs = toy_problem(6, 3, seed=7)[0]
    spec = get_spec(model)
    padded = fit(spec, X, y, method="nuts", form=form, seed=1, **NUTS)
    plain = fit(_unpadded(spec), X, y, method="nuts", form=form, seed=2, **NUTS)
    for a, b in ((padded.latent, plain.latent),
                 (padded.predict_proba_draws(Xs), plain.predict_proba_draws(Xs))):
        z = compare_samplers(a, b)
        assert np.max(np.abs(z.z_mean)) < 4.5, np.max(np.abs(z.z_mean))
        assert np.max(np.abs(z.z_sd)) < 4.5, np.max(np.abs(z.z_sd))


# ------------------------------------------------------------------ compilation
@pytest.mark.parametrize("model", PADDED_MODELS)
def test_a_new_size_in_the_same_bucket_compiles_nothing(model, monkeypatch):
    from ppgpc import programs

    monkeypatch.setattr(programs, "_live", type(programs._live)())
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
    """Both fits' programs held (an empty record of training shapes, ``ppgpc.programs``,
    so that no release falls between them, whatever ran before in this process)."""
    from ppgpc import ILRGPClassifier, programs

    monkeypatch.setattr(programs, "_live", type(programs._live)())

    X, y = toy_problem(60, 3, seed=9)
    ILRGPClassifier(progress=False).fit(X[:45], y[:45]).predict_proba(X[:5])
    with count_compilations() as compiled:
        ILRGPClassifier(progress=False).fit(X[:57], y[:57]).predict_proba(X[:5])
    assert compiled == [], compiled


def test_latent_form_predictions_compile_nothing_at_a_new_size(monkeypatch):
    """Predictions from latent draws pad the draws too (on the host): after a fit of the
    latent form at another N of the bucket, its predictions compile nothing. (The NUTS fit
    itself compiles NumPyro's sampling loop again, one program per MCMC object.)"""
    from ppgpc import programs

    monkeypatch.setattr(programs, "_live", type(programs._live)())
    X, y = toy_problem(60, 3, seed=10)
    short = dict(form="latent", num_warmup=5, num_samples=5, num_chains=1,
                 progress_bar=False)
    fit("ilr_gp", X[:40], y[:40], method="nuts", **short).predict_proba(X[:5])
    second = fit("ilr_gp", X[:52], y[:52], method="nuts", **short)
    with count_compilations() as compiled:
        second.predict_proba(X[:5])
    assert compiled == [], compiled
