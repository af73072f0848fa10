"""One process fitting many models: memory maps, resident memory and compilations per fit.

A notebook kernel that draws a learning curve, a grid search whose folds differ in size or a
service that refits on growing data fits one estimator at many training sizes in one process.
Every compiled XLA program holds machine code in LLVM's JIT memory, whose mappings count
against the kernel's ``vm.max_map_count`` (65,530 by default); a process that keeps
compiling new programs and never releases them grows until LLVM aborts it ("Unable to
allocate section memory"). This script fits each estimator with its defaults
(``progress=False``) on synthetic Gaussian blobs (``--features`` features, ``--classes``
classes) at the training sizes ``--sizes START STOP STEP``, one process per estimator
(``--child``), and after each fit reads

* ``maps``: lines of ``/proc/self/maps``;
* ``rss``: resident memory (``VmRSS`` of ``/proc/self/status``), MiB;
* ``compiles``: XLA backend compilations so far (``jax.monitoring`` event
  ``/jax/core/compile/backend_compile_duration``, which also counts programs read back from
  the persistent compilation cache; each process starts with an empty cache folder, as a
  new user's first process does);
* the fit's seconds.

It prints every ``--every``-th fit and a summary per estimator: maps and resident memory
after the first fit, at the end and at their peak, and the maps and memory added per fit
over the second half of the run (where a process that has stopped growing adds nothing;
a process that releases its programs, ``ppgpc.runtime.programs``, rises and falls between
releases, so its peak is the figure to read).

    python benchmarks/long_session.py                                  # 20, 24, ..., 84
    python benchmarks/long_session.py --sizes 20 2001 10 --every 20    # 199 sizes to 2000
    python benchmarks/long_session.py --estimators ILR --classes 3 4 --features 2 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from process_stats import BUILD_EVENT, memory_maps, resident_mib

ESTIMATORS = ("ILR", "GPD", "LSM", "SVGPC")
_JSON_TAG = "LONG_SESSION_JSON "



def _blobs(n: int, num_features: int, num_classes: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    y = np.arange(n) % num_classes
    rng.shuffle(y)
    centres = 2.0 * rng.normal(size=(num_classes, num_features))
    return centres[y] + rng.normal(size=(n, num_features)), y


def _child(args) -> None:
    import jax

    import ppgpc

    builds = [0]

    def listener(event: str, duration: float, **kwargs) -> None:
        if event == BUILD_EVENT:
            builds[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    make = {"ILR": ppgpc.ILRGPClassifier, "GPD": ppgpc.DirichletGPClassifier,
            "LSM": ppgpc.LogisticSoftmaxGPClassifier,
            "SVGPC": ppgpc.SoftmaxSVGPClassifier}[args.child]
    import warnings

    warnings.simplefilter("ignore", ppgpc.ConvergenceWarning)
    sizes = range(*args.sizes)
    fit = 0
    for num_classes in args.classes:
        for num_features in args.features:
            for n in sizes:
                X, y = _blobs(n, num_features, num_classes, seed=fit)
                start = time.perf_counter()
                make(progress=False, seed=fit).fit(X, y)
                seconds = time.perf_counter() - start
                row = {"fit": fit, "n": n, "features": num_features, "classes": num_classes,
                       "maps": memory_maps(), "rss": resident_mib(), "compiles": builds[0],
                       "seconds": seconds}
                print(_JSON_TAG + json.dumps(row), flush=True)
                fit += 1


def _summary(name: str, rows: list[dict]) -> str:
    half = len(rows) // 2
    tail = rows[half:]
    span = max(len(tail) - 1, 1)
    per_fit_maps = (tail[-1]["maps"] - tail[0]["maps"]) / span
    per_fit_rss = (tail[-1]["rss"] - tail[0]["rss"]) / span
    first, last = rows[0], rows[-1]
    peak_maps, peak_rss = max(r["maps"] for r in rows), max(r["rss"] for r in rows)
    return (f"{name:6s} {len(rows):5d} fits  maps {first['maps']:6d} -> {last['maps']:6d} "
            f"(peak {peak_maps})  rss {first['rss']:7.0f} -> {last['rss']:7.0f} MiB (peak "
            f"{peak_rss:.0f})  compiles "
            f"{first['compiles']:5d} -> {last['compiles']:5d}  second half: "
            f"{per_fit_maps:+7.1f} maps/fit {per_fit_rss:+6.2f} MiB/fit  "
            f"median fit {sorted(r['seconds'] for r in tail)[len(tail) // 2]:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS),
                        choices=ESTIMATORS)
    parser.add_argument("--sizes", nargs=3, type=int, default=(20, 85, 4),
                        metavar=("START", "STOP", "STEP"))
    parser.add_argument("--features", nargs="+", type=int, default=[3])
    parser.add_argument("--classes", nargs="+", type=int, default=[3])
    parser.add_argument("--every", type=int, default=1, help="print every k-th fit")
    parser.add_argument("--child", choices=ESTIMATORS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    summaries = []
    for name in args.estimators:
        command = [sys.executable, __file__, "--child", name, "--sizes",
                   *map(str, args.sizes), "--features", *map(str, args.features),
                   "--classes", *map(str, args.classes)]
        print(f"# {name}: {' '.join(command[1:])}", flush=True)
        print(f"{'fit':>4} {'n':>5} {'D':>2} {'C':>2} {'maps':>7} {'rss MiB':>8} "
              f"{'compiles':>8} {'seconds':>8}", flush=True)
        rows = []
        cache = tempfile.TemporaryDirectory()  # compiled as a new user's first process
        env = {**os.environ, "PYTHONWARNINGS": "ignore", "PPGPC_COMPILATION_CACHE": cache.name}
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
        for line in process.stdout:
            if not line.startswith(_JSON_TAG):
                continue
            row = json.loads(line[len(_JSON_TAG):])
            rows.append(row)
            if row["fit"] % args.every == 0:
                print(f"{row['fit']:4d} {row['n']:5d} {row['features']:2d} "
                      f"{row['classes']:2d} {row['maps']:7d} {row['rss']:8.0f} "
                      f"{row['compiles']:8d} {row['seconds']:8.2f}", flush=True)
        code = process.wait()
        cache.cleanup()
        if code != 0:
            summaries.append(f"{name:6s} died with exit code {code} after {len(rows)} fits"
                             + (f" (last: {rows[-1]['maps']} maps, {rows[-1]['rss']:.0f} "
                                "MiB)" if rows else ""))
        elif rows:
            summaries.append(_summary(name, rows))
    print()
    print("\n".join(summaries))


if __name__ == "__main__":
    main()
