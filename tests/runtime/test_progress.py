"""``progress``: every estimator shows the loops of a fit on stderr by default, and
``progress=False`` writes nothing there."""

import numpy as np
import pytest

from conftest import toy_problem
from ppgpc import (DirichletGPClassifier, ILRGPClassifier, LogisticSoftmaxGPClassifier, Selection,
                   SoftmaxSVGPClassifier)
from ppgpc.runtime.progress import bar, note

# the short fits stop the optimisers early on purpose
pytestmark = pytest.mark.filterwarnings("ignore::ppgpc.ConvergenceWarning")


CASES = {
    # the epsilon search (one line per tau) and the final L-BFGS (its counter of
    # iterations, shown here from the start: COUNTER_DELAY is 0 in the test)
    "ILR": (lambda **kw: ILRGPClassifier(selection=Selection(grid=(0.9, 0.99)), **kw,
                                         inference_options={"max_iter": 5}),
            ("tau ", "leave-one-out NLL", "L-BFGS")),
    # the alpha_eps search by cross-validation: one line per grid value
    "GPD": (lambda **kw: DirichletGPClassifier(
        selection=Selection(grid=(0.01, 0.1), validation="cv", cv_folds=2), **kw,
        inference_options={"max_iter": 5}), ("alpha_eps 0.01", "held-out NLL", "L-BFGS")),
    "LSM-CAVI": (lambda **kw: LogisticSoftmaxGPClassifier(
        inference="cavi", **kw, inference_options={"max_iter": 5, "num_draws": 20}),
        ("CAVI",)),
    # the default NUTS: the CAVI fit of the hyperparameters, then the bar of the draws
    "LSM-NUTS": (lambda **kw: LogisticSoftmaxGPClassifier(**kw, inference_options={
        "num_warmup": 5, "num_samples": 5, "max_samples": 5, "num_chains": 1}),
        ("CAVI", "NUTS")),
    "LSM-Gibbs": (lambda **kw: LogisticSoftmaxGPClassifier(inference="gibbs", **kw,
                                                           inference_options={
        "num_warmup": 5, "num_samples": 5, "max_samples": 5, "num_chains": 1}),
        ("CAVI", "Gibbs")),
    "SVGP": (lambda **kw: SoftmaxSVGPClassifier(num_inducing=6, **kw, inference_options={
        "max_iter": 20, "num_draws": 20}), ("SVI",)),
}


@pytest.fixture(scope="module")
def data():
    return toy_problem(30, 3, seed=2)


@pytest.mark.parametrize("name", sorted(CASES))
def test_progress_false_writes_nothing_to_stderr_and_true_shows_the_loops(name, data, capfd,
                                                                          monkeypatch):
    from ppgpc.runtime import progress

    monkeypatch.setattr(progress, "COUNTER_DELAY", 0.0)  # these fits take under a second
    make, shown = CASES[name]
    X, y = data
    make(progress=False).fit(X, y)   # compile first: JAX may log once per process
    capfd.readouterr()
    quiet = make(progress=False).fit(X, y)
    out, err = capfd.readouterr()
    assert err == "" and out == ""
    loud = make().fit(X, y)          # progress=True is the default
    out, err = capfd.readouterr()
    assert out == ""
    for text in shown:
        assert text in err, (text, err[-500:])
    np.testing.assert_array_equal(loud.predict_proba(X), quiet.predict_proba(X))


def test_the_helper_is_silent_when_disabled(capfd):
    with bar(5, "steps", enabled=False) as b:
        b.update(5)
        b.set_postfix(x=1)
    note("a line", enabled=False)
    assert capfd.readouterr() == ("", "")
    note("a line", enabled=True)
    with bar(2, "steps", enabled=True) as b:
        b.update(2)
    err = capfd.readouterr().err
    assert err.startswith("a line\n") and "steps" in err


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_line_shows_before_anything_compiles(name, data, capfd, monkeypatch):
    """The first line comes before the fit's first compilation (seconds of silence on a
    new data shape otherwise): here the fit stops where its first program would compile."""
    make, _ = CASES[name]
    X, y = data
    est = make()

    def stop(*args, **kwargs):
        raise RuntimeError("stopped before compiling")

    monkeypatch.setattr(est, "_select_model_options", stop)
    capfd.readouterr()
    with pytest.raises(RuntimeError, match="stopped before compiling"):
        est.fit(X, y)
    err = capfd.readouterr().err
    assert err.startswith(f"{type(est).__name__}: fitting {len(y)} points, {X.shape[1]} "
                          f"inputs, 3 classes"), err
