"""GPyTorch's exact Dirichlet GP classifier, the peer the speed benchmarks compare with.

The model follows GPyTorch's Dirichlet classification example (Milios et al. 2018, the GPD
of docs/math.md section 2 as GPyTorch ships it): ``DirichletClassificationLikelihood`` turns the
labels into C log-normal regression targets with fixed heteroscedastic noise (plus a learned
noise per class, ``learn_additional_noise=True``); an ``ExactGP`` with one constant mean and
one scaled RBF kernel per class (batch shape [C]) regresses them; the hyperparameters take
a fixed number of Adam steps on the exact marginal likelihood; class probabilities are the
mean over draws of the latent predictive of the softmax of the C latents.

Differences from ppgpc's ``DirichletGPClassifier`` worth knowing when reading the numbers:
GPyTorch runs Cholesky only up to ``gpytorch.settings.max_cholesky_size`` points (800 by
default) and conjugate gradients with Lanczos log-determinant estimates above that; each
class has its own kernel; a fixed number of Adam steps replaces L-BFGS to convergence.

torch and gpytorch are optional (``pip install -e ".[peers]"``); ``AVAILABLE`` says whether
they import, and the benchmarks skip the peer rows without them.

    from gpytorch_peer import fit_predict   # from a script in benchmarks/
    probs, fit_seconds, seconds_per_step = fit_predict(X_train, y_train, X_test)
"""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np

try:
    import gpytorch
    import torch
except ImportError:  # the benchmarks print a note and skip the peer
    gpytorch = torch = None

__all__ = ["AVAILABLE", "UNAVAILABLE_NOTE", "fit_predict"]

AVAILABLE = gpytorch is not None
"""Whether torch and gpytorch import."""

UNAVAILABLE_NOTE = ("GPyTorch rows skipped: torch/gpytorch are not installed "
                    "(pip install -e \".[peers]\")")


def _configure_torch(num_threads: int | None) -> None:
    """float64 (as ppgpc), and ``num_threads`` torch threads (default: one per core)."""
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(num_threads or os.cpu_count() or 1)


def _model(X, targets, likelihood, num_classes: int, ard: bool):
    """An ``ExactGP`` with C independent outputs: batch shape [C], one mean and kernel each."""
    batch = torch.Size([num_classes])

    class DirichletGP(gpytorch.models.ExactGP):
        def __init__(self):
            super().__init__(X, targets, likelihood)
            self.mean_module = gpytorch.means.ConstantMean(batch_shape=batch)
            self.covar_module = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel(batch_shape=batch,
                                           ard_num_dims=X.shape[1] if ard else None),
                batch_shape=batch)

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    return DirichletGP()


def fit_predict(X_train, y_train, X_test, *, steps: int = 100, lr: float = 0.1,
                alpha_eps: float = 0.01, num_samples: int = 256, seed: int = 0,
                ard: bool = True, standardize: bool = True,
                max_cholesky_size: int | None = None, num_threads: int | None = None):
    """Fit GPyTorch's Dirichlet GP classifier and predict class probabilities.

    Args:
        X_train: (N, D) training inputs.
        y_train: (N,) integer labels in 0..C-1 (C = largest label + 1).
        X_test: (n, D) test inputs.
        steps: Adam steps on the negative exact marginal log-likelihood (summed over
            the C outputs).
        lr: Adam's learning rate.
        alpha_eps: the Dirichlet concentration of the other classes (GPyTorch's
            ``alpha_epsilon``).
        num_samples: draws of the latent predictive averaged through the softmax.
        seed: torch seed (initial state of the predictive draws).
        ard: one lengthscale per input, as ppgpc's default ``"rbf-ard"`` kernel.
        standardize: scale the inputs by the training mean and standard deviation, as
            ppgpc's estimators do (turn off for inputs already on a unit scale).
        max_cholesky_size: GPyTorch's ``max_cholesky_size`` setting (None: its default,
            800; above it GPyTorch uses conjugate gradients).
        num_threads: torch's intra-op threads (None: ``os.cpu_count()``). On a machine
            whose cores are busy with other work, one thread per core makes torch's
            OpenMP steps stall (seconds instead of milliseconds); time on a quiet machine.

    Returns:
        ``(probs, fit_seconds, seconds_per_step)``: (n, C) numpy probabilities, the
        seconds of the whole fit (model construction and every step) and the median
        seconds of one Adam step (value, gradient and update), the first step left out.
    """
    if not AVAILABLE:
        raise ImportError(UNAVAILABLE_NOTE)
    _configure_torch(num_threads)
    torch.manual_seed(seed)
    X_train = np.asarray(X_train, dtype=np.float64)
    X_test = np.asarray(X_test, dtype=np.float64)
    if standardize:
        mean, scale = X_train.mean(0), X_train.std(0)
        scale = np.where(scale > 0, scale, 1.0)
        X_train, X_test = (X_train - mean) / scale, (X_test - mean) / scale
    cholesky = (contextlib.nullcontext() if max_cholesky_size is None
                else gpytorch.settings.max_cholesky_size(max_cholesky_size))
    x = torch.as_tensor(X_train)
    labels = torch.as_tensor(np.asarray(y_train, dtype=np.int64))

    with cholesky:
        # 1. Model: the likelihood transforms the labels into (C, N) regression targets.
        start = time.perf_counter()
        likelihood = gpytorch.likelihoods.DirichletClassificationLikelihood(
            labels, alpha_epsilon=alpha_eps, learn_additional_noise=True, dtype=torch.float64)
        num_classes = likelihood.num_classes
        model = _model(x, likelihood.transformed_targets, likelihood, num_classes, ard)
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)  # includes the likelihood's

        # 2. Type-II ML: Adam on the negative marginal likelihood of the C outputs.
        model.train()
        likelihood.train()
        step_seconds = []
        for _ in range(steps):
            step_start = time.perf_counter()
            optimizer.zero_grad()
            loss = -mll(model(x), likelihood.transformed_targets).sum()
            loss.backward()
            optimizer.step()
            step_seconds.append(time.perf_counter() - step_start)
        fit_seconds = time.perf_counter() - start

        # 3. Prediction: softmax of draws of the (C, n) latent predictive, averaged.
        model.eval()
        likelihood.eval()
        with torch.no_grad(), gpytorch.settings.fast_pred_var():
            latent = model(torch.as_tensor(X_test))
            draws = latent.sample(torch.Size([num_samples]))        # (S, C, n)
            probs = torch.softmax(draws, dim=-2).mean(0).T          # (n, C)
    per_step = float(np.median(step_seconds[1:] or step_seconds)) if steps else float("nan")
    return probs.numpy(), fit_seconds, per_step
