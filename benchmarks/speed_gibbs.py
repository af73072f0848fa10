"""Speed of the Pólya-Gamma Gibbs sampler's building blocks (docs/math.md section 3).

Part (a), ``--part draws``: Pólya-Gamma draws per second of ``ppgpc.polyagamma`` (jitted,
timed after a warm-up call, ``block_until_ready``) against the ``polyagamma`` package
(``method="devroye"`` and its default hybrid method) at the same b and z:

    python benchmarks/speed_gibbs.py --part draws --draws 100000

Each cell draws ``--draws`` variates of PG(b, z) at one (b, z) and reports the best of
``--repeats`` timings (the least disturbed by other processes) in millions of draws per
second. Part (b), ``--part ess``: Gibbs against NUTS in effective samples per second of the
latent f (``bench_gibbs_vs_nuts``, implemented in ``speed_gibbs_ess.py``):

    python benchmarks/speed_gibbs.py --part ess --sizes 200 1000 --classes 3 10 --samples 500 \
        --nuts-warmup 200 --nuts-samples 200
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

import ppgpc.polyagamma as pg


def _best_time(run: Callable[[int], object], repeats: int) -> float:
    """Smallest wall time in seconds of ``run(i)`` over i = 1..repeats."""
    best = np.inf
    for i in range(1, repeats + 1):
        start = time.perf_counter()
        run(i)
        best = min(best, time.perf_counter() - start)
    return best


def bench_polyagamma_draws(
    b_values: list[float], z_values: list[float], num_draws: int, repeats: int, seed: int = 0
) -> list[dict]:
    """Part (a): draws per second for every (b, z), ours against the ``polyagamma`` package.

    Returns:
        One dict per cell with keys ``b``, ``z``, ``ours``, ``devroye``, ``default``
        (millions of draws per second; NaN when the package is not installed).
    """
    try:
        from polyagamma import random_polyagamma
    except ImportError:  # the reference package is a test-only dependency
        random_polyagamma = None

    key = jax.random.key(seed)
    rng = np.random.default_rng(seed)
    rows = []
    for b in b_values:
        for z in z_values:
            b_arr = jnp.full((num_draws,), float(b))
            z_arr = jnp.full((num_draws,), float(z))

            def ours(i):
                pg.sample_polyagamma(jax.random.fold_in(key, i), b_arr, z_arr).block_until_ready()

            ours(0)  # compile (once per shape) and warm up
            row = {"b": b, "z": z, "ours": num_draws / _best_time(ours, repeats) / 1e6}
            for name, method in (("devroye", "devroye"), ("default", None)):
                if random_polyagamma is None:
                    row[name] = float("nan")
                    continue

                def theirs(i, method=method):
                    random_polyagamma(b, z, size=num_draws, method=method, random_state=rng)

                theirs(0)
                row[name] = num_draws / _best_time(theirs, repeats) / 1e6
            rows.append(row)
            print(_format_row(row), flush=True)
    return rows


def _format_row(row: dict) -> str:
    ratio = row["ours"] / row["devroye"]
    return (
        f"{row['b']:>5g} {row['z']:>6g} | {row['ours']:>8.2f} {row['devroye']:>9.2f} "
        f"{row['default']:>9.2f} | {ratio:>12.2f}"
    )


def _print_header(num_draws: int) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPUs "
        f"({platform.processor() or platform.machine()}), load average {load:.1f}; "
        f"{num_draws} draws per cell"
    )
    print("# millions of PG(b, z) draws per second (best of the repeats)")
    print(f"{'b':>5} {'z':>6} | {'ppgpc':>8} {'devroye':>9} {'default':>9} | ppgpc/devroye")


def bench_gibbs_vs_nuts(sizes, classes, samples: int, warmup: int, chains: int,
                        samplers, nuts_warmup: int = 300, nuts_samples: int | None = None) -> list:
    """Part (b): min and median bulk ESS per second of the latent f, logistic-softmax
    blocked Gibbs against NUTS on the non-augmented model, same
    fixed hyperparameters (details in ``speed_gibbs_ess.py``)."""
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from speed_gibbs_ess import ess_table

    return ess_table(sizes, classes, chains=chains, warmup=warmup, samples=samples,
                     nuts_warmup=nuts_warmup, nuts_samples=nuts_samples, samplers=samplers)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["draws", "ess"], default="draws",
                        help="draws: Polya-Gamma draws per second (part a); ess: Gibbs "
                        "against NUTS in ESS/s of f (part b)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 1000], help="(b) N")
    parser.add_argument("--classes", type=int, nargs="+", default=[3, 10], help="(b) C")
    parser.add_argument("--samples", type=int, default=500, help="(b) draws per chain")
    parser.add_argument("--warmup", type=int, default=200, help="(b) warm-up sweeps")
    parser.add_argument("--chains", type=int, default=4, help="(b) chains")
    parser.add_argument("--nuts-warmup", type=int, default=300, help="(b) NUTS warm-up")
    parser.add_argument("--nuts-samples", type=int, default=None,
                        help="(b) NUTS draws per chain (default: --samples)")
    parser.add_argument("--samplers", nargs="+", default=["gibbs", "nuts"])
    parser.add_argument("--draws", type=int, default=100_000, help="draws per (b, z) cell")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per cell")
    parser.add_argument("--b", type=float, nargs="+", default=[1, 2, 5, 50])
    parser.add_argument("--z", type=float, nargs="+", default=[0.1, 1, 10, 50])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    if args.part == "draws":
        _print_header(args.draws)
        bench_polyagamma_draws(args.b, args.z, args.draws, args.repeats, args.seed)
    elif args.part == "ess":
        bench_gibbs_vs_nuts(args.sizes, args.classes, args.samples, args.warmup, args.chains,
                            args.samplers, args.nuts_warmup, args.nuts_samples)


if __name__ == "__main__":
    main()
