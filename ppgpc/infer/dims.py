"""Dim names of the models' sites, shared by ppgpc's ArviZ export and plain NumPyro runs.

``to_inference_data`` names the axes of every variable it exports (``obs``, ``latent``,
``feature``, ``inducing``); ``arviz_dims`` gives ``az.from_numpyro`` the same names for a
run of a model's ``latent_model`` outside ppgpc. The latent models observe each point
inside ``numpyro.plate("data", N)``, so the log-likelihood ArviZ computes from such a run
has one entry per observation (``az.loo`` on N points, not on one joint observation).
"""

from __future__ import annotations

import numpy as np

from ppgpc.infer.common import resolve_spec

__all__ = ["LATENT_SITE_DIMS", "arviz_dims", "hyperparameter_dims"]

LATENT_SITE_DIMS = {"f_white": ["latent", "obs"], "f": ["obs", "latent"], "y": ["obs"],
                    "z": ["obs", "latent"], "ytilde": ["obs", "latent"], "lambda": ["obs"],
                    "n": ["obs", "latent"], "omega": ["obs", "latent"]}
"""Dims of the latent-form models' own sites, by the site names they share: the whitened
latent ``f_white`` (L, N) and ``f`` (N, L); the observed labels ``y`` (N,) of the
logistic-softmax and SVGP models; the Gaussian targets ``z`` (N, C-1) of ILR-GP and
``ytilde`` (N, C) of GPD; the augmentation ``lambda`` (N,), ``n`` and ``omega`` (N, C) of
the logistic-softmax ``augmented_model`` (a NumPyro model of that module, run by hand).
(ArviZ drops the trailing ``latent`` of ``z`` and ``ytilde`` in ``log_likelihood``, which
has one value per observation.)"""


def hyperparameter_dims(name: str, shape: tuple, *, num_features: int, num_latent: int,
                        ard: bool) -> list | None:
    """Dims of a hyperparameter site's value (its shape without chain and draw).

    ``kernel_lengthscale`` is [feature] for an ARD kernel, [latent] for one lengthscale per
    latent GP, [latent, feature] for both; ``kernel_variance``, ``mean`` and
    ``noise_scale`` with an axis are per latent GP; ``inducing_inputs`` is [inducing,
    feature], or [latent, inducing, feature] when each latent has its own. Anything else
    gets ArviZ's default dim names (``None``).
    """
    ndim = len(shape)
    if ndim == 0:
        return []
    if name == "inducing_inputs" and ndim == 2:
        return ["inducing", "feature"]
    if name == "inducing_inputs" and ndim == 3:
        return ["latent", "inducing", "feature"]
    if name == "kernel_lengthscale":
        if ndim == 2:
            return ["latent", "feature"]
        return ["feature"] if ard and shape[0] == num_features else ["latent"]
    if (name in ("kernel_variance", "mean", "noise_scale") and ndim == 1
            and shape[0] == num_latent):
        return ["latent"]
    return None


def arviz_dims(model, data, kernel, *, feature_names=None) -> dict:
    """``dims``, ``coords`` and ``log_likelihood=True`` (which ArviZ 1 needs, 0.2x implied)
    for ``az.from_numpyro`` of a run of a model's ``latent_model``.

    Names the sites as ``to_inference_data`` does: ``LATENT_SITE_DIMS`` and the
    hyperparameter sites (``hyperparameter_dims``), with coordinates ``obs`` 0..N-1,
    ``latent`` 0..L-1 and ``feature`` (``feature_names`` or 0..D-1).

    Args:
        model: a ``ModelSpec`` or a model name (``ppgpc.models.available()``) with a latent
            form.
        data: the model's prepared data (``spec.prepare(X, y, num_classes, ...)``), the
            one the NumPyro model was run on.
        kernel: the kernel the model was run with (its ARD setting names the lengthscale).
        feature_names: optional names of the D inputs.

    Returns:
        ``{"dims": {site: [dim, ...]}, "coords": {dim: values}, "log_likelihood": True}``,
        to pass as ``az.from_numpyro(mcmc, **arviz_dims(...))``.

    Raises:
        ValueError: the model has no latent form (the collapsed sparse models), or
            ``feature_names`` does not have D entries.

    Example:
        >>> import functools, arviz as az, jax, numpy as np
        >>> from numpyro.infer import MCMC, NUTS
        >>> from ppgpc.infer import arviz_dims
        >>> from ppgpc.gp.kernels import make_kernel
        >>> from ppgpc.models import get_spec
        >>> X = np.random.default_rng(0).normal(size=(20, 2)); y = (X[:, 0] > 0).astype(int)
        >>> spec, kernel = get_spec("logistic_softmax"), make_kernel("rbf")
        >>> data = spec.prepare(X, y, 2)
        >>> fixed = {"kernel_variance": 1.0, "kernel_lengthscale": 1.0}
        >>> model = functools.partial(spec.latent.latent_model, data, kernel, fixed)
        >>> mcmc = MCMC(NUTS(model), num_warmup=100, num_samples=100, progress_bar=False)
        >>> mcmc.run(jax.random.PRNGKey(0))
        >>> idata = az.from_numpyro(mcmc, **arviz_dims(spec, data, kernel))
        >>> idata.log_likelihood["y"].dims, idata.log_likelihood["y"].shape
        (('chain', 'draw', 'obs'), (1, 100, 20))
    """
    spec = resolve_spec(model)
    if not spec.has("latent"):
        raise ValueError(f"model {spec.name!r} has no latent form (latent_model) whose sites "
                         "could be named; its collapsed bound observes no site per point")
    N, D = np.shape(data.X)
    L = spec.num_latent(int(data.num_classes))
    features = np.arange(D) if feature_names is None else np.asarray(feature_names)
    if features.shape != (D,):
        raise ValueError(f"feature_names must have {D} entries, got {features.shape}")
    ard = bool(getattr(kernel, "ard", False))
    dims = {name: list(value) for name, value in LATENT_SITE_DIMS.items()}
    for name, value in spec.initial_hypers(data, kernel).items():
        site_dims = hyperparameter_dims(name, np.shape(value), num_features=D, num_latent=L,
                                        ard=ard)
        if site_dims is not None:
            dims[name] = site_dims
    return {"dims": dims, "coords": {"obs": np.arange(N), "latent": np.arange(L),
                                     "feature": features}, "log_likelihood": True}
