"""Effective samples per second of NUTS on the logistic-softmax GP's latent posterior:
ppgpc against nutpie (PyMC's Rust NUTS), on the same posterior, side by side.

The posterior: f_c = chol(K) v_c, v_c ~ N(0, I_N) for C = 3 classes, y_i ~ Categorical with
p(y = k | f) = sigma(f_k) / sum_c sigma(f_c), a fixed RBF kernel (variance 2, lengthscale 2 on
standardised inputs), N = 200 points of ``make_classification`` (4 columns, 3 classes).
Four chains, 500 warm-up transitions each.

Rows:

* ``ppgpc default``: ``fit(..., method="nuts", form="latent")`` with the kernel given, in a
  warm process (a second fit in the same process: nothing compiles), so its seconds are
  warm-up plus draws; the draws stop when R-hat and ESS pass (``ppgpc.infer.mcmc``).
* ``ppgpc 1000 draws``: the same with ``num_samples=max_samples=1000``.
* ``nutpie``: ``nutpie.sample(compiled, draws=1000, tune=500, chains=4, cores=2)`` on the
  PyMC model, its seconds the sampling alone (warm-up and draws); the compilation of the
  model is printed apart. Left out with a note when PyMC or nutpie is not installed
  (``pip install pymc nutpie``).

ESS: the smallest bulk ESS over the N C entries of f (ArviZ's ``ess``), per second.

    python benchmarks/nuts_ess_rate.py
"""

from __future__ import annotations

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


def min_bulk_ess(f) -> float:
    """f (chain, draw, N, C)."""
    import arviz as az

    dataset = az.convert_to_dataset({"f": np.asarray(f)})
    return float(np.min(az.ess(dataset, method="bulk")["f"].values))


def ppgpc_rows(X, y):
    from ppgpc.infer import fit

    hypers = {"kernel_variance": VARIANCE, "kernel_lengthscale": LENGTHSCALE}
    rows = []
    for label, options in (("ppgpc default", {}),
                           ("ppgpc 1000 draws", {"num_samples": 1000, "max_samples": 1000})):
        kwargs = dict(method="nuts", form="latent", kernel="rbf", hyperparameters=hypers,
                      progress_bar=False, **options)
        fit("logistic_softmax", X, y, seed=1, **kwargs)  # compile
        start = time.perf_counter()
        result = fit("logistic_softmax", X, y, seed=2, **kwargs)
        seconds = time.perf_counter() - start
        ess = min_bulk_ess(result.latent)
        rows.append((label, result.info.sampler.num_draws, seconds, ess, ess / seconds, ""))
    return rows


def nutpie_rows(X, y):
    try:
        import nutpie
        import pymc as pm
        import pytensor.tensor as pt
    except ImportError as error:
        return [("nutpie", 0, float("nan"), float("nan"), float("nan"),
                 f"not installed ({error.name})")]
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    K = VARIANCE * np.exp(-0.5 * sq / LENGTHSCALE ** 2) + 1e-8 * np.eye(N)
    L = np.linalg.cholesky(K)
    with pm.Model() as model:
        v = pm.Normal("v", 0.0, 1.0, shape=(N, C))
        f = pm.Deterministic("f", pt.dot(L, v))
        pm.Categorical("y", logit_p=-pt.softplus(-f), observed=y)
    start = time.perf_counter()
    compiled = nutpie.compile_pymc_model(model)
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    trace = nutpie.sample(compiled, draws=1000, tune=500, chains=4, cores=2, seed=2,
                          progress_bar=False)
    seconds = time.perf_counter() - start
    f = trace.posterior["f"].values
    ess = min_bulk_ess(f)
    return [("nutpie", f.shape[1], seconds, ess, ess / seconds,
             f"compiling the model: {compile_seconds:.1f} s")]


def main() -> None:
    warnings.simplefilter("ignore")
    X, y = problem()
    print("| sampler | draws per chain | seconds | min bulk ESS of f | ESS per second | note |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in ppgpc_rows(X, y) + nutpie_rows(X, y):
        label, draws, seconds, ess, rate, note = row
        print(f"| {label} | {draws} | {seconds:.1f} | {ess:.0f} | {rate:.0f} | {note} |",
              flush=True)


if __name__ == "__main__":
    main()
