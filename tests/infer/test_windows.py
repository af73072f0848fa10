"""Fits that run as long as their own check needs: NUTS and Gibbs draw in windows until
R-hat and ESS pass (``ppgpc.infer.mcmc``), SVI steps until its ELBO settles
(``ppgpc.infer.svi``), and a fit holds OpenBLAS at one thread (``ppgpc.runtime.threads``)."""

import math
import warnings

import numpy as np
import pytest
import threadpoolctl

from conftest import toy_problem
from ppgpc.models.svgp import variational as svgp_schedule
from ppgpc import ConvergenceWarning
from ppgpc.infer import fit
from ppgpc.infer.convergence import ChainCheck, ConvergenceReport, chain_check
from ppgpc.infer.mcmc import CHECKPOINTS, DEFAULT_MAX_SAMPLES, checkpoints, draw_limits
from ppgpc.runtime.threads import blas_limited

HYPERS = {"kernel_variance": 2.0, "kernel_lengthscale": 1.5}


@pytest.fixture(scope="module")
def problem():
    return toy_problem(40, 3, seed=21)


def _report(result) -> ConvergenceReport:
    return result.info.convergence


def test_the_checkpoints_run_from_floor_to_cap():
    assert draw_limits(None, None) == (100, DEFAULT_MAX_SAMPLES)
    assert draw_limits(250, 100) == (250, 250)  # the cap never below the floor
    assert checkpoints(100, 2000) == tuple(c for c in CHECKPOINTS if c <= 2000)
    assert checkpoints(250, 900) == (250, 300, 500, 800, 900)
    assert checkpoints(60, 60) == (60,)


def test_nuts_stops_at_the_first_checkpoint_whose_check_passes(problem):
    """The default NUTS run ends converged, at a checkpoint below its cap; its draws at
    the checkpoint before fail the same check (so it did not run on past the need)."""
    X, y = problem
    result = fit("logistic_softmax", X, y, method="nuts", form="latent", hyperparameters=HYPERS,
                 progress_bar=False, seed=3)
    report = _report(result)
    draws = result.info.sampler.num_draws
    assert result.info.sampler.stop_reason == "converged" and report.converged
    # the warm-up ends when the adaptation has settled, at the default cap of 500 at most
    warmup = result.info.sampler.num_warmup
    assert report.chains.stop_reason == "converged" and report.chains.num_warmup == warmup
    assert warmup % 100 == 0 and 100 <= warmup <= 500
    assert draws in CHECKPOINTS and draws < DEFAULT_MAX_SAMPLES
    assert result.latent.shape[:2] == (4, draws)
    assert "4 chains x" in report.summary() and "stopped when the check passed" in \
        report.summary()
    earlier = [c for c in CHECKPOINTS if c < draws]
    if earlier:
        assert not chain_check({"f": np.asarray(result.latent)[:, :earlier[-1]]}).mixed


@pytest.mark.parametrize("method", ["nuts", "gibbs"])
def test_the_chains_are_independent(problem, method):
    """Chains started from one key would draw the same sequence: R-hat would read a perfect
    1 and the ESS four times too high. Each pair of chains must differ from its first draw,
    and the correlation between two chains' sequences of f (over draws, pooled over the
    entries of f after removing each entry's mean) must be that of independent sequences:
    |r| < 4.5 / sqrt(n_eff), n_eff the smallest bulk ESS of one chain."""
    X, y = problem
    options = dict(form="latent", hyperparameters=HYPERS) if method == "nuts" else {}
    result = fit("logistic_softmax", X, y, method=method, num_samples=200, max_samples=200,
                 progress_bar=False, seed=4, **options)
    f = np.asarray(result.latent)                                  # (chain, draw, N, C)
    num_chains = f.shape[0]
    assert num_chains == 4
    centred = (f - f.mean(axis=(0, 1))).reshape(num_chains, -1)
    per_chain_ess = chain_check({"f": f}).min_ess_bulk / num_chains
    for a in range(num_chains):
        for b in range(a + 1, num_chains):
            assert not np.allclose(f[a, 0], f[b, 0]), (a, b)
            r = np.corrcoef(centred[a], centred[b])[0, 1]
            assert abs(r) < 4.5 / np.sqrt(per_chain_ess), (a, b, r, per_chain_ess)


def test_sampled_hyperparameters_are_in_the_chain_check(problem):
    """NUTS on ILR-GP's latent form with its kernel hyperparameters sampled beside f: the
    check that stops the run (and that the report carries) covers the hyperparameters'
    draws as well as f's (they mix more slowly than f here, so a check of f alone reads a
    higher ESS: the test has the power to see them left out)."""
    X, y = problem
    result = fit("ilr_gp", X, y, method="nuts", form="latent", sample_hyperparameters=True,
                 num_warmup=200, num_samples=200, max_samples=200, progress_bar=False,
                 seed=2, model_options={"epsilon": 0.05})
    reported = result.info.convergence.chains
    hypers = {k: np.asarray(v) for k, v in result.hypers.items() if k.startswith("kernel_")}
    assert hypers and all(v.shape[:2] == (4, 200) for v in hypers.values())
    f_only = chain_check({"f": np.asarray(result.latent)})
    everything = chain_check({"f": np.asarray(result.latent), **hypers})
    assert everything.min_ess_bulk < f_only.min_ess_bulk       # the test's power
    assert reported.min_ess_bulk == pytest.approx(everything.min_ess_bulk, rel=1e-12)
    assert reported.max_rhat == pytest.approx(everything.max_rhat, rel=1e-12)


def test_num_samples_is_a_floor(problem):
    X, y = problem
    result = fit("logistic_softmax", X, y, method="nuts", form="latent", hyperparameters=HYPERS,
                 num_samples=650, progress_bar=False)
    assert result.info.sampler.num_draws >= 650
    assert result.info.sampler.num_draws in (650,) + CHECKPOINTS


def test_gibbs_at_its_cap_warns_with_advice_that_works_in_one_step(problem):
    """Gibbs stopped at a cap too low for its check warns naming ``max_samples``, sized from
    the R-hat and ESS it reached; a new user who follows the advice gets a converged fit."""
    X, y = problem
    with pytest.warns(ConvergenceWarning, match=r"max_samples=\d+") as caught:
        short = fit("logistic_softmax", X, y, method="gibbs", hyperparameters=HYPERS,
                    num_warmup=100, max_samples=100, progress_bar=False, seed=4)
    assert short.info.sampler.stop_reason == "max_samples" and short.info.sampler.num_draws == 100
    advised = int(str(caught[0].message).split("max_samples=")[1].split(")")[0])
    assert advised == _report(short).chains.draws_needed() > 100
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        again = fit("logistic_softmax", X, y, method="gibbs", hyperparameters=HYPERS,
                    num_warmup=100, max_samples=advised, progress_bar=False, seed=4)
    assert _report(again).converged and again.info.sampler.num_draws <= advised


def test_the_draws_needed_scale_with_the_ess_and_r_hat_reached():
    def check(rhat, ess, draws=400):
        return ChainCheck(num_chains=4, num_draws=draws, max_rhat=rhat, min_ess_bulk=ess,
                          min_ess_tail=ess, divergences=0, worst="f[0, 0]",
                          stop_reason="max_samples")
    # ESS 200 of 400 needed at 400 draws: twice the draws, a quarter more, in hundreds
    assert check(1.005, 200.0).draws_needed() == 1000
    # R-hat 1.03 three times the excess allowed
    assert check(1.03, 1000.0).draws_needed() == 1500
    assert check(math.nan, math.nan).draws_needed() == 1000
    assert check(1.005, 500.0).mixed and not check(1.011, 500.0).mixed


def test_svi_stops_when_its_elbo_settles_and_the_check_agrees(problem):
    """The default SVGP fit stops before ``max_iter`` because the convergence check's own
    test held for ``patience`` windows; a fit with ``tol=None`` runs every step."""
    from ppgpc import SoftmaxSVGPClassifier

    X, y = problem
    est = SoftmaxSVGPClassifier(progress=False).fit(X, y)
    info = est.result_.info
    assert info.svi.stopped_on == "elbo" and info.svi.converged
    assert info.svi.steps < svgp_schedule.FULL_BATCH_STEPS[0]
    assert est.convergence_.converged
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # (300 steps, on purpose)
        fixed = fit("softmax_svgp", X, y, method="svi", max_iter=300, tol=None,
                    progress_bar=False, model_options={"num_inducing": 10})
    assert fixed.info.svi.steps == 300 and fixed.info.svi.stopped_on == "max_iter"


def test_an_svi_run_at_its_cap_is_not_reported_converged_even_when_its_last_windows_agree(
        problem):
    """At a learning rate of 1e-6 the ELBO barely moves, so every pair of windows agrees,
    but with ``patience`` 3 the stopping test has not held long enough when the cap of two
    windows is reached: the run stopped at its cap, and the record, its check and the
    estimator's report all say not converged, with a warning."""
    X, y = problem
    with pytest.warns(ConvergenceWarning):
        capped = fit("softmax_svgp", X, y, method="svi", max_iter=200, learning_rate=1e-6,
                     patience=3, progress_bar=False, model_options={"num_inducing": 10})
    info = capped.info
    assert info.svi.stopped_on == "max_iter" and info.svi.steps == 200
    assert not info.svi.converged
    assert not info.convergence.converged


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpoolctl.threadpool_info()
            if i["user_api"] == "blas"]


def test_a_fit_runs_with_one_blas_thread_and_restores_the_users_setting(problem,
                                                                        monkeypatch):
    from ppgpc.infer import methods

    X, y = problem
    seen = []
    entry = methods.get_method("map")

    def spy(*args, **kwargs):
        seen.append(_blas_threads())
        return entry.runner(*args, **kwargs)

    monkeypatch.setitem(methods.METHODS, "map", entry._replace(runner=spy))
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        fit("ilr_gp", X, y, method="map")
        after = _blas_threads()
        with pytest.raises(RuntimeError):
            with blas_limited():
                assert set(_blas_threads()) == {1}
                raise RuntimeError("restored on an error too")
        assert _blas_threads() == before
    assert seen and all(set(s) == {1} for s in seen)
    assert after == before and set(before) == {2}


def test_the_blas_limit_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("PPGPC_BLAS_THREADS", "0")
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        with blas_limited():
            assert set(_blas_threads()) == {2}
    monkeypatch.setenv("PPGPC_BLAS_THREADS", "two")
    with pytest.raises(ValueError, match="PPGPC_BLAS_THREADS must be a whole number"):
        with blas_limited():
            pass


def test_nuts_chains_side_by_side_draw_what_they_draw_one_after_another(problem, monkeypatch):
    """On a CPU the chains run one per core (``ppgpc.runtime.chains``): every chain's draws
    are bitwise those of the chains run one after another, and those of the one program
    over all chains (``ppgpc.infer.mcmc.over_chains``); no two chains share a draw."""
    from ppgpc.runtime import chains

    X, y = problem
    short = dict(method="nuts", form="latent", hyperparameters=HYPERS, num_warmup=100,
                 num_samples=100, max_samples=100, num_chains=3, progress_bar=False, seed=5)

    def latent(at_once=None, per_chain=True):
        with monkeypatch.context() as patch:
            if at_once is not None:
                patch.setattr(chains, "chains_at_once", lambda n: at_once)
            patch.setattr(chains, "per_chain", lambda: per_chain)
            return np.asarray(fit("logistic_softmax", X, y, **short).latent)

    side_by_side = latent(at_once=3)
    np.testing.assert_array_equal(side_by_side, latent(at_once=1))
    np.testing.assert_array_equal(side_by_side, latent(per_chain=False))
    for a in range(3):
        for b in range(a):
            assert not np.any(side_by_side[a] == side_by_side[b]), (a, b)
