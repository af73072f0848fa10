"""The collapsed sparse models and the minibatch ELBOs on several devices (``devices``;
``ppgpc.runtime.blocks``). MCMC chains run in one program on one device
(``ppgpc.infer.mcmc.over_chains``), so there is no chain placement to check.

JAX fixes its devices when it starts, so the multi-device checks run ``device_checks.py``
in subprocesses: four forced host devices in one process, and two processes joined by
``jax.distributed`` on localhost (CPU collectives over gloo).
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from device_checks import DISTRIBUTED_FIT, toy
from ppgpc import DirichletGPClassifier, LogisticSoftmaxGPClassifier
from ppgpc.infer import fit

SCRIPT = Path(__file__).parent.parent / "device_checks.py"
TIMEOUT = 900


def _environment(num_devices: int | None) -> dict:
    env = dict(os.environ, JAX_ENABLE_X64="1", JAX_PLATFORMS="cpu")
    if num_devices is not None:
        env["XLA_FLAGS"] = (f"{env.get('XLA_FLAGS', '')} "
                            f"--xla_force_host_platform_device_count={num_devices}").strip()
    return env


def _records(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _four_device_records(checks: str) -> list[dict]:
    """The JSON records that ``device_checks.py checks`` prints with 4 forced devices."""
    run = subprocess.run([sys.executable, str(SCRIPT), checks], capture_output=True,
                         text=True, env=_environment(4), timeout=TIMEOUT)
    assert run.returncode == 0, run.stderr[-3000:]
    return _records(run.stdout)


@pytest.mark.slow
def test_four_devices_give_the_one_device_bound_gradient_posterior_and_predictions():
    records = _four_device_records("single")
    bounds = [r for r in records if r["check"] == "bound"]
    assert {r["case"] for r in bounds} == {"ilr shared", "ilr per coordinate",
                                           "gpd two-level", "gpd class kernels",
                                           "gpd per class"}
    for r in bounds:
        assert r["devices"] == 4, r
        assert r["value"] <= 1e-10 and r["gradient"] <= 1e-10 and r["posterior"] <= 1e-10, r
    fits = [r for r in records if r["check"] in ("fit", "estimator")]
    assert len(fits) == 4
    for r in fits:
        assert r["devices"] == 4, r
        assert r["proba"] <= 1e-8, r


@pytest.mark.slow
def test_four_devices_give_the_one_device_minibatch_elbos_steps_and_fits():
    records = _four_device_records("minibatch")
    elbos = [r for r in records if r["check"] == "minibatch elbo"]
    assert {r["case"] for r in elbos} == {"svgpc", "uncollapsed-ilr price per latent"}
    for r in elbos:
        assert r["devices"] == 4, r
        assert r["value"] <= 1e-10 and r["gradient"] <= 1e-10, r
    (steps,) = [r for r in records if r["check"] == "cavi steps"]
    assert steps["devices"] == 4, steps
    assert max(steps[k] for k in ("state", "hypers", "elbo", "elbo_state")) <= 1e-10, steps
    fits = [r for r in records if r["check"] in ("fit", "estimator")]
    assert {r["case"] for r in fits} == {"ilr_gp_uncollapsed", "SoftmaxSVGPClassifier",
                                         "logistic_softmax stochastic cavi"}
    for r in fits:
        assert r["devices"] == 4, r
        assert r["proba"] <= 1e-8, r


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_with_jax_distributed_fit_as_one_process():
    if not hasattr(jax.config, "jax_cpu_collectives_implementation"):
        pytest.skip("this jaxlib has no CPU collectives (jax_cpu_collectives_implementation), "
                    "so two CPU processes cannot be joined")
    port = _free_port()
    runs = [subprocess.Popen([sys.executable, str(SCRIPT), "distributed", str(i), "2",
                              str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=_environment(None)) for i in range(2)]
    outputs = [run.communicate(timeout=TIMEOUT) for run in runs]
    for run, (_, err) in zip(runs, outputs):
        assert run.returncode == 0, err[-3000:]
    X, y = toy()
    want = fit("ilr_gp_sparse", X, y, **DISTRIBUTED_FIT).predict_proba(toy(40, seed=7)[0])
    for i, (out, _) in enumerate(outputs):
        (record,) = _records(out)
        assert (record["process"], record["global_devices"], record["devices"]) == (i, 2, 2)
        np.testing.assert_allclose(record["proba"], want, rtol=0, atol=1e-8)


# ------------------------------------------------------------ one device, and bad values
def test_one_device_mesh_is_the_default_fit():
    X, y = toy(60)
    runs = [fit("dirichlet_gp_sparse", X, y, model_options={"num_inducing": 5}, max_iter=5,
                num_draws=2, devices=devices) for devices in (None, 1)]
    assert runs[1].info.devices == 1 and runs[0].info.devices is None
    np.testing.assert_allclose(runs[1].predict_proba(X[:5]), runs[0].predict_proba(X[:5]),
                               rtol=0, atol=1e-12)


def test_devices_are_refused_where_they_cannot_be_used():
    X, y = toy(30)
    with pytest.raises(ValueError, match=r"method 'nuts' cannot split") as refusal:
        fit("ilr_gp", X, y, method="nuts", devices=1)
    for who_can in ("exact: ['ilr_gp_sparse', 'dirichlet_gp_sparse']",
                    "svi: ['softmax_svgp', 'ilr_gp_uncollapsed']", "cavi: ['logistic_softmax']"):
        assert who_can in str(refusal.value)
    with pytest.raises(ValueError, match=r"model 'ilr_gp' cannot split.*with method 'exact' "
                                         r"are \['ilr_gp_sparse', 'dirichlet_gp_sparse'\]"):
        fit("ilr_gp", X, y, method="exact", devices=1)
    with pytest.raises(ValueError, match=r"method 'cavi' cannot split .* full-batch CAVI runs "
                                         "on one device; give batch_size"):
        fit("logistic_softmax", X, y, method="cavi", devices=1)
    with pytest.raises(ValueError, match="ell_estimator='joint' .* cannot be split over "
                                         "devices; the 'marginal'"):
        fit("softmax_svgp", X, y, method="svi", devices=1,
            model_options={"ell_estimator": "joint", "num_inducing": 5})
    with pytest.raises(ValueError, match=r"devices=\d+ but JAX sees"):
        fit("ilr_gp_sparse", X, y, devices=len(jax.devices()) + 1)
    no_data_axis = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("batch",))
    with pytest.raises(ValueError, match="axis named 'data'"):
        fit("ilr_gp_sparse", X, y, devices=no_data_axis)
    with pytest.raises(ValueError, match="positive integer or a jax.sharding.Mesh"):
        fit("ilr_gp_sparse", X, y, devices="all")
    with pytest.raises(ValueError, match="positive integer or a jax.sharding.Mesh"):
        fit("softmax_svgp", X, y, method="svi", devices="all")
    with pytest.raises(ValueError, match=r"method 'cavi' cannot split .* full-batch CAVI"):
        LogisticSoftmaxGPClassifier(inference="cavi", progress=False,
                                    inference_options={"devices": 1}).fit(X, y)
    with pytest.raises(ValueError, match=r"model 'dirichlet_gp' cannot split"):
        DirichletGPClassifier(alpha_eps=0.01, inference="map", progress=False,
                              inference_options={"devices": 1}).fit(X, y)
