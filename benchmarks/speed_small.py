"""Fit and predict seconds, and XLA compilations, of the estimators' defaults on the small sets.

For each data set (wine, glass, thyroid: the ILR paper's split, ``ppgpc.experiments.
benchmark_split``, fitted on training plus validation points as ``run_split`` does; raw
features, which the estimators standardise themselves) and each estimator with its default
options (``ILRGPClassifier()``, ``DirichletGPClassifier()``, ``LogisticSoftmaxGPClassifier()``,
``SoftmaxSVGPClassifier()``), one row of:

* ``cold fit``: ``fit`` in a fresh Python process with an empty persistent compilation
  cache (a new temporary folder as ``PPGPC_COMPILATION_CACHE``, ``JAX_COMPILATION_CACHE_DIR``
  unset), i.e. what a user's first fit costs;
* ``cache fit``: ``fit`` in a second fresh process that reads that (now filled) folder;
* ``refit``: ``fit`` again in the cold process, with the compiled code in memory;
* ``pred50``: ``predict`` on the 50 test rows, the first call after the fits (cold process);
* ``p10`` ... ``p41``: then ``predict_proba`` on 10, 11, 12 and 41 rows;
* accuracy, NLL and top-label ECE on the test rows (``est.evaluate``).

Each timing cell reads ``seconds/compilations``: the XLA compilations the call triggered.
They are counted with ``jax.monitoring`` listeners. JAX records the event
``/jax/core/compile/backend_compile_duration`` for every executable it builds outside its
in-memory cache, including those read back from the persistent cache, which also record
``/jax/compilation_cache/cache_hits``; compilations = the first count minus the second. The
``cache fit`` cell adds ``+k``, the k programs read from the cache (programs that compiled
in under ``ppgpc._config.CACHE_MIN_COMPILE_SECONDS``, if set above 0, are not stored, so
they compile again).

A ``GPyTorch`` row (GPyTorch's exact Dirichlet GP classifier, ``gpytorch_peer.py``, 100
Adam steps; when torch and gpytorch are installed) gives its cold fit (fresh process), its
refit in the same process, and its scores; it has no compilation cache.

Finally the whole ``ppgpc compare --dataset wine`` command is timed as a subprocess, cold
(an empty cache folder) and warm (the same folder again).

Every measurement of one (data set, estimator) runs in its own process
(``speed_small.py --child ...`` prints one JSON line), so every cold number is a fresh one.

    python benchmarks/speed_small.py
    python benchmarks/speed_small.py --datasets wine --estimators ILR GPyTorch --no-compare
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ESTIMATORS = ("ILR", "GPD", "LSM", "SVGPC", "GPyTorch")
DATASETS = ("wine", "glass", "thyroid")
PREDICT_ROWS = (10, 11, 12, 41)
_JSON_TAG = "SPEED_SMALL_JSON "
_BUILD_EVENT = "/jax/core/compile/backend_compile_duration"
_CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"


# ------------------------------------------------------------------ child: one measurement


class _CompileCounter:
    """Running counts of executables built and of persistent-cache hits (``jax.monitoring``).

    Register before anything compiles; ``counts()`` returns the running totals, and the
    compilations between two calls are the difference of ``built - loaded``.
    """

    def __init__(self):
        import jax

        self.built = 0
        self.loaded = 0
        jax.monitoring.register_event_duration_secs_listener(self._on_duration)
        jax.monitoring.register_event_listener(self._on_event)

    def _on_duration(self, event: str, duration: float, **kwargs) -> None:
        if event == _BUILD_EVENT:
            self.built += 1

    def _on_event(self, event: str, **kwargs) -> None:
        if event == _CACHE_HIT_EVENT:
            self.loaded += 1

    def measure(self, fn):
        """(result, seconds, compiled, loaded) of ``fn()``."""
        built, loaded = self.built, self.loaded
        start = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - start
        hits = self.loaded - loaded
        return result, seconds, self.built - built - hits, hits


def _factories():
    import ppgpc

    return {"ILR": ppgpc.ILRGPClassifier, "GPD": ppgpc.DirichletGPClassifier,
            "LSM": ppgpc.LogisticSoftmaxGPClassifier, "SVGPC": ppgpc.SoftmaxSVGPClassifier}


def _fit_data(dataset: str, seed: int):
    import numpy as np

    from ppgpc.experiments import benchmark_split

    split = benchmark_split(dataset, seed)
    X_fit = np.concatenate([split.X_train, split.X_val])
    y_fit = np.concatenate([split.y_train, split.y_val])
    return X_fit, y_fit, split.X_test, split.y_test


def _child_ppgpc(counter: _CompileCounter, name: str, data, seed: int) -> dict:
    import numpy as np

    X_fit, y_fit, X_test, y_test = data
    est = _factories()[name](seed=seed)
    out = {}
    _, out["fit_s"], out["fit_compiled"], out["fit_loaded"] = counter.measure(
        lambda: est.fit(X_fit, y_fit))
    _, out["refit_s"], out["refit_compiled"], _ = counter.measure(lambda: est.fit(X_fit, y_fit))
    _, out["pred50_s"], out["pred50_compiled"], out["pred50_loaded"] = counter.measure(
        lambda: est.predict(X_test))
    for n in PREDICT_ROWS:
        rows = np.resize(np.arange(X_test.shape[0]), n)  # n rows, repeated if fewer
        _, out[f"p{n}_s"], out[f"p{n}_compiled"], _ = counter.measure(
            lambda: est.predict_proba(X_test[rows]))
    out.update({k: float(v) for k, v in est.evaluate(X_test, y_test).items()
                if k in ("accuracy", "nll", "ece")})
    return out


def _child_gpytorch(data, seed: int) -> dict:
    import numpy as np

    from gpytorch_peer import AVAILABLE, UNAVAILABLE_NOTE, fit_predict
    from ppgpc.evaluation import metrics

    if not AVAILABLE:
        return {"skipped": UNAVAILABLE_NOTE}
    X_fit, y_fit, X_test, y_test = data
    classes = np.unique(y_fit)
    codes_fit = np.searchsorted(classes, y_fit)
    codes_test = np.searchsorted(classes, y_test)
    probs, fit_s, _ = fit_predict(X_fit, codes_fit, X_test, seed=seed)
    _, refit_s, _ = fit_predict(X_fit, codes_fit, X_test, seed=seed)
    scores = metrics.evaluate(probs, codes_test)
    return {"fit_s": fit_s, "refit_s": refit_s,
            **{k: float(scores[k]) for k in ("accuracy", "nll", "ece")}}


def _child(args) -> int:
    counter = _CompileCounter()  # before ppgpc's import, which may compile
    import warnings

    import ppgpc.runtime  # noqa: F401  (float64, the cache from PPGPC_COMPILATION_CACHE)

    data = _fit_data(args.dataset, args.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # jitter or convergence notes are not the subject
        if args.estimator == "GPyTorch":
            out = _child_gpytorch(data, args.seed)
        else:
            out = _child_ppgpc(counter, args.estimator, data, args.seed)
    print(_JSON_TAG + json.dumps(out), flush=True)
    return 0


# ------------------------------------------------------------------ parent: the table


def _child_env(cache_dir: str) -> dict:
    env = dict(os.environ)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env["PPGPC_COMPILATION_CACHE"] = cache_dir
    return env


def _run_child(dataset: str, estimator: str, seed: int, cache_dir: str) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--child", "--dataset", dataset,
               "--estimator", estimator, "--seed", str(seed)]
    done = subprocess.run(command, env=_child_env(cache_dir), capture_output=True, text=True)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(_JSON_TAG):
            return json.loads(line[len(_JSON_TAG):])
    tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
    return {"error": f"exit {done.returncode}: " + " | ".join(tail)}


def _ppgpc_command() -> list[str]:
    """The ``ppgpc`` console script of this interpreter (``python -m ppgpc.cli`` without)."""
    script = os.path.join(os.path.dirname(sys.executable), "ppgpc")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "ppgpc.cli"]


def _time_compare(seed: int) -> tuple[float, float, int]:
    """Wall seconds of ``ppgpc compare --dataset wine``, cold then warm, and the exit code."""
    cache_dir, out_dir = tempfile.mkdtemp(prefix="ppgpc-cache-"), tempfile.mkdtemp()
    command = _ppgpc_command() + ["compare", "--dataset", "wine", "--seed", str(seed),
                                  "--output-dir", out_dir]
    seconds, code = [], 0
    try:
        for _ in range(2):
            start = time.perf_counter()
            done = subprocess.run(command, env=_child_env(cache_dir), capture_output=True)
            seconds.append(time.perf_counter() - start)
            code = code or done.returncode
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
        shutil.rmtree(out_dir, ignore_errors=True)
    return seconds[0], seconds[1], code


def _cell(r: dict, key: str, loaded: bool = False) -> str:
    if f"{key}_s" not in r:
        return "-"
    text = f"{r[f'{key}_s']:.2f}"
    if f"{key}_compiled" in r:
        text += f"/{r[f'{key}_compiled']}"
    if loaded and r.get(f"{key}_loaded"):
        text += f"+{r[f'{key}_loaded']}"
    return text


def _row(dataset: str, estimator: str, cold: dict, warm: dict | None) -> str:
    warm = warm or {}
    cells = [_cell(cold, "fit"), _cell(warm, "fit", loaded=True), _cell(cold, "refit"),
             _cell(cold, "pred50")] + [_cell(cold, f"p{n}") for n in PREDICT_ROWS]
    scores = " ".join(f"{cold[k]:6.3f}" for k in ("accuracy", "nll", "ece"))
    return (f"{dataset:>8s} {estimator:>8s} {cells[0]:>11s} {cells[1]:>14s} {cells[2]:>10s} "
            f"{cells[3]:>10s} " + " ".join(f"{c:>9s}" for c in cells[4:]) + f" {scores}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS),
                        choices=ESTIMATORS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-compare", action="store_true",
                        help="skip timing the `ppgpc compare --dataset wine` command")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dataset", help=argparse.SUPPRESS)
    parser.add_argument("--estimator", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args)

    print(f"estimator defaults on the ILR paper's split (seed {args.seed}); cells are "
          f"seconds/XLA compilations (+k: programs read from the persistent cache); "
          f"{os.cpu_count()} cores")
    header = (f"{'dataset':>8s} {'model':>8s} {'cold fit':>11s} {'cache fit':>14s} "
              f"{'refit':>10s} {'pred50':>10s} "
              + " ".join(f"{f'p{n}':>9s}" for n in PREDICT_ROWS)
              + f" {'acc':>6s} {'NLL':>6s} {'ECE':>6s}")
    print(header)
    print("-" * len(header))
    notes = []
    for dataset in args.datasets:
        for estimator in args.estimators:
            cache_dir = tempfile.mkdtemp(prefix="ppgpc-cache-")
            try:
                cold = _run_child(dataset, estimator, args.seed, cache_dir)
                warm = None
                if estimator != "GPyTorch" and "error" not in cold:
                    warm = _run_child(dataset, estimator, args.seed, cache_dir)
            finally:
                shutil.rmtree(cache_dir, ignore_errors=True)
            problem = cold.get("skipped") or cold.get("error") or (warm or {}).get("error")
            if problem:
                note = problem if "skipped" in cold else f"{dataset} {estimator}: {problem}"
                notes.append(note) if note not in notes else None
                continue
            print(_row(dataset, estimator, cold, warm), flush=True)
    for note in notes:
        print(note)
    if not args.no_compare:
        cold_s, warm_s, code = _time_compare(args.seed)
        status = "" if code == 0 else f" (exit code {code})"
        print(f"ppgpc compare --dataset wine: {cold_s:.1f} s cold (empty cache), "
              f"{warm_s:.1f} s warm (same cache folder){status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
