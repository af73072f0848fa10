"""``chains``: a sampler's chains side by side on a CPU, at most one per core, each chain's
results in its own row, and one program over all chains where a per-chain program holds a
batched factorisation."""

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppgpc.runtime import chains
from ppgpc.runtime.chains import batched_factorisations, chain_windows, chains_at_once, cpu_cores


def test_chains_at_once_is_at_most_the_cores_and_the_chains():
    assert 1 <= cpu_cores()
    assert chains_at_once(1) == 1
    assert chains_at_once(64) == min(64, cpu_cores())


class _Recorder:
    """A stand-in for a jitted one-chain window: sleeps (longest for chain 0, so the chains
    finish out of order) and counts the calls running at once."""

    def __init__(self):
        self.lock, self.running, self.most = threading.Lock(), 0, 0

    def __call__(self, state, args):
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.05 / (1 + float(state["c"])))
        with self.lock:
            self.running -= 1
        return {"c": state["c"], "x": state["x"] + args}, {"draw": np.full(3, state["c"])}

    @staticmethod
    def trace(state, args):  # no factorisations
        return jax.jit(lambda s: s).trace(state)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_at_most_workers_chains_run_at_once_and_each_keeps_its_row(monkeypatch, workers):
    monkeypatch.setattr(chains, "per_chain", lambda: True)
    one = _Recorder()
    stacked = {"c": np.arange(5), "x": np.zeros(5)}
    with chain_windows(None, one, stacked, 1.0, workers=workers) as (states, start):
        for _ in range(2):
            states, out = start(states, 1.0)()
    assert one.most == workers
    np.testing.assert_array_equal(out["draw"], np.repeat(np.arange(5)[:, None], 3, axis=1))
    assert [float(s["x"]) for s in states] == [2.0] * 5
    assert [int(s["c"]) for s in states] == list(range(5))


def test_one_program_over_all_chains_where_a_chain_factorises_a_batch(monkeypatch):
    """A per-chain program with a batched Cholesky factorisation (inside a loop) would hang
    XLA's CPU pool beside another one (jaxlib 0.10): the chains then run in the program
    over all chains."""
    monkeypatch.setattr(chains, "per_chain", lambda: True)

    def window(a, args):
        factor = jax.lax.fori_loop(0, 2, lambda i, m: jnp.linalg.cholesky(m), a)
        return factor, factor

    batched = jax.jit(window)
    single = jax.jit(lambda a, args: (jnp.linalg.cholesky(a), a))
    eye = jnp.broadcast_to(jnp.eye(3), (2, 4, 3, 3))   # (chain, class, 3, 3)
    assert batched_factorisations(batched, eye[0], None) == ["cholesky (4, 3, 3)"]
    assert batched_factorisations(single, eye[0, 0], None) == []
    everything = jax.jit(jax.vmap(window, in_axes=(0, None)))
    with chain_windows(everything, batched, eye, None) as (states, start):
        assert states is eye   # stacked: the program over all chains
        states, out = start(states, None)()
    assert out.shape == (2, 4, 3, 3)
