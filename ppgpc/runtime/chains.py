"""A sampler's chains on every CPU core the process may use.

A windowed sampler (``ppgpc.infer.mcmc.sample_windows``) advances its chains by compiled
windows of transitions. How a window's chains run depends on the backend:

* on an accelerator, one program over all chains (``all_chains``: the chains vmapped), as
  before;
* on a CPU, one program of one chain (``one_chain``) called once per chain, with up to
  ``chains_at_once(num_chains)`` = min(chains, cores) of those calls running at the same time
  on a thread pool of that many threads. A thread dispatches its chain's program and waits
  for its results; JAX releases the GIL while a program runs, so the programs run side by
  side, each on its own core. JAX's asynchronous dispatch alone does not overlap them
  (docs/records/speed.md, "Chains on every core"). The cores are those of
  ``os.sched_getaffinity(0)``: a process pinned to fewer cores (``taskset``, a batch
  scheduler's cgroup) runs fewer chains at once.

Every chain computes what it would compute alone: the same program on the same state and
key, so the draws are the same whether its chains run one after another or side by side,
and the order in which they finish changes nothing (chain c's results go to row c).

A window is started by ``start(states, args)``, which returns at once a function ``wait()``
returning ``(states, (draws, stats))`` when every chain's window is done. So the caller
can start the next window before it looks at the last one's draws, on either backend.

Programs side by side and XLA's CPU pool (docs/records/speed.md, "A deadlock in batched
LAPACK calls"): since jaxlib 0.10 a batched Cholesky factorisation or triangular solve
spreads its batch over XLA's CPU thread pool and waits for it, and the programs JAX
dispatches run on that pool too; two per-chain programs at once, each inside such a call,
can leave no thread to run the pieces they wait for, and the fit never ends (the
logistic-softmax GP's Gibbs sweep, with one factorisation per class, hung at once). An
unbatched call runs inline. So the chains run side by side only when their program holds
no batched factorisation (``batched_factorisations``, read from the program's jaxpr); the
NUTS programs of ppgpc's models hold none (their factorisations are of one matrix, or one
class at a time under ``lax.map``); otherwise the run keeps ``all_chains``.
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator

import jax
import numpy as np

__all__ = ["cpu_cores", "chains_at_once", "per_chain", "batched_factorisations",
           "chain_windows", "FACTORISATIONS"]

FACTORISATIONS = frozenset({"cholesky", "triangular_solve", "lu", "eigh", "qr",
                            "householder_product", "svd", "schur", "eig"})
"""The primitives JAX's CPU backend runs as LAPACK calls, which jaxlib 0.10 spreads over
XLA's pool when they are batched (module docstring)."""


def cpu_cores() -> int:
    """The CPU cores this process may run on (``os.sched_getaffinity(0)``; ``os.cpu_count()``
    where the platform has no affinity)."""
    if hasattr(os, "sched_getaffinity"):
        return max(len(os.sched_getaffinity(0)), 1)
    return max(os.cpu_count() or 1, 1)


def chains_at_once(num_chains: int) -> int:
    """The chains that run at the same time on a CPU: min(``num_chains``, ``cpu_cores()``)."""
    return max(min(int(num_chains), cpu_cores()), 1)


def per_chain() -> bool:
    """Whether chains run as one program per chain (on a CPU) rather than one program over
    all chains (on an accelerator)."""
    return jax.default_backend() == "cpu"


def _equations(jaxpr) -> Iterator:
    """Every equation of ``jaxpr`` and of the jaxprs inside it (loops, branches, calls)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            for inner in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(inner, "jaxpr", inner)
                if hasattr(inner, "eqns"):
                    yield from _equations(inner)


def batched_factorisations(fn: Callable, *args) -> list[str]:
    """The batched LAPACK calls (``FACTORISATIONS`` whose first operand has more than two
    axes) in the program of the jitted ``fn`` on ``args``, as ``"name shape"``."""
    jaxpr = fn.trace(*args).jaxpr.jaxpr
    return [f"{eqn.primitive.name} {eqn.invars[0].aval.shape}" for eqn in _equations(jaxpr)
            if eqn.primitive.name in FACTORISATIONS and eqn.invars
            and len(getattr(eqn.invars[0].aval, "shape", ())) > 2]


def _split(one_chain: Callable | None, states, args) -> list | None:
    """The chains' states one by one (on the host) when they run per chain: on a CPU, with
    a per-chain program free of batched factorisations; else None."""
    if one_chain is None or not per_chain():
        return None
    host = jax.device_get(states)
    split = [jax.tree.map(lambda x, c=c: x[c], host)
             for c in range(int(jax.tree.leaves(host)[0].shape[0]))]
    return None if batched_factorisations(one_chain, split[0], args) else split


def _one(one_chain: Callable, state, args):
    """Chain ``state``'s window, waited for on this thread: (state, outputs on the host)."""
    state, out = one_chain(state, args)
    return state, jax.device_get(out)


def _started(pool: ThreadPoolExecutor, one_chain: Callable, states: list, args) -> Callable:
    """Every chain's window submitted to ``pool``; ``wait()`` gathers them in chain order,
    the outputs stacked along a leading chain axis."""
    futures = [pool.submit(_one, one_chain, state, args) for state in states]

    def wait():
        done = [future.result() for future in futures]
        outputs = jax.tree.map(lambda *xs: np.stack(xs), *[out for _, out in done])
        return [state for state, _ in done], outputs

    return wait


@contextlib.contextmanager
def chain_windows(all_chains: Callable, one_chain: Callable | None, states, args,
                  workers: int | None = None) -> Iterator[tuple[object, Callable]]:
    """``with chain_windows(all_chains, one_chain, states) as (states, start):`` the windows
    of a run's chains (module docstring).

    Args:
        all_chains: ``(states, args) -> (states, outputs)``, a window of every chain in one
            program; states and outputs carry a leading chain axis.
        one_chain: ``(state, args) -> (state, outputs)``, the same window of one chain,
            jitted (None: ``all_chains`` everywhere); run per chain on a CPU unless its
            program holds batched factorisations (``batched_factorisations``).
        states: the chains' states, stacked along a leading chain axis.
        args: the programs' other argument (the data), which ``start`` is given.
        workers: chains at once on a CPU (None: ``chains_at_once``; 1: one after another).

    Yields:
        ``(states, start)``: the states as ``start`` takes them (stacked for ``all_chains``,
        a list of one state per chain for ``one_chain``) and ``start(states, args) ->
        wait``, ``wait() -> (states, outputs)`` with the outputs stacked by chain (device
        arrays from ``all_chains``, host arrays from ``one_chain``).
    """
    split = _split(one_chain, states, args)
    if split is None:
        yield states, lambda s, args: (lambda out=all_chains(s, args): out)
        return
    count = chains_at_once(len(split)) if workers is None else max(int(workers), 1)
    with ThreadPoolExecutor(count, thread_name_prefix="ppgpc-chain") as pool:
        yield split, lambda s, args: _started(pool, one_chain, s, args)
