"""Collapsed-ILR and SVGPC against the number of devices and the number of points.

Each cell runs in a subprocess of its own (JAX fixes its device count when it starts, and
the peak memory of a process is its own): synthetic data, D = 8 inputs, C = 10 classes,
M = 500 inducing inputs by default. A Collapsed-ILR cell times one optimiser step, the
value and gradient of the collapsed bound over every hyperparameter and inducing input
(the median of ``--repeats`` jitted calls after one compiling call), and with
``--fit-iterations k`` also a driver fit of k L-BFGS iterations with the driver's defaults
otherwise (1000 whitened draws of v stored) and ``predict_proba`` on 2000 of the inputs.
An SVGPC cell times one
SVI step (a minibatch of ``--batch-size`` points: the ELBO estimate, its gradient and an
Adam update, the batch split over the devices). Each reports the process's peak resident
memory (``resource.getrusage``). With d forced host devices every device is a thread of this one
process on the same CPU cores, so the process's peak memory is the sum over devices and the
timings measure overhead, not speed-up.

Usage:
    python benchmarks/scale_out.py                       # devices 1, 2, 4 at N = 1e4
    python benchmarks/scale_out.py --points 10000 100000 1000000 --devices 1
    python benchmarks/scale_out.py --points 1000000 --devices 1 --fit-iterations 3
    python benchmarks/scale_out.py --models svgpc --batch-size 1024
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def synthetic(num_points: int, num_features: int, num_classes: int, seed: int = 0):
    """(X (N, D), y (N,)): labels from the argmax of a random linear map plus noise."""
    gen = np.random.default_rng(seed)
    X = gen.normal(size=(num_points, num_features))
    W = gen.normal(size=(num_features, num_classes))
    y = np.argmax(X @ W + gen.gumbel(size=(num_points, num_classes)), axis=1)
    return X, y


def svgpc_cell(args) -> dict:
    """One SVGPC measurement: the median time of ``--repeats`` jitted SVI steps."""
    import resource

    import jax
    import optax
    from numpyro.infer import SVI, TraceMeanField_ELBO
    from numpyro.optim import optax_to_numpyro

    import ppgpc.runtime  # noqa: F401  (float64: ppgpc's JAX code sets it)
    from ppgpc.runtime.blocks import resolve_mesh
    from ppgpc.gp.kernels import make_kernel
    from ppgpc.models import svgp as softmax_svgp

    X, y = synthetic(args.points, args.features, args.classes)
    kernel = make_kernel("rbf-ard")
    data = softmax_svgp.prepare(X, y, args.classes, num_inducing=args.inducing, seed=0)
    data = softmax_svgp.on_devices(data, resolve_mesh(args.devices))
    svi = SVI(softmax_svgp.model, softmax_svgp.guide, optax_to_numpyro(optax.adam(0.01)),
              TraceMeanField_ELBO())
    batch = min(args.batch_size, args.points)
    state = jax.jit(svi.init, static_argnums=(2, 3))(jax.random.PRNGKey(0), data, kernel,
                                                     batch)
    step = jax.jit(svi.update, static_argnums=(2, 3))
    start = time.perf_counter()
    state = jax.block_until_ready(step(state, data, kernel, batch))[0]
    compile_seconds = time.perf_counter() - start
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        state = jax.block_until_ready(step(state, data, kernel, batch))[0]
        times.append(time.perf_counter() - start)
    return {"points": args.points, "devices": args.devices, "inducing": args.inducing,
            "step_seconds": float(np.median(times)), "first_call_seconds": compile_seconds,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def cell(args) -> dict:
    """One measurement, in this process (run by ``main`` in a subprocess per cell)."""
    import resource

    import jax

    import ppgpc.runtime  # noqa: F401  (float64: ppgpc's JAX code sets it)
    from ppgpc.gp import sparse
    from ppgpc.runtime.blocks import resolve_mesh
    from ppgpc.infer import fit
    from ppgpc.infer.sites import log_density_terms
    from ppgpc.gp.kernels import make_kernel
    from ppgpc.models import ilr_gp

    X, y = synthetic(args.points, args.features, args.classes)
    kernel = make_kernel("rbf-ard")
    mesh = resolve_mesh(args.devices)
    data = ilr_gp.sparse_prepare(X, y, args.classes, num_inducing=args.inducing, seed=0,
                                 epsilon=0.99)
    placed = sparse.on_devices(data, mesh)
    hypers = ilr_gp.sparse_initial_hypers(data, kernel)

    def objective(h, data):
        return -log_density_terms(ilr_gp.sparse_collapsed_model, (data, kernel), h, False)

    step = jax.jit(jax.value_and_grad(objective))
    start = time.perf_counter()
    jax.block_until_ready(step(hypers, placed))
    compile_seconds = time.perf_counter() - start
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        jax.block_until_ready(step(hypers, placed))
        times.append(time.perf_counter() - start)
    out = {"points": args.points, "devices": args.devices, "inducing": args.inducing,
           "step_seconds": float(np.median(times)), "first_call_seconds": compile_seconds}
    if args.fit_iterations:
        start = time.perf_counter()
        result = fit("ilr_gp_sparse", X, y, method="exact", devices=args.devices,
                     model_options={"num_inducing": args.inducing, "epsilon": 0.99},
                     max_iter=args.fit_iterations)          # the driver's 1000 draws of v
        out["fit_seconds"] = time.perf_counter() - start
        out["fit_iterations"] = result.info.optimizer.iterations
        out["fit_evaluations"] = result.info.optimizer.evaluations
        start = time.perf_counter()
        result.predict_proba(X[:2000])
        out["predict_seconds"] = time.perf_counter() - start
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


HEADERS = {
    "collapsed-ilr": "Collapsed-ILR: D = {D}, C = {C}, M = {M}; one step = value and gradient "
                     "of the bound",
    "svgpc": "SVGPC: D = {D}, C = {C}, M = {M}, batch B = {B}; one step = an SVI step (ELBO "
             "estimate, gradient, Adam update) on one minibatch",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=sorted(HEADERS),
                        default=["collapsed-ilr", "svgpc"])
    parser.add_argument("--points", type=int, nargs="+", default=[10_000])
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--features", type=int, default=8)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--inducing", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=1024,
                        help="SVGPC minibatch size")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fit-iterations", type=int, default=0,
                        help="also time a Collapsed-ILR driver fit of this many L-BFGS "
                             "iterations")
    parser.add_argument("--cell", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        args.points, args.devices = args.points[0], args.devices[0]
        measure = svgpc_cell if args.models[0] == "svgpc" else cell
        print(json.dumps(measure(args)), flush=True)
        return
    for model in args.models:
        print(HEADERS[model].format(D=args.features, C=args.classes, M=args.inducing,
                                    B=args.batch_size))
        print(f"{'N':>9} {'devices':>7} {'step s':>9} {'first s':>9} {'fit s':>8} "
              f"{'peak RSS MiB':>12}")
        for points in args.points:
            for devices in args.devices:
                _row(model, points, devices, args)


def _row(model: str, points: int, devices: int, args) -> None:
    """Run one cell in a subprocess with ``devices`` forced host devices; print its row."""
    env = dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} "
               f"--xla_force_host_platform_device_count={devices}".strip())
    command = [sys.executable, __file__, "--cell", "--models", model, "--points", str(points),
               "--devices", str(devices), "--features", str(args.features),
               "--classes", str(args.classes), "--inducing", str(args.inducing),
               "--batch-size", str(args.batch_size), "--repeats", str(args.repeats),
               "--fit-iterations", str(args.fit_iterations if model == "collapsed-ilr" else 0)]
    run = subprocess.run(command, capture_output=True, text=True, env=env)
    if run.returncode != 0:
        print(f"{points:>9} {devices:>7} failed: {run.stderr.strip()[-400:]}")
        return
    r = json.loads(run.stdout.strip().splitlines()[-1])
    fit_s = f"{r['fit_seconds']:8.1f}" if "fit_seconds" in r else f"{'-':>8}"
    print(f"{points:>9} {devices:>7} {r['step_seconds']:9.3f} {r['first_call_seconds']:9.2f} "
          f"{fit_s} {r['peak_rss_mib']:12.0f}", flush=True)
    if "fit_iterations" in r:
        print(f"{'':>9} fit: {r['fit_iterations']} L-BFGS iterations, "
              f"{r['fit_evaluations']} evaluations of the bound and gradient, 1000 draws of "
              f"v stored; predict_proba on 2000 inputs {r['predict_seconds']:.1f} s")


if __name__ == "__main__":
    main()
