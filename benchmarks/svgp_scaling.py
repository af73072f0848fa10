"""Time per epoch and peak memory of SVGPC / Uncollapsed-ILR at N = 20000, M = 200.

What is measured, per row (each row in a fresh Python process, so that peak memory is its
own):

* ``s/epoch``: wall time of one epoch (N / B SVI steps) after compilation: the driver
  times every window of SVI steps but the first (which includes compilation) and reports
  seconds per step x N / B (``FitResult.info.svi.seconds_per_epoch``);
* ``compile+1st window s``: wall time of ``svi.init`` plus the first window of steps;
* ``fit s``: the whole ``fit`` (data preparation with k-means++ inducing inputs, SVI,
  drawing ``num_draws`` whitened inducing draws);
* ``predict s``: ``predict_proba`` on 1000 inputs;
* ``peak RSS MB``: the process's peak resident memory (``resource.getrusage``,
  ``ru_maxrss``) after fitting and predicting, which includes the Python interpreter, JAX
  and the compiled code (about 400-500 MB before any data; the ``baseline`` row shows it).

Data: the letter data set (N = 20000, D = 16, C = 26) when ``PPGPC_DATA_DIR`` holds it,
otherwise Gaussian blobs of the same shape. Inputs are z-scored.

    python benchmarks/svgp_scaling.py                      # both links, B = 256
    python benchmarks/svgp_scaling.py --batch-sizes 256 1024 --steps 300
    python benchmarks/svgp_scaling.py --layouts shared per-latent   # + a kernel and M
                                                                    # inducing inputs per latent
    python benchmarks/svgp_scaling.py --q-updates adam natural      # + natural-gradient
                                                                    # steps on q(v)

``--q-updates natural`` rows move q(v) by natural-gradient steps (size 0.1, with Price's
variance gradients, ``ell_estimator="price"``) and the rest by Adam; ``adam`` rows move
everything by Adam (the default).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time


def _data(n: int):
    import numpy as np

    from ppgpc.datasets import Standardizer, load

    try:
        X, y = load("letter")
        source = "letter"
    except (FileNotFoundError, ValueError, OSError):
        gen = np.random.default_rng(0)
        y = np.arange(n) % 26
        X = gen.normal(size=(26, 16))[y] + gen.normal(size=(n, 16))
        source = "synthetic"
    X, y = X[:n], np.unique(y[:n], return_inverse=True)[1]
    return Standardizer.fit(X).transform(X), y, source


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _one(args) -> dict:
    if args.model == "baseline":
        import ppgpc.runtime  # noqa: F401  (float64)
        from ppgpc.infer import fit  # noqa: F401

        return {"peak_mb": _peak_mb()}
    from ppgpc.infer import fit

    X, y, source = _data(args.n)
    natural = args.q_update == "natural"
    start = time.perf_counter()
    result = fit(args.model, X, y, method="svi", max_exact_points=None, seed=0,
                 model_options={"num_inducing": args.num_inducing,
                                "shared_kernel": args.layout == "shared",
                                "shared_inducing": args.layout == "shared",
                                "ell_estimator": "price" if natural else "marginal"},
                 natural_gradient=0.1 if natural else None, batch_size=args.batch_size,
                 max_iter=args.steps, window=args.window,
                 tol=None, progress_bar=False, num_draws=args.num_draws)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    result.predict_proba(X[:1000])
    predict_s = time.perf_counter() - start
    info = result.info.svi
    first = fit_s - info.seconds_per_step * (info.steps - args.window)
    return {"source": source, "s_per_epoch": info.seconds_per_epoch, "fit_s": fit_s,
            "first_window_s": first, "predict_s": predict_s, "peak_mb": _peak_mb()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--num-inducing", type=int, default=200)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[256])
    parser.add_argument("--models", nargs="+", default=["softmax_svgp", "ilr_gp_uncollapsed"])
    parser.add_argument("--steps", type=int, default=400, help="SVI steps per row")
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--num-draws", type=int, default=500)
    parser.add_argument("--layouts", nargs="+", choices=["shared", "per-latent"],
                        default=["shared"],
                        help="one kernel and M inducing inputs for all latents, or per latent")
    parser.add_argument("--q-updates", nargs="+", choices=["adam", "natural"],
                        default=["adam"],
                        help="q(v) moved by Adam with the rest, or by natural-gradient steps")
    parser.add_argument("--q-update", default="adam", help=argparse.SUPPRESS)
    parser.add_argument("--layout", default="shared", help=argparse.SUPPRESS)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, default=256, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(_one(args)))
        return 0

    def run(model, batch, layout="shared", q_update="adam"):
        cmd = [sys.executable, os.path.abspath(__file__), "--one", "--model", model,
               "--batch-size", str(batch), "--n", str(args.n), "--layout", layout,
               "--q-update", q_update,
               "--num-inducing", str(args.num_inducing), "--steps", str(args.steps),
               "--window", str(args.window), "--num-draws", str(args.num_draws)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    base = run("baseline", 0)
    print(f"N = {args.n}, M = {args.num_inducing}, {args.steps} SVI steps per row "
          f"(first {args.window} excluded from s/epoch), {args.num_draws} q(v) draws; "
          "peak RSS of a fresh process")
    header = (f"{'model':20s} {'layout':10s} {'q(v)':8s} {'data':9s} {'B':>5s} {'s/epoch':>8s} "
              f"{'compile+1st window s':>21s} {'fit s':>7s} {'predict s':>9s} "
              f"{'peak RSS MB':>11s}")
    print(header)
    print("-" * len(header))
    print(f"{'baseline (import)':20s} {'-':10s} {'-':8s} {'-':9s} {'-':>5s} {'-':>8s} "
          f"{'-':>21s} {'-':>7s} "
          f"{'-':>9s} {base['peak_mb']:11.0f}")
    for model in args.models:
        for layout in args.layouts:
            for q_update in args.q_updates:
                for batch in args.batch_sizes:
                    r = run(model, batch, layout, q_update)
                    print(f"{model:20s} {layout:10s} {q_update:8s} {r['source']:9s} "
                          f"{batch:5d} {r['s_per_epoch']:8.2f} {r['first_window_s']:21.1f} "
                          f"{r['fit_s']:7.1f} {r['predict_s']:9.1f} {r['peak_mb']:11.0f}",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
