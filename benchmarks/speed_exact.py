"""Cost of exact ILR-GP hyperparameter fitting against N and C.

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
circle.

    python benchmarks/speed_exact.py
    python benchmarks/speed_exact.py --sizes 500 1000 --classes 3 10 --steps 10
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
from ppgpc.infer.optimize import _value_and_grad
from ppgpc.kernels import RBF
from ppgpc.models import ilr_gp


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


def measure(n: int, num_classes: int, steps: int) -> dict:
    X, y = _mixture(n, num_classes)
    kernel = RBF(ard=True)
    data = ilr_gp.prepare(X, y, num_classes, epsilon=0.999)
    init = ilr_gp.initial_hypers(data, kernel)
    u = {k: jnp.log(v) for k, v in init.items()}  # both sites are positive
    args = (data, kernel)

    def step(u):
        return _value_and_grad(u, args, ilr_gp.collapsed_model, False)

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
    args = parser.parse_args(argv)
    print(f"exact ILR-GP, RBF-ARD, D = 2; {jax.devices()[0].platform}; {args.steps} steps per fit")
    header = f"{'N':>6s} {'C':>4s} {'s/step':>9s} {'chol s':>9s} {'chol %':>7s} {'fit s':>9s}"
    print(header)
    print("-" * len(header))
    for n in args.sizes:
        for c in args.classes:
            r = measure(n, c, args.steps)
            print(f"{n:6d} {c:4d} {r['step']:9.4f} {r['chol']:9.4f} "
                  f"{100 * min(r['chol'] / r['step'], 1.0):6.0f}% {r['fit']:9.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
