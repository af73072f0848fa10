"""Export a ``FitResult`` to ArviZ ``InferenceData``.

Groups (dims in brackets):

* ``posterior``: ``f`` [chain, draw, obs, latent] (latent at the training inputs) and the
  hyperparameter sites (``kernel_lengthscale`` over [feature] for ARD kernels). Point
  estimates are repeated over the draws of ``f`` so every variable has the same draws.
* ``log_likelihood``: ``y`` [chain, draw, obs], the categorical log p(y_i | f_i), so that
  ``az.loo``/``az.waic``/``az.compare`` compare models on the same footing.
* ``posterior_predictive``: ``y`` [chain, draw, obs], labels sampled from p(y | f_i).
* ``observed_data``: ``y`` [obs]; ``constant_data``: ``X`` [obs, feature].
* ``predictions`` (when ``X_pred`` is given): ``p`` [chain, draw, pred, class] and sampled
  labels ``y`` [chain, draw, pred]; ``predictions_constant_data``: ``X``.
* ``sample_stats``: what the method recorded (NUTS: diverging, tree_depth, ...).

``attrs`` name the model, method and settings (JSON text, because netCDF attributes must be
strings or numbers).
"""

from __future__ import annotations

import json

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["to_inference_data"]


def _sample_labels(key, log_probs):
    return np.asarray(jax.random.categorical(key, log_probs, axis=-1))


def to_inference_data(result, X_pred=None, *, key=None, class_names=None, feature_names=None):
    """Build an ``az.InferenceData`` from a fitted result.

    Args:
        result: a ``FitResult``.
        X_pred: optional (n, D) inputs (in the model's input space) for a ``predictions``
            group.
        key: PRNG key for sampled labels and predictive draws (default from the result's seed).
        class_names: labels for the ``class`` coordinate (default 0..C-1).
        feature_names: labels for the ``feature`` coordinate.
    """
    key = jax.random.PRNGKey(result.seed + 2) if key is None else key
    k_pp, k_pred, k_pred_y = jax.random.split(key, 3)
    data = result.data
    chains, draws = result.num_chains, result.num_draws
    N, D = data.X.shape
    C = result.num_classes
    classes = list(range(C)) if class_names is None else [str(c) for c in class_names]
    features = list(range(D)) if feature_names is None else [str(f) for f in feature_names]

    posterior = {"f": np.asarray(result.latent)}
    dims = {"f": ["obs", "latent"], "y": ["obs"], "X": ["obs", "feature"]}
    for name, value in result.hypers.items():
        value = np.broadcast_to(np.asarray(value), (chains, draws) + value.shape[2:])
        posterior[name] = value
        if value.ndim == 3 and value.shape[2] == D:
            dims[name] = ["feature"]
        elif value.ndim == 3 and value.shape[2] == C:
            dims[name] = ["class"]

    log_probs = result.spec.log_link(result.latent)
    log_lik = np.asarray(result.log_likelihood())
    pp_labels = _sample_labels(k_pp, log_probs)

    groups = dict(
        posterior=posterior,
        log_likelihood={"y": log_lik},
        posterior_predictive={"y": pp_labels},
        observed_data={"y": np.asarray(data.y)},
        constant_data={"X": np.asarray(data.X)},
    )
    if result.sample_stats:
        groups["sample_stats"] = {k: np.asarray(v) for k, v in result.sample_stats.items()}
    coords = {
        "obs": np.arange(N),
        "latent": np.arange(result.spec.num_latent(C)),
        "class": classes,
        "feature": features,
    }
    idata = az.from_dict(**groups, coords=coords, dims=dims)
    if X_pred is not None:
        X_pred = jnp.asarray(X_pred, dtype=jnp.float64)
        f_pred = result.predict_latent(X_pred, k_pred)
        logp_pred = result.spec.log_link(f_pred)
        pred_dims = {"p": ["pred", "class"], "y": ["pred"], "X": ["pred", "feature"]}
        idata.extend(az.from_dict(
            predictions={"p": np.asarray(jnp.exp(logp_pred)),
                         "y": _sample_labels(k_pred_y, logp_pred)},
            predictions_constant_data={"X": np.asarray(X_pred)},
            coords={**coords, "pred": np.arange(X_pred.shape[0])},
            dims=pred_dims, pred_dims=pred_dims,
        ))
    attrs = {
        "ppgpc_model": result.spec.name,
        "ppgpc_method": result.method,
        "ppgpc_settings": json.dumps(result.settings, sort_keys=True, default=str),
        "ppgpc_info": json.dumps(result.info, sort_keys=True, default=str),
        "ppgpc_seed": int(result.seed),
    }
    for group in idata.groups():
        idata[group].attrs.update(attrs)
    return idata
