"""Tests of ppgpc.evaluation.recalibration: temperature scaling recovers a known temperature and
never raises the calibration NLL; Dirichlet calibration reaches the minimum a reference optimiser
finds, is never worse than temperature scaling on the calibration set, and recovers a known
map; both return rows on the simplex."""

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_softmax

from ppgpc.evaluation.metrics import nll
from ppgpc.evaluation.recalibration import (DirichletCalibration, TemperatureScaling, fit_dirichlet,
                                            fit_temperature)

Z = 4.0  # standard errors allowed for a Monte Carlo mean


def _softmax(a):
    a = a - a.max(axis=1, keepdims=True)
    e = np.exp(a)
    return e / e.sum(axis=1, keepdims=True)


def _categorical(rng, q):
    return (rng.uniform(size=(q.shape[0], 1)) > np.cumsum(q, axis=1)[:, :-1]).sum(axis=1)


def _tempered(seed, n, C=4, sharpen=2.0):
    """Labels from q = softmax(l); reported p = softmax(sharpen * l): the true T is sharpen."""
    rng = np.random.default_rng(seed)
    logits = 1.5 * rng.normal(size=(n, C))
    y = _categorical(rng, _softmax(logits))
    return _softmax(sharpen * logits), y


def _biased(seed, n, C=4):
    """Labels from q = softmax(log p + b) with class biases b: no temperature fixes it."""
    rng = np.random.default_rng(seed)
    p = _softmax(1.5 * rng.normal(size=(n, C)))
    b = np.linspace(-1.0, 1.0, C)
    return p, _categorical(rng, _softmax(np.log(p) + b))


# ------------------------------------------------------------------ temperature scaling
@pytest.mark.parametrize("sharpen", [2.0, 0.5])
def test_temperature_scaling_recovers_a_known_temperature(sharpen):
    # the maximum-likelihood 1/T is consistent: its mean over seeds is 1 / sharpen within MC
    # error (and the spread of the estimates gives that error)
    repeats = 40
    betas = np.array([1.0 / fit_temperature(*_tempered(seed, 400, sharpen=sharpen)).temperature
                      for seed in range(repeats)])
    se = betas.std(ddof=1) / np.sqrt(repeats)
    assert abs(betas.mean() - 1.0 / sharpen) < Z * se, (betas.mean(), se)
    assert betas.std(ddof=1) * sharpen < 0.1  # informative: one fit pins 1/T within 10%


def test_temperature_is_the_minimum_and_never_raises_the_nll():
    for p, y in (_tempered(1, 300), _tempered(2, 300, sharpen=0.7), _biased(3, 300),
                 _tempered(4, 300, sharpen=1.0)):
        fit = fit_temperature(p, y)
        assert isinstance(fit, TemperatureScaling)
        assert fit.nll_before == pytest.approx(nll(p, y), rel=1e-12)
        assert fit.nll == pytest.approx(nll(fit.transform(p), y), rel=1e-12)
        assert fit.nll <= fit.nll_before + 1e-12
        for factor in (1 - 1e-4, 1 + 1e-4):  # the NLL rises on both sides of T
            other = TemperatureScaling(fit.temperature * factor, 0.0, 0.0, 0)
            assert nll(other.transform(p), y) >= fit.nll - 1e-13


def test_temperature_errors_name_the_problem():
    p, _ = _tempered(5, 50)
    worst = p.argmin(axis=1)  # labels always the least probable class
    with pytest.raises(ValueError, match="no better than uniform"):
        fit_temperature(p, worst)
    with pytest.raises(ValueError, match="every calibration label is the most probable class"):
        fit_temperature(p, p.argmax(axis=1))
    with pytest.raises(ValueError, match="rows of probs must sum to 1"):
        fit_temperature(p * 2, worst)


# ------------------------------------------------------------------ Dirichlet calibration
def _odir_objective(flat, logp, y, lam, mu):
    """Mean NLL of softmax(W log p + b) plus ODIR, written out for scipy (reference)."""
    C = logp.shape[1]
    W, b = flat[:C * C].reshape(C, C), flat[C * C:]
    nll_value = -np.mean(log_softmax(logp @ W.T + b, axis=1)[np.arange(len(y)), y])
    off = W[~np.eye(C, dtype=bool)]
    return nll_value + lam * np.mean(off**2) + mu * np.mean(b**2)


@pytest.mark.parametrize("lam, mu", [(1.0, 1.0), (0.05, 0.2)])
def test_dirichlet_reaches_the_reference_minimum(lam, mu):
    p, y = _biased(6, 300)
    fit = fit_dirichlet(p, y, off_diagonal_penalty=lam, intercept_penalty=mu)
    assert isinstance(fit, DirichletCalibration)
    C = p.shape[1]
    start = np.concatenate([np.eye(C).ravel(), np.zeros(C)])
    ref = minimize(_odir_objective, start, args=(np.log(p), y, lam, mu), method="BFGS",
                   options={"gtol": 1e-10, "maxiter": 5000})
    ours = _odir_objective(np.concatenate([fit.weights.ravel(), fit.bias]), np.log(p), y,
                           lam, mu)
    assert ours <= ref.fun + 1e-10
    assert ours == pytest.approx(ref.fun, abs=1e-8)
    assert fit.nll == pytest.approx(nll(fit.transform(p), y), rel=1e-12)


def test_dirichlet_is_never_worse_than_temperature_on_the_calibration_set():
    for p, y in (_tempered(7, 200), _tempered(8, 200, sharpen=0.6), _biased(9, 200)):
        ts = fit_temperature(p, y)
        for lam in (1.0, 1e-3):
            fit = fit_dirichlet(p, y, off_diagonal_penalty=lam, intercept_penalty=lam)
            assert fit.nll <= ts.nll + 1e-10
    # class biases are out of temperature scaling's reach, not of Dirichlet calibration's
    p, y = _biased(10, 2000)
    assert fit_dirichlet(p, y).nll < fit_temperature(p, y).nll - 0.02


def test_dirichlet_recovers_a_known_map():
    # Labels from q = softmax(W0 log p + b0). With negligible penalties the fit is the MLE,
    # whose expected KL(q || q_hat) over new points is about d / (2 n), 2 n KL ~ chi2_d with
    # d = (C - 1)(C + 1) free parameters (softmax ignores a shift shared by all rows).
    rng = np.random.default_rng(11)
    C, n = 3, 4000
    W0 = np.array([[0.8, 0.3, 0.0], [-0.2, 1.2, 0.1], [0.0, -0.3, 0.5]])
    b0 = np.array([0.4, -0.2, 0.0])
    p = _softmax(1.5 * rng.normal(size=(n + 20000, C)))
    q = _softmax(np.log(p) @ W0.T + b0)
    y = _categorical(rng, q[:n])
    fit = fit_dirichlet(p[:n], y, off_diagonal_penalty=1e-8, intercept_penalty=1e-8)
    q_hat = fit.transform(p[n:])
    kl = np.mean(np.sum(q[n:] * (np.log(q[n:]) - np.log(q_hat)), axis=1))
    d = (C - 1) * (C + 1)
    assert 2 * n * kl < d + 5 * np.sqrt(2 * d), 2 * n * kl
    kl_before = np.mean(np.sum(q[n:] * (np.log(q[n:]) - np.log(p[n:])), axis=1))
    assert kl < kl_before / 20


def test_outputs_stay_on_the_simplex_even_with_zero_probabilities():
    p, y = _biased(12, 300)
    p_zero = p.copy()
    p_zero[:5, 0] = 0.0
    p_zero[:5] /= p_zero[:5].sum(axis=1, keepdims=True)
    for fit in (fit_temperature(p, y), fit_dirichlet(p, y)):
        for probs in (p, p_zero):
            out = fit.transform(probs)
            assert out.shape == probs.shape and np.all(np.isfinite(out)) and np.all(out >= 0)
            np.testing.assert_allclose(out.sum(axis=1), 1.0, atol=1e-12)


def test_dirichlet_errors_name_the_problem():
    p, y = _biased(13, 100)
    with pytest.raises(ValueError, match=r"class\(es\) \[3\] have no calibration labels"):
        fit_dirichlet(p, np.minimum(y, 2))
    with pytest.raises(ValueError, match="off_diagonal_penalty must be finite and >= 0"):
        fit_dirichlet(p, y, off_diagonal_penalty=-1.0)
    with pytest.raises(ValueError, match="probs has 3 classes but the recalibration was "
                                         "fitted with 4"):
        fit_dirichlet(p, y).transform(np.full((2, 3), 1 / 3))
