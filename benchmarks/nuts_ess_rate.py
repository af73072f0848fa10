"""Effective samples per second of NUTS on GP classifiers' latent posteriors: ppgpc against
nutpie (PyMC's Rust NUTS), on the same posterior, side by side.

The posterior of the first rows: the logistic-softmax GP's latent f_c = chol(K) v_c,
v_c ~ N(0, I_N) for C = 3 classes, y_i ~ Categorical with p(y = k | f) = sigma(f_k) /
sum_c sigma(f_c), a fixed RBF kernel (variance 2, lengthscale 2 on standardised inputs),
N = 200 points of ``make_classification`` (4 columns, 3 classes). Four chains, 500 warm-up
transitions each.

Rows:

* ``ppgpc default``: ``fit(..., method="nuts", form="latent")`` with the kernel given, in a
  warm process (a second fit in the same process: nothing compiles), so its seconds are
  warm-up plus draws; the draws stop when R-hat and ESS pass (``ppgpc.infer.mcmc``).
* ``ppgpc fixed warm-up``: the default with the warm-up held at its 500 transitions
  (``ppgpc.infer.mcmc.SETTLED_END`` off) where the default ends it once the adaptation has
  settled; the draws stop at the same check.
* ``ppgpc 1000 draws``: the same with ``num_samples=max_samples=1000``.
* ``nutpie`` and ``nutpie low_rank``: ``nutpie.sample(compiled, draws=1000, tune=500,
  chains=4, cores=2)`` on the PyMC model (diagonal mass matrix; and with
  ``low_rank_modified_mass_matrix=True``), its seconds the sampling alone (warm-up and
  draws); the compilation of the model is printed apart. Left out with a note when PyMC or
  nutpie is not installed (``pip install pymc nutpie``).
* ``ILR-GP exact posterior``: ``fit("ilr_gp", ..., method="nuts", form="latent")`` on the
  same points with the same kernel fixed: NUTS on a Gaussian posterior, ESS of its latent
  f (N, C - 1), a second fit in a warm process.
* ``LogisticSoftmaxGPClassifier() small table``: the estimator's defaults (CAVI for the
  hyperparameters, then NUTS on the latent) on the small table of
  ``benchmarks/time_breakdown.py`` (200 training rows, 6 columns, 4 classes), a second fit
  in a warm process; its seconds are the whole fit, CAVI included; ESS of f at the training
  rows.

Columns: the warm-up transitions per chain that ran (ppgpc's), the gradient evaluations of
all chains, warm-up included (the sum of ``n_steps``; ppgpc's counted at its window
programs, nutpie's from its warm-up and sampling statistics), the smallest bulk ESS over the
entries of f (ArviZ's ``ess``), per 1,000 gradient evaluations and per second, and the
largest R-hat.

    python benchmarks/nuts_ess_rate.py
    python benchmarks/nuts_ess_rate.py --seeds 2 3 4 --rows ppgpc nutpie
"""

from __future__ import annotations

import argparse
import contextlib
import time
import warnings

import numpy as np

N, C, D = 200, 3, 4
VARIANCE, LENGTHSCALE = 2.0, 2.0


def problem():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=N, n_features=D, n_informative=D, n_redundant=0,
                               n_classes=C, n_clusters_per_class=1, random_state=0)
    return (X - X.mean(0)) / X.std(0), y


def prior_factor(X) -> np.ndarray:
    """chol(K + 1e-8 I) (N, N) of the fixed RBF kernel at ``X``: the prior f_c = L v_c,
    v_c ~ N(0, I_N), of every row (``benchmarks/sampler_trial.py`` samples the same)."""
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    K = VARIANCE * np.exp(-0.5 * sq / LENGTHSCALE ** 2) + 1e-8 * np.eye(len(X))
    return np.linalg.cholesky(K)


def min_bulk_ess(f) -> float:
    """f (chain, draw, ...)."""
    import arviz as az

    dataset = az.convert_to_dataset({"f": np.asarray(f)})
    return float(np.min(az.ess(dataset, method="bulk")["f"].values))


def max_rhat(f) -> float:
    """f (chain, draw, ...)."""
    import arviz as az

    return float(np.max(az.rhat(az.convert_to_dataset({"f": np.asarray(f)}))["f"].values))


GRADIENTS = [0]
"""Gradient evaluations of ppgpc's NUTS windows since the last reset (``counting``)."""

WINDOW_ENDS: list = []
"""``perf_counter`` at the end of every ppgpc window (``counting``; a caller resets it)."""


@contextlib.contextmanager
def counting():
    """While open, ppgpc's window programs add the ``n_steps`` of every chain and transition,
    warm-up included, to ``GRADIENTS`` (``ppgpc.infer.mcmc.sample_windows`` keeps the draws'
    statistics only) and the time each window ends to ``WINDOW_ENDS``."""
    from ppgpc.infer import mcmc

    original = mcmc.chain_windows

    @contextlib.contextmanager
    def counted(all_chains, one_chain, states, args, workers=None):
        with original(all_chains, one_chain, states, args, workers) as (states, start):
            def start_counted(s, a):
                wait = start(s, a)

                def waited():
                    s, (draws, stats) = wait()
                    WINDOW_ENDS.append(time.perf_counter())
                    GRADIENTS[0] += int(np.sum(np.asarray(stats["n_steps"])))
                    return s, (draws, stats)
                return waited
            yield states, start_counted

    mcmc.chain_windows = counted
    try:
        yield
    finally:
        mcmc.chain_windows = original


def _row(label, draws, gradients, seconds, f, note="", warmup=500):
    ess = min_bulk_ess(f)
    return (label, warmup, draws, gradients, seconds, ess, ess / seconds, max_rhat(f), note)


def _timed(run, seed):
    """``run(seed)`` once to compile, then again with ``seed``: (result, seconds, gradients)."""
    run(seed + 1000)
    GRADIENTS[0] = 0
    start = time.perf_counter()
    result = run(seed)
    return result, time.perf_counter() - start, GRADIENTS[0]


@contextlib.contextmanager
def fixed_warmup(fixed: bool):
    """While open, ppgpc's NUTS runs its whole ``num_warmup`` when ``fixed``."""
    from ppgpc.infer import mcmc

    before = mcmc.SETTLED_END
    mcmc.SETTLED_END = not fixed
    try:
        yield
    finally:
        mcmc.SETTLED_END = before


def ppgpc_rows(X, y, seed):
    from ppgpc.infer import fit

    hypers = {"kernel_variance": VARIANCE, "kernel_lengthscale": LENGTHSCALE}
    rows = []
    for label, options, fixed in (
            ("ppgpc default", {}, False), ("ppgpc fixed warm-up", {}, True),
            ("ppgpc 1000 draws", {"num_samples": 1000, "max_samples": 1000}, False)):
        kwargs = dict(method="nuts", form="latent", kernel="rbf", hyperparameters=hypers,
                      progress_bar=False, **options)
        with fixed_warmup(fixed):
            result, seconds, grads = _timed(
                lambda s: fit("logistic_softmax", X, y, seed=s, **kwargs), seed)
        sampler = result.info.sampler
        rows.append(_row(label, sampler.num_draws, grads, seconds, result.latent,
                         warmup=sampler.num_warmup))
    return rows


def ilr_rows(X, y, seed):
    from ppgpc.infer import fit

    hypers = {"kernel_variance": VARIANCE, "kernel_lengthscale": LENGTHSCALE}
    kwargs = dict(method="nuts", form="latent", kernel="rbf", hyperparameters=hypers,
                  progress_bar=False)
    result, seconds, grads = _timed(lambda s: fit("ilr_gp", X, y, seed=s, **kwargs), seed)
    f = np.asarray(result.latent)[:, :, :len(y)]
    return [_row("ILR-GP exact posterior", result.info.sampler.num_draws, grads, seconds, f,
                 warmup=result.info.sampler.num_warmup)]


def small_table():
    """The small table of ``benchmarks/time_breakdown.py``: 200 training rows, 6 columns,
    4 classes."""
    from sklearn.datasets import make_classification
    from sklearn.model_selection import train_test_split

    X, y = make_classification(n_samples=300, n_features=6, n_informative=6, n_redundant=0,
                               n_classes=4, n_clusters_per_class=1, random_state=0)
    X_tr, _, y_tr, _ = train_test_split(X, y, train_size=200, random_state=0, stratify=y)
    return X_tr, y_tr


def lsm_default_rows(seed):
    import ppgpc

    X, y = small_table()

    def run(s):
        est = ppgpc.LogisticSoftmaxGPClassifier(progress=False, seed=s)
        return est.fit(X, y)

    est, seconds, grads = _timed(run, seed)
    f = np.asarray(est.result_.latent)[:, :, :len(y)]
    sampler = est.result_.info.sampler
    return [_row("LogisticSoftmaxGPClassifier() small table", sampler.num_draws, grads, seconds,
                 f, "seconds: the whole fit, CAVI included", warmup=sampler.num_warmup)]


def nutpie_rows(X, y, seed):
    try:
        import nutpie
        import pymc as pm
        import pytensor.tensor as pt
    except ImportError as error:
        return [("nutpie", 0, 0, 0, float("nan"), float("nan"), float("nan"), float("nan"),
                 f"not installed ({error.name})")]
    L = prior_factor(X)
    with pm.Model() as model:
        v = pm.Normal("v", 0.0, 1.0, shape=(N, C))
        f = pm.Deterministic("f", pt.dot(L, v))
        pm.Categorical("y", logit_p=-pt.softplus(-f), observed=y)
    start = time.perf_counter()
    compiled = nutpie.compile_pymc_model(model)
    compile_seconds = time.perf_counter() - start
    rows = []
    for label, low_rank in (("nutpie", False), ("nutpie low_rank", True)):
        start = time.perf_counter()
        trace = nutpie.sample(compiled, draws=1000, tune=500, chains=4, cores=2, seed=seed,
                              progress_bar=False, low_rank_modified_mass_matrix=low_rank)
        seconds = time.perf_counter() - start
        grads = int(trace.warmup_sample_stats["n_steps"].sum()
                    + trace.sample_stats["n_steps"].sum())
        f = trace.posterior["f"].values
        rows.append(_row(label, f.shape[1], grads, seconds, f,
                         f"compiling the model: {compile_seconds:.1f} s"))
    return rows


ROWS = ("ppgpc", "nutpie", "ilr", "lsm_default")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[2])
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    X, y = problem()
    print("| sampler | seed | warm-up | draws per chain | gradient evaluations | seconds | "
          "min bulk ESS of f | ESS per 1k gradients | ESS per second | max R-hat | note |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    makers = {"ppgpc": lambda s: ppgpc_rows(X, y, s), "nutpie": lambda s: nutpie_rows(X, y, s),
              "ilr": lambda s: ilr_rows(X, y, s), "lsm_default": lsm_default_rows}
    with counting():
        for name in args.rows:
            for seed in args.seeds:
                for (label, warmup, draws, grads, seconds, ess, rate, rhat,
                     note) in makers[name](seed):
                    per_grad = 1000 * ess / grads if grads else float("nan")
                    print(f"| {label} | {seed} | {warmup} | {draws} | {grads} | "
                          f"{seconds:.1f} | {ess:.0f} | {per_grad:.1f} | {rate:.0f} | "
                          f"{rhat:.4f} | {note} |", flush=True)


if __name__ == "__main__":
    main()
