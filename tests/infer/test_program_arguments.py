"""Numbers a user varies from run to run are arguments of the compiled programs, never
constants baked into them: in one process, a second fit that changes only a learning rate,
a step count, a warm-up length or a number of draws traces no new program (counted with
``jax.monitoring``'s trace event, ``compile_count.count_traces``), so following a
``ConvergenceWarning``'s advice or grid-searching a learning rate compiles nothing."""

import warnings

import pytest

from compile_count import count_traces
from conftest import toy_problem
from ppgpc import LogisticSoftmaxGPClassifier, SoftmaxSVGPClassifier


@pytest.fixture(scope="module")
def problem():
    return toy_problem(40, 3, seed=5)


def _traced_by_second_fit(estimator, first: dict, second: dict, X, y) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator(inference_options=first, progress=False).fit(X, y)
        with count_traces() as traced:
            estimator(inference_options=second, progress=False).fit(X, y)
    return traced


@pytest.mark.parametrize("second", [
    {"learning_rate": 0.02, "max_iter": 300},
    {"learning_rate": 0.05, "max_iter": 500},
    {"learning_rate": 0.05, "max_iter": 300, "warmup_steps": 20},
], ids=["learning_rate", "max_iter", "warmup_steps"])
def test_an_svi_fit_that_changes_only_its_schedules_numbers_traces_nothing(problem, second):
    X, y = problem
    traced = _traced_by_second_fit(SoftmaxSVGPClassifier,
                                   {"learning_rate": 0.05, "max_iter": 300}, second, X, y)
    assert traced == []


def test_a_nuts_fit_that_changes_only_its_warm_up_length_traces_nothing(problem):
    """The same number of draws kept (floor and cap 200), another warm-up: nothing traces."""
    X, y = problem
    draws = {"num_samples": 200, "max_samples": 200}
    assert _traced_by_second_fit(LogisticSoftmaxGPClassifier, {"num_warmup": 200, **draws},
                                 {"num_warmup": 300, **draws}, X, y) == []


def test_a_nuts_fit_that_changes_only_its_draws_traces_none_of_the_samplers_programs(problem):
    """More draws: the sampler's programs (init, one chain's window, all chains' window)
    trace nothing; what traces is moving the kept draws, an array of the new length (one of
    the few checkpoint lengths, ``ppgpc.infer.mcmc.CHECKPOINTS``), to the device and the
    reductions over it."""
    X, y = problem
    traced = _traced_by_second_fit(LogisticSoftmaxGPClassifier,
                                   {"num_samples": 200, "max_samples": 200},
                                   {"num_samples": 300, "max_samples": 300}, X, y)
    assert {"init", "chain", "window", "prior_factor"}.isdisjoint(traced), traced


def test_a_fit_that_changes_only_values_keeps_its_training_signature():
    """The numbers of ``Options.VALUES`` do not enter a fit's training signature
    (``ppgpc.runtime.programs.use_training_shape``), so a long session that varies them
    counts no new training shape and never releases the programs for them; structure
    (here the chains) does."""
    from ppgpc.infer.methods import check_method_options

    base = check_method_options("nuts", {})
    assert base.structure() == check_method_options("nuts", {
        "num_warmup": 300, "num_samples": 200, "max_samples": 200,
        "progress_bar": False}).structure()
    assert base.structure() != check_method_options("nuts", {"num_chains": 2}).structure()
    svi = check_method_options("svi", {})
    assert svi.structure() == check_method_options("svi", {
        "learning_rate": 0.02, "max_iter": 300, "warmup_steps": 20}).structure()
