"""Cost of exact ILR-GP (and GPD) hyperparameter fitting against N and C.

One optimiser step of type-II ML is one value-and-gradient of the collapsed log marginal
likelihood (MATH.md section 1). Its cost is O(N^3) for the single Cholesky of K + sigma^2 I
(forward and backward) plus O(N^2 (C-1)) for the solves, so C barely matters for ILR-GP.
The script times, after compilation,

* ``step``: one jitted value-and-gradient of the collapsed objective,
* ``chol``: one jitted Cholesky of an N x N matrix plus its gradient (the factorisation's
  own share of a step, isolated),
* ``fit``: a fixed number of steps (``--steps``), i.e. what a fit with that many optimiser
  iterations costs,

and prints the Cholesky fraction chol / step. Inputs are a 2-D mixture with classes on a
circle. With ``--models ilr gpd`` it also times GPD (MATH.md section 2), whose noise differs
per class and so needs C Choleskys per step instead of one, and prints the GPD / ILR ratio
of seconds per step.

    python benchmarks/speed_exact.py
    python benchmarks/speed_exact.py --sizes 500 1000 --classes 3 10 --steps 10
    python benchmarks/speed_exact.py --models ilr gpd --sizes 500 1000 --classes 10
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import ppgpc  # noqa: F401  (float64, BLAS threads)
from ppgpc import linalg
from ppgpc.experiments import print_table_header
from ppgpc.infer.optimize import _value_and_grad
from ppgpc.kernels import RBF
from ppgpc.models import dirichlet_gp, ilr_gp


def _mixture(n: int, num_classes: int, seed: int = 0):
    gen = np.random.default_rng(seed)
    y = np.arange(n) % num_classes
    angle = 2 * np.pi * y / num_classes
    X = 2 * np.stack([np.cos(angle), np.sin(angle)], 1) + 0.7 * gen.normal(size=(n, 2))
    return X, y


def _best_of(fn, *args, repeats: int = 3) -> float:
    jax.block_until_ready(fn(*args))  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return min(times)


def measure(n: int, num_classes: int, steps: int, model: str = "ilr") -> dict:
    X, y = _mixture(n, num_classes)
    kernel = RBF(ard=True)
    module = {"ilr": ilr_gp, "gpd": dirichlet_gp}[model]
    options = {"epsilon": 0.999} if model == "ilr" else {"alpha_eps": 0.01}
    data = module.prepare(X, y, num_classes, **options)
    init = module.initial_hypers(data, kernel)
    # kernel sites are positive (log scale); the GPD mean is unconstrained
    u = {k: jnp.log(v) if k.startswith("kernel_") else v for k, v in init.items()}
    args = (data, kernel)

    def step(u):
        return _value_and_grad(u, args, module.collapsed_model, False)

    A = jnp.asarray(np.cov(np.random.default_rng(1).normal(size=(n, n + 5)))) + jnp.eye(n)
    chol_and_grad = jax.jit(jax.value_and_grad(lambda A: linalg.logdet(linalg.cholesky(A).factor)))

    t_step = _best_of(step, u)
    t_chol = _best_of(chol_and_grad, A)
    start = time.perf_counter()
    for _ in range(steps):
        jax.block_until_ready(step(u))
    t_fit = time.perf_counter() - start
    return {"step": t_step, "chol": t_chol, "fit": t_fit}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000, 4000])
    parser.add_argument("--classes", type=int, nargs="+", default=[3, 10])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--models", nargs="+", default=["ilr"], choices=["ilr", "gpd"])
    args = parser.parse_args(argv)
    print(f"exact {' and '.join(m.upper() for m in args.models)}, RBF-ARD, D = 2; "
          f"{jax.devices()[0].platform}; {args.steps} steps per fit")
    header = (f"{'model':>5s} {'N':>6s} {'C':>4s} {'s/step':>9s} {'chol s':>9s} {'chol %':>7s} "
              f"{'fit s':>9s} {'x ILR':>6s}")
    print_table_header(header)
    for n in args.sizes:
        for c in args.classes:
            base = None
            for model in args.models:
                r = measure(n, c, args.steps, model)
                base = r["step"] if model == "ilr" else base
                ratio = f"{r['step'] / base:6.1f}" if base else f"{'':6s}"
                print(f"{model:>5s} {n:6d} {c:4d} {r['step']:9.4f} {r['chol']:9.4f} "
                      f"{100 * min(r['chol'] / r['step'], 1.0):6.0f}% {r['fit']:9.2f} {ratio}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
