"""NUTS's warm-up from draws and gradients (``ppgpc.infer.adaptation``), wired into the
windowed NUTS programs (``ppgpc.infer.mcmc``)."""

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from compile_count import count_compilations
from conftest import SMALL

from ppgpc.infer import mcmc
from ppgpc.infer.adaptation import adaptation_init, find_step_size, schedule
from ppgpc.infer.mcmc import (
    WINDOW,
    _nuts_programs,
    _SettledWarmup,
    chain_keys,
    run_nuts,
    sample_windows,
)

DIM = 20
SCALES = np.logspace(-2.0, 2.0, DIM)
"""Standard deviations of the target, 1e-2 to 1e2: variances 8 orders of magnitude apart."""
MEANS = np.linspace(-1.0, 1.0, DIM) * SCALES


def gaussian(loc, scale):
    numpyro.sample("x", dist.Normal(loc, scale))


def _args():
    return (jnp.asarray(MEANS), jnp.asarray(SCALES))


def test_the_schedule_splits_a_traced_warmup():
    early, step_start = jax.jit(schedule)(jnp.asarray(500, jnp.int32))
    assert (int(early), int(step_start)) == (150, 425)
    assert tuple(int(v) for v in schedule(jnp.asarray(0, jnp.int32))) == (0, 0)


def test_the_initial_mass_matrix_is_the_inverse_gradient():
    x = jnp.asarray([1.0, 2.0, 3.0])
    g = jnp.asarray([4.0, 0.0, -0.25])
    adapt = adaptation_init(x, g)
    np.testing.assert_allclose(adapt.inverse_mass, [0.25, 1.0, 4.0])
    np.testing.assert_allclose(adapt.mass_factor, [2.0, 1.0, 0.5])


def test_the_step_size_search_stops_past_the_crossing():
    """On accept(eps) = exp(-eps^2) the crossing of 0.8 is at eps* = 0.472: from 0.1 the
    search doubles to 0.8 (the first step past eps*), from 10 it halves to 0.3125."""
    accept = lambda eps: jnp.exp(-eps ** 2)
    step, count = find_step_size(accept, jnp.asarray(0.1), 0.8)
    assert float(step) == pytest.approx(0.8) and int(count) == 4
    step, count = find_step_size(accept, jnp.asarray(10.0), 0.8)
    assert float(step) == pytest.approx(0.3125) and int(count) == 6


def test_the_mass_matrix_of_a_diagonal_gaussian_is_its_covariance_and_the_draws_match_it():
    """For U(x) = sum_i (x_i - m_i)^2 / (2 s_i^2), scales s from 1e-2 to 1e2, the warm-up
    must end with M^-1_ii near its expectation n / (n + 5) s_i^2 + 1e-3 5 / (n + 5), n the
    front estimator's draws: a variance from n draws with an ESS of at least n / 4 has a
    relative sd of at most sqrt(8 / n), so |log(M^-1_ii / expectation)| < 4.5 sqrt(8 / n)
    for every one of the 4 x 20 entries; a mass matrix left at its start, or any estimate
    off by the scales' spread, fails by orders of magnitude. Then the draws' means and
    variances match (m, s^2) within their Monte Carlo error from ESS: |z| < 4.5 for each of
    the 2 x 20 checks (two-sided 7e-6 each)."""
    num_warmup, num_chains = 200, 4
    windows = (300 if SMALL else 1000) // WINDOW
    init, window, _ = _nuts_programs(gaussian, 0.8, 10, False, None)
    args = _args()
    states = init(chain_keys(jax.random.PRNGKey(5), num_chains), args, {},
                  jnp.asarray(num_warmup, jnp.int32))
    for _ in range(num_warmup // WINDOW):
        states, _ = window(states, args)
    n = np.asarray(states.adapt.front.count, dtype=float)[:, None]        # (chain, 1)
    expected = n / (n + 5.0) * SCALES ** 2 + 1e-3 * 5.0 / (n + 5.0)
    log_ratio = np.log(np.asarray(states.adapt.inverse_mass) / expected)
    assert np.all(n >= 20)
    assert np.all(np.abs(log_ratio) < 4.5 * np.sqrt(8.0 / n)), np.abs(log_ratio).max()
    draws = []
    for _ in range(windows):
        states, (d, stats) = window(states, args)
        draws.append(np.asarray(d["x"]))
        assert not np.any(np.asarray(stats["diverging"]))
    x = np.concatenate(draws, axis=1)  # (chain, draw, DIM)

    def z_scores(values, expected):
        ess = az.ess(az.convert_to_dataset({"v": values}), method="mean")["v"].values
        se = values.reshape(-1, DIM).std(0) / np.sqrt(ess)
        return (values.reshape(-1, DIM).mean(0) - expected) / se

    assert np.max(np.abs(z_scores(x, MEANS))) < 4.5
    assert np.max(np.abs(z_scores((x - MEANS) ** 2, SCALES ** 2))) < 4.5


def test_a_new_warmup_length_compiles_no_program():
    """The warm-up length is a value of the chains' state: a second run that changes only
    ``num_warmup`` reuses every program of the first."""
    kwargs = dict(num_samples=WINDOW, max_samples=WINDOW, progress_bar=False)
    first = run_nuts(jax.random.PRNGKey(0), gaussian, _args(), num_warmup=100, **kwargs)
    with count_compilations() as compiled:
        second = run_nuts(jax.random.PRNGKey(1), gaussian, _args(), num_warmup=300, **kwargs)
    assert compiled == []
    assert (first.sampler.num_warmup, second.sampler.num_warmup) == (100, 300)
    assert second.samples["x"].shape == (4, WINDOW, DIM)


def standard_gaussian(loc):
    numpyro.sample("x", dist.Normal(loc, 1.0))


def _settled_run(model, args, key, cap):
    """``sample_windows`` of NUTS on ``model(*args)`` with the settled end
    (``_SettledWarmup``), warm-up at most ``cap``, then one window of draws: (sampler
    record, draws' stats, the chains' states after every window)."""
    init, window, _ = _nuts_programs(model, 0.8, 10, False, None)
    states = init(chain_keys(key, 4), args, {}, jnp.asarray(cap, jnp.int32))
    seen = []

    def recorded(states, args):
        out = window(states, args)
        seen.append(jax.device_get(out[0]))
        return out

    _, stats, sampler, _ = sample_windows(
        recorded, states, args, num_warmup=cap, num_samples=WINDOW, max_samples=WINDOW,
        checked=lambda d: d, desc="NUTS", progress=False, settle=_SettledWarmup(0.8))
    return sampler, stats, seen


def test_the_warmup_ends_early_on_an_easy_target_and_reports_what_it_ran():
    """A standard Gaussian (D = 20) is adapted after the first windows: with a cap of 1,000
    the warm-up must end by 600. (The schedule of a 1,000 warm-up swaps its estimator every
    10 draws up to draw 300, so the mass matrices at 100, 200 and 300 are each from about
    10 draws and differ by their noise; the estimator of the draws from 300 on is compared
    at 500 with the one at 400, and the last window ends at 600.) The reported warm-up is the one the chains ran: every state holds it, the
    last window's states have made exactly warm-up + kept draws transitions, and every kept
    draw ran at the final step size (the adaptation had stopped)."""
    sampler, stats, seen = _settled_run(standard_gaussian, (jnp.zeros(DIM),), jax.random.PRNGKey(3), 1000)
    assert 300 <= sampler.num_warmup <= 600, sampler.num_warmup
    last = seen[-1]
    assert np.all(np.asarray(last.num_warmup) == sampler.num_warmup)
    assert np.all(np.asarray(last.i) == sampler.num_warmup + sampler.num_draws)
    step = np.asarray(stats["step_size"])                       # (chain, draw)
    np.testing.assert_array_equal(step, np.broadcast_to(step[:, :1], step.shape))
    np.testing.assert_allclose(step[:, 0], np.asarray(last.adapt.step_size))


def test_a_badly_scaled_target_ends_its_warmup_only_with_its_scales_learnt(monkeypatch):
    """The Gaussian of scales 1e-2 to 1e2: whenever the warm-up ends (a cap of 500), M^-1 must
    match the target: |log(M^-1_ii / expectation)| < 4.5 sqrt(8 / n) for all 4 x 20 entries
    (the bound of the test above; n the front estimator's draws), and the step size must be
    that of a unit-scaled Gaussian in D = 20 at acceptance 0.8, within a factor of 2 of the
    fixed 500 warm-up's (a step size set for the smallest scale alone would be 1e-2 of it)."""
    sampler, _, seen = _settled_run(gaussian, _args(), jax.random.PRNGKey(5), 500)
    assert sampler.num_warmup <= 500
    end = seen[sampler.num_warmup // WINDOW - 1]         # the states at the warm-up's end
    n = np.asarray(end.adapt.front.count, dtype=float)[:, None]
    expected = n / (n + 5.0) * SCALES ** 2 + 1e-3 * 5.0 / (n + 5.0)
    log_ratio = np.log(np.asarray(end.adapt.inverse_mass) / expected)
    assert np.all(n >= 20)
    assert np.all(np.abs(log_ratio) < 4.5 * np.sqrt(8.0 / n)), np.abs(log_ratio).max()
    monkeypatch.setattr(mcmc, "SETTLED_END", False)
    fixed = run_nuts(jax.random.PRNGKey(5), gaussian, _args(), num_warmup=500,
                     num_samples=WINDOW, max_samples=WINDOW, progress_bar=False)
    assert fixed.sampler.num_warmup == 500
    fixed_step = np.asarray(fixed.sample_stats["step_size"])[:, 0]
    ratio = np.asarray(end.adapt.step_size) / fixed_step.mean()
    assert np.all((ratio > 0.5) & (ratio < 2.0)), ratio
