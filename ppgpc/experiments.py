"""The papers' evaluation protocols, shared by the CLI (``ppgpc compare``) and the benchmarks.

Exact setting (ILR paper, section 5 and appendix B): for each seed, hold out 50 test points
(stratified, ``ppgpc.datasets.paper_split``); the classifier gets the other points and
chooses its own smoothing parameter from them (by closed-form leave-one-out NLL by
default, where the paper used one 10% split); report accuracy, NLL and ECE
(docs/math.md section 7) on the test points, plus the fit time.

Every classifier runs with its estimator's defaults: what the protocol reports is what a
user gets. For Exact-ILR and GPD those are type-II MAP kernel hyperparameters and the
smoothing level chosen by closed-form leave-one-out NLL (``docs/records/defaults.md`` has the
measurements behind both).

Synthetic studies (ILR paper, section 5): ``epsilon_overlap_sweep`` (the effect of epsilon
as the classes overlap, its Fig. 5) and ``scaling_with_classes`` (its Fig. 6), both on the
circle mixture of ``ppgpc.datasets.synthetic``.
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple

import numpy as np

from ppgpc.catalog import CLASSIFIERS
from ppgpc.datasets import DATASETS, load, paper_split
from ppgpc.evaluation import metrics

__all__ = [
    "table_split",
    "fit_and_score",
    "fit_points",
    "EXACT_CLASSIFIERS",
    "PAPER_EXACT",
    "SPARSE_CLASSIFIERS",
    "PAPER_SPARSE",
    "PAPER_SPARSE_OPTIONS",
    "SVI_SPARSE_MODELS",
    "RunResult",
    "benchmark_split",
    "run_split",
    "summarize",
    "format_cell",
    "PAPER_COMPARISON_HEADER",
    "paper_comparison_cells",
    "print_table_header",
    "SweepRow",
    "epsilon_overlap_sweep",
    "ScalingRow",
    "BAYES",
    "scaling_with_classes",
]


def _factory(estimator: str, fixed: dict) -> Callable[..., object]:
    """factory(seed, **options): the ``ppgpc.estimators`` class ``estimator`` with the
    options ``fixed`` and then ``options`` (``inference_options`` merged, the caller's
    winning)."""
    def build(seed: int, **options):
        from ppgpc import estimators

        merged = {**fixed, **options}
        if "inference_options" in fixed:
            merged["inference_options"] = {**fixed["inference_options"],
                                           **(options.get("inference_options") or {})}
        return getattr(estimators, estimator)(seed=seed, **merged)
    return build


EXACT_CLASSIFIERS: dict[str, Callable[..., object]] = {
    c.row: _factory(c.estimator, {}) for c in CLASSIFIERS}
"""Classifiers of the exact setting: row name -> factory(seed, **options) returning an
estimator with its defaults (``ppgpc.catalog.Classifier.row``). SVGPC (the sparse
variational baseline) has min(200, N) inducing inputs, so on these small sets it places one
at every training input; the paper has no row for it."""

PAPER_EXACT = {
    # ILR paper, appendix B, Table 3: (accuracy, NLL, ECE) means and standard deviations.
    ("wine", "Exact-ILR"): ((0.98, 0.017), (0.05, 0.024), (0.06, 0.019)),
    ("glass", "Exact-ILR"): ((0.71, 0.023), (0.74, 0.081), (0.11, 0.014)),
    ("thyroid", "Exact-ILR"): ((0.96, 0.017), (0.13, 0.042), (0.05, 0.019)),
    ("wine", "GPD"): ((0.98, 0.017), (0.06, 0.024), (0.07, 0.018)),
    ("glass", "GPD"): ((0.71, 0.050), (0.81, 0.100), (0.13, 0.023)),
    ("thyroid", "GPD"): ((0.96, 0.017), (0.12, 0.042), (0.06, 0.019)),
    ("wine", "LSM"): ((0.98, 0.017), (0.52, 0.023), (0.36, 0.010)),
    ("glass", "LSM"): ((0.56, 0.041), (1.24, 0.028), (0.26, 0.049)),
    ("thyroid", "LSM"): ((0.83, 0.046), (0.44, 0.042), (0.14, 0.041)),
}
"""The ILR paper's exact-setting rows (appendix B, Table 3): (dataset, model) ->
((accuracy mean, sd), (NLL mean, sd), (ECE mean, sd))."""

SPARSE_CLASSIFIERS: dict[str, Callable[..., object]] = {
    row: _factory(c.estimator, fixed) for c in CLASSIFIERS
    for row, fixed in c.sparse_rows.items()}
"""Classifiers of the sparse setting (``num_inducing`` option), row name -> factory
(``ppgpc.catalog.Classifier.sparse_rows``): the collapsed Titsias bound (Collapsed-ILR,
sparse GPD), minibatch SVI (SVGPC, Uncollapsed-ILR) and the logistic-softmax GP's sparse
stochastic CAVI (Sparse-LSM: ``inference="cavi"`` with minibatches of 128 points and 1000
iterations unless ``inference_options`` say otherwise). The minibatch methods read
``batch_size``, ``max_iter``, ``learning_rate`` and ``validation_fraction`` from
``inference_options``."""

SVI_SPARSE_MODELS = tuple(row for c in CLASSIFIERS for row, fixed in c.sparse_rows.items()
                          if fixed.get("inference", c.inferences[0]) == "svi")
"""The sparse-setting models fitted by SVI (their options differ from the L-BFGS ones)."""


def _factories(models) -> dict[str, Callable[..., object]]:
    """Each of ``models`` (row names of either setting) -> its factory; a ValueError names
    unknown ones."""
    rows = {**EXACT_CLASSIFIERS, **SPARSE_CLASSIFIERS}
    unknown = [m for m in models if m not in rows]
    if unknown:
        raise ValueError(f"unknown model(s) {unknown}; known: {list(rows)}")
    return {m: rows[m] for m in models}


PAPER_SPARSE = {
    # ILR paper, appendix B, Table 3, sparse setting (200 inducing points).
    ("letter", "Collapsed-ILR"): ((0.95, 0.002), (0.16, 0.003), (0.04, 0.001)),
    ("magic", "Collapsed-ILR"): ((0.87, 0.002), (0.32, 0.005), (0.02, 0.006)),
    ("htru2", "Collapsed-ILR"): ((0.98, 0.002), (0.07, 0.005), (0.04, 0.002)),
    ("eeg", "Collapsed-ILR"): ((0.89, 0.034), (0.26, 0.070), (0.03, 0.008)),
    ("letter", "Sparse-GPD"): ((0.96, 0.002), (0.12, 0.004), (0.04, 0.001)),
    ("magic", "Sparse-GPD"): ((0.87, 0.003), (0.33, 0.004), (0.03, 0.002)),
    ("htru2", "Sparse-GPD"): ((0.98, 0.002), (0.08, 0.006), (0.04, 0.001)),
    ("eeg", "Sparse-GPD"): ((0.88, 0.034), (0.28, 0.077), (0.03, 0.004)),
    ("letter", "SVGPC"): ((0.96, 0.002), (0.13, 0.008), (0.04, 0.002)),
    ("magic", "SVGPC"): ((0.86, 0.004), (0.33, 0.003), (0.03, 0.004)),
    ("htru2", "SVGPC"): ((0.98, 0.002), (0.07, 0.004), (0.04, 0.001)),
    ("eeg", "SVGPC"): ((0.81, 0.027), (0.40, 0.044), (0.04, 0.007)),
    ("letter", "Uncollapsed-ILR"): ((0.96, 0.002), (0.13, 0.008), (0.04, 0.003)),
    ("magic", "Uncollapsed-ILR"): ((0.86, 0.003), (0.33, 0.003), (0.02, 0.004)),
    ("htru2", "Uncollapsed-ILR"): ((0.98, 0.002), (0.07, 0.004), (0.04, 0.001)),
    ("eeg", "Uncollapsed-ILR"): ((0.82, 0.026), (0.39, 0.046), (0.03, 0.005)),
    ("letter", "Sparse-LSM"): ((0.76, 0.004), (1.47, 0.009), (0.48, 0.004)),
    ("magic", "Sparse-LSM"): ((0.82, 0.002), (0.43, 0.003), (0.10, 0.005)),
    ("htru2", "Sparse-LSM"): ((0.97, 0.002), (0.09, 0.004), (0.05, 0.002)),
    ("eeg", "Sparse-LSM"): ((0.65, 0.047), (0.60, 0.027), (0.07, 0.016)),
}
"""The paper's sparse-setting rows (its selected smoothing values: ``PAPER_SPARSE_OPTIONS``)."""

PAPER_SPARSE_OPTIONS = {
    # The values the paper's validation selected (Table 3): epsilon for Collapsed-ILR,
    # alpha_eps for GPD; the sparse benchmark uses them instead of repeating the search.
    ("letter", "Collapsed-ILR"): {"epsilon": 0.999999},
    ("magic", "Collapsed-ILR"): {"epsilon": 0.95},
    ("htru2", "Collapsed-ILR"): {"epsilon": 0.99},
    ("eeg", "Collapsed-ILR"): {"epsilon": 0.99},
    ("letter", "Sparse-GPD"): {"alpha_eps": 1e-4},
    ("magic", "Sparse-GPD"): {"alpha_eps": 0.1},
    ("htru2", "Sparse-GPD"): {"alpha_eps": 0.01},
    ("eeg", "Sparse-GPD"): {"alpha_eps": 0.01},
}
"""The smoothing values the paper's validation selected for its sparse setting (Table 3):
(dataset, model) -> estimator options (epsilon for Collapsed-ILR, alpha_eps for GPD)."""


class RunResult(NamedTuple):
    """One classifier on one split."""

    dataset: str
    model: str
    seed: int
    accuracy: float
    nll: float
    ece: float
    brier: float
    fit_seconds: float
    probs: np.ndarray
    """(n_test, C) predictive probabilities."""
    y_test: np.ndarray
    """(n_test,) test labels as indices into the estimator's ``classes_``."""
    estimator: object


def benchmark_split(dataset: str, seed: int, *, data_dir=None, n_test: int | None = None):
    """The seeded, stratified ``paper_split`` of ``dataset`` that ``run_split`` scores on
    (``n_test`` defaults to the paper's test size), so that a saved fit can be re-scored on
    the same test points."""
    X, y = load(dataset, data_dir)
    n_test = DATASETS[dataset].paper_n_test if n_test is None else n_test
    return paper_split(X, y, seed=seed, n_test=n_test)


def table_split(X, y, seed: int):
    """The seeded, stratified split of a user's table that ``ppgpc compare --csv`` scores on:
    a fifth of the rows (at least one per class) held out for testing, the rest for
    fitting (``paper_split`` with its default validation share, which the estimators'
    own selection does not use: it is fitted on with the training rows)."""
    num_classes = len(np.unique(np.asarray(y).astype(str)))
    n_test = max(num_classes, int(round(0.2 * len(y))))
    return paper_split(X, y, seed=seed, n_test=n_test)


def fit_points(split, seed: int, max_train: int | None = None):
    """(X, y) that ``fit_and_score`` fits on: the split's training and validation points,
    subsampled to ``max_train`` with ``seed`` when there are more."""
    X_fit = np.concatenate([split.X_train, split.X_val])
    y_fit = np.concatenate([split.y_train, split.y_val])
    if max_train is not None and X_fit.shape[0] > max_train:
        keep = np.random.default_rng(seed).choice(X_fit.shape[0], max_train, replace=False)
        X_fit, y_fit = X_fit[keep], y_fit[keep]
    return X_fit, y_fit


def fit_and_score(model: str, seed: int, split, *, dataset: str = "",
                  max_train: int | None = None, factory: Callable | None = None,
                  quiet: bool = False, **options) -> RunResult:
    """Fit ``model`` on the training and validation points of ``split`` and score it on its
    test points.

    Args:
        model: a key of ``EXACT_CLASSIFIERS`` or ``SPARSE_CLASSIFIERS``.
        seed: subsample and model seed.
        split: a ``ppgpc.datasets.Split``.
        dataset: the name the result carries.
        max_train: subsample the fitting points (for quick runs).
        factory: ``factory(seed, **options)`` building the estimator instead of the
            registry's (a benchmark that measures options outside the estimators' API).
        quiet: no progress output from the fit.
        **options: passed to the classifier factory.
    """
    known = _factories([model])
    X_fit, y_fit = fit_points(split, seed, max_train)
    if quiet:
        options = {"progress": False, **options}
    estimator = (factory or known[model])(seed, **options)
    start = time.perf_counter()
    estimator.fit(X_fit, y_fit)
    seconds = time.perf_counter() - start
    probs = estimator.predict_proba(split.X_test)
    codes = estimator.encode_classes(split.y_test, split.X_test.shape[0])
    scores = metrics.evaluate(probs, codes)
    return RunResult(dataset, model, seed, scores["accuracy"], scores["nll"], scores["ece"],
                     scores["brier"], seconds, probs, codes, estimator)


def run_split(dataset: str, model: str, seed: int, *, data_dir=None, n_test: int | None = None,
              max_train: int | None = None, factory: Callable | None = None,
              **options) -> RunResult:
    """Fit ``model`` on one seeded split of ``dataset`` (``benchmark_split``) and score it on
    the test points (``fit_and_score``).

    Args:
        dataset: a name known to ``ppgpc.datasets``.
        model: a key of ``EXACT_CLASSIFIERS``.
        seed: split and model seed.
        n_test: test size (default: the paper's, 50 for the small sets).
        max_train, factory, **options: as ``fit_and_score``'s.
    """
    _factories([model])
    split = benchmark_split(dataset, seed, data_dir=data_dir, n_test=n_test)
    return fit_and_score(model, seed, split, dataset=dataset, max_train=max_train,
                         factory=factory, **options)


def format_cell(ours, paper, lower_is_better: bool) -> str:
    """A benchmark table cell: ``"mean ± sd"`` and whether it is within one paper standard
    deviation of the paper's mean or better (``ok``) or not (``--``).

    Args:
        ours: (mean, sd) over seeds.
        paper: the paper's (mean, sd), or None when the paper has no such row.
        lower_is_better: True for NLL and ECE, False for accuracy.
    """
    mean, sd = ours
    text = f"{mean:.3f} ± {sd:.3f}"
    if paper is None:
        return text + "   "
    p_mean, p_sd = paper
    ok = mean <= p_mean + p_sd if lower_is_better else mean >= p_mean - p_sd
    return text + (" ok" if ok else " --")


PAPER_COMPARISON_HEADER = (f"{'accuracy':>17s} {'NLL':>17s} {'ECE':>17s} {'fit s':>7s}   "
                           "paper (acc / NLL / ECE)")
"""Column titles of ``paper_comparison_cells``."""


def paper_comparison_cells(summary: dict, paper) -> str:
    """The right-hand part of a benchmark row that sets our scores beside the paper's.

    Accuracy, NLL and top-label ECE cells (``format_cell``, 17 characters each), the mean
    fit seconds, then the paper's three means (``"n/a"`` without a paper row); the columns
    of ``PAPER_COMPARISON_HEADER``.

    Args:
        summary: ``summarize`` of the runs.
        paper: the paper's ((mean, sd) of accuracy, of NLL, of ECE), or None.
    """
    p_acc, p_nll, p_ece = paper if paper else (None, None, None)
    paper_text = f"{p_acc[0]:.2f} / {p_nll[0]:.2f} / {p_ece[0]:.2f}" if paper else "n/a"
    return (f"{format_cell(summary['accuracy'], p_acc, False):>17s} "
            f"{format_cell(summary['nll'], p_nll, True):>17s} "
            f"{format_cell(summary['ece'], p_ece, True):>17s} "
            f"{summary['fit_seconds'][0]:7.1f}   {paper_text}")


def print_table_header(header: str) -> None:
    """Print a benchmark table's column titles and, under them, a rule of dashes as long."""
    print(header)
    print("-" * len(header))


def summarize(runs: list[RunResult]) -> dict:
    """Mean and standard deviation of accuracy, NLL, ECE and fit seconds over runs."""
    out = {}
    for field in ("accuracy", "nll", "ece", "brier", "fit_seconds"):
        values = np.array([getattr(r, field) for r in runs], dtype=float)
        out[field] = (float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else 0.0)
    return out


# ------------------------------------------------------------------ synthetic studies


class SweepRow(NamedTuple):
    """Exact-ILR with one fixed epsilon on one overlap level of the circle mixture."""

    sigma: float
    epsilon: float
    accuracy: float
    nll: float
    ece: float
    bayes_nll: float
    """NLL of the true class probabilities on the same test points (the floor)."""
    bayes_ece: float
    """ECE of the true class probabilities (non-zero only through finite-sample noise)."""


def epsilon_overlap_sweep(sigmas, epsilons, *, n_train: int = 200, n_test: int = 500,
                          num_classes: int = 3, radius: float = 1.0, seed: int = 0,
                          **options) -> list[SweepRow]:
    """The ILR paper's effect-of-epsilon study (its Fig. 5) on the circle mixture.

    For each overlap level sigma one training and one test set are drawn
    (``ppgpc.datasets.synthetic.mixture_problem``); Exact-ILR is fitted with each fixed
    epsilon and scored on the test set (accuracy, NLL, top-label ECE; docs/math.md section 7),
    next to the scores of the true class probabilities.

    Args:
        sigmas: component standard deviations (overlap levels).
        epsilons: label-smoothing levels in (0, 1).
        n_train, n_test, num_classes, radius, seed: the mixture (``mixture_problem``).
        **options: passed to ``ILRGPClassifier`` (e.g. ``tau``, ``kernel``).

    Returns:
        One row per (sigma, epsilon), sigma-major.
    """
    from ppgpc.datasets.synthetic import mixture_problem
    from ppgpc.estimators import ILRGPClassifier

    sigmas, epsilons = [float(s) for s in sigmas], [float(e) for e in epsilons]
    if not sigmas or not epsilons:
        raise ValueError("sigmas and epsilons must each hold at least one value")
    bad = [e for e in epsilons if not 0.0 < e < 1.0]
    if bad:
        raise ValueError(f"every epsilon must lie in (0, 1); got {bad}")
    rows = []
    for sigma in sigmas:
        problem = mixture_problem(n_train, n_test, num_classes, sigma, radius=radius, seed=seed)
        truth = metrics.evaluate(problem.bayes_probabilities(problem.X_test), problem.y_test)
        for epsilon in epsilons:
            clf = ILRGPClassifier(epsilon=epsilon, seed=seed, **options)
            clf.fit(problem.X_train, problem.y_train)
            scores = clf.evaluate(problem.X_test, problem.y_test)
            rows.append(SweepRow(sigma, epsilon, scores["accuracy"], scores["nll"],
                                 scores["ece"], truth["nll"], truth["ece"]))
    return rows


class ScalingRow(NamedTuple):
    """One classifier on the circle mixture with a given number of classes."""

    num_classes: int
    model: str
    accuracy: float
    nll: float
    ece: float
    fit_seconds: float


BAYES = "Bayes"
"""Model name of the rows that score the true class probabilities."""


def scaling_with_classes(class_counts, models=("Exact-ILR", "GPD"), *, n_train: int = 200,
                         n_test: int = 500, sigma: float = 0.15, radius: float = 1.0,
                         seed: int = 0, options: dict | None = None) -> list[ScalingRow]:
    """The ILR paper's scaling-with-classes study (its Fig. 6) on the circle mixture.

    For each C in ``class_counts`` one problem is drawn with C components of shared
    standard deviation ``sigma`` on a circle of radius ``radius`` (neighbouring means are
    ``2 r sin(pi / C)`` apart, so the overlap grows with C); each model is fitted on the
    training points and scored on the test points. A ``"Bayes"`` row per C scores the true
    class probabilities, the best any classifier can do.

    Args:
        class_counts: the values of C (each >= 2).
        models: keys of ``EXACT_CLASSIFIERS`` or ``SPARSE_CLASSIFIERS``.
        n_train, n_test, sigma, radius, seed: the mixture (``mixture_problem``).
        options: ``{model: {option: value}}`` passed to each classifier factory, e.g.
            ``{"Exact-ILR": {"epsilon": 0.99}}``.

    Returns:
        Rows ordered by C, then the Bayes row, then ``models`` in order.
    """
    from ppgpc.datasets.synthetic import mixture_problem

    factories = _factories(models)
    options = dict(options or {})
    stray = sorted(set(options) - set(models))
    if stray:
        raise ValueError(f"options given for model(s) {stray} that are not in models={list(models)}")
    rows = []
    for C in class_counts:
        problem = mixture_problem(n_train, n_test, int(C), sigma, radius=radius, seed=seed)
        truth = metrics.evaluate(problem.bayes_probabilities(problem.X_test), problem.y_test)
        rows.append(ScalingRow(int(C), BAYES, truth["accuracy"], truth["nll"], truth["ece"], 0.0))
        for model in models:
            estimator = factories[model](seed, **options.get(model, {}))
            start = time.perf_counter()
            estimator.fit(problem.X_train, problem.y_train)
            seconds = time.perf_counter() - start
            scores = estimator.evaluate(problem.X_test, problem.y_test)
            rows.append(ScalingRow(int(C), model, scores["accuracy"], scores["nll"],
                                   scores["ece"], seconds))
    return rows
