"""Export a ``FitResult`` to ArviZ, the same way for every model and method.

The export is the installed ArviZ's own container (``ppgpc.evaluation.arviz_objects``):
``InferenceData`` under ArviZ 0.2x, an ``xarray.DataTree`` with one child per group under
ArviZ 1; both hold the groups below with the same dims and coordinates.

Groups (dims in brackets; every posterior-like variable also has [chain, draw]):

* ``posterior``: what the fit really drew. ``f`` [obs, latent], the latent at the training
  inputs; when the fit has inducing inputs, ``u`` [inducing, latent], the latent at them
  (and for a fit held as inducing draws, SVGP or sparse CAVI, the whitened draws ``v``
  [inducing, latent]; with one set of inducing inputs per latent, ``u`` holds each latent's
  values at its own inputs, for an SVGP fit before the mixing matrix); and the
  hyperparameter sites when they were sampled (NUTS on the collapsed model, Gibbs with
  sampled hyperparameters): ``kernel_variance``, ``kernel_lengthscale`` [feature] for ARD
  kernels or [latent] for per-latent kernels, ``mean`` [latent], ``noise_scale``.
* Point hyperparameters (type-II ML or MAP, CAVI and SVI's ELBO optimum, or values given to
  the fit; ``FitResult.point_hypers``) are ONE value, not draws: they go to
  ``constant_data``, without chain and draw dims (``inducing_inputs`` [inducing, feature],
  or [latent, inducing, feature] with one set per latent; the others as above). The
  posterior of such a fit is p(f | y, theta_hat), for which theta_hat is a constant of the
  model, as ArviZ's schema describes ``constant_data``. Each such variable, and the group,
  has ``attrs["point_estimate"]`` naming how it was obtained (``info.hyperparameters``:
  ``"type-II ML"``, ``"type-II MAP"``, ``"CAVI ELBO (type-II MAP)"``, ``"SVI ELBO (type-II
  ML)"``, ... or ``"given"``). Kept out of ``posterior``, they get no spurious ESS, R-hat or
  KDE from ``az.summary``/``az.plot_posterior``; kept without a draw dim, they broadcast
  against the draws, survive ``idata.sel(draw=...)`` and ``az.concat`` as data does.
* ``log_likelihood``: ``y`` [obs], the categorical log p(y_i | f_i) of the observed labels
  (docs/math.md: the Gaussian target sites of ILR-GP and GPD are not comparable across models),
  so that ``az.loo``/``az.waic``/``az.compare`` compare models on the same footing.
  For ILR-GP and GPD this term is the right utility but not the right importance ratio:
  their posterior was conditioned on a Gaussian pseudo-likelihood, so ``az.loo`` on this
  group weights the draws wrongly. Use ``ppgpc.infer.psis_loo`` (ratios from the
  pseudo-likelihood) or, for exact / MAP fits, ``ppgpc.infer.exact_loo`` (closed form).
* ``posterior_predictive``: ``y`` [obs], labels sampled from p(y | f_i), one per draw
  (ArviZ's reliability plots estimate probabilities from sampled labels).
* ``observed_data``: ``y`` [obs]; ``constant_data``: ``X`` [obs, feature] (and the point
  hyperparameters above).
* ``predictions`` (when ``X_pred`` is given): ``p`` [pred, class], p(y* = c | f*_s) per
  draw, and sampled labels ``y`` [pred], for at most ``PREDICTION_DRAWS`` draws (every k-th
  draw of every chain, the ``draw`` coordinate holding the posterior draws they belong to;
  ``prediction_draws=None`` keeps every draw); ``f`` [pred, latent], the latent at the
  prediction points, only with ``prediction_latent=True``. These are the export's heaviest
  variables (draws x points x classes), so by default they are a thinned sample, as PyMC's
  ``idata_kwargs`` keeps its heavy groups opt-in. ``predictions_constant_data``: ``X`` [pred,
  feature], ``p_mean`` [pred, class], which IS ``predict_proba`` at ``X_pred`` (the mean over
  every draw of the fit, computed by ``FitResult.predict_proba``), and when the true labels
  are given, ``y`` [pred]. ``f`` is drawn with the standard normals ``predict_proba`` uses
  (one per draw, shared by the rows: ``ppgpc.infer.predictive.predict_latent(shared=True)``),
  so the mean of the exported ``p`` over its draws differs from ``p_mean`` by Monte Carlo
  error only, about sd(p) / sqrt(draws exported) (zero for an export of every draw, no
  ``thin`` and no ``key``, of a fit that holds at least ``MIN_PREDICTIVE_DRAWS`` draws or is
  not a point-hyperparameter conjugate fit). ``ppgpc.evaluation.exports`` scores ``p_mean``.
* Chains: a sampler's chains as they ran; the S independent draws of any other fit (exact,
  MAP, CAVI, SVI) split into ``INDEPENDENT_CHAINS`` chains of S / 4 in their order when 4
  divides S (``exported_chains``; the defaults' 1000 and 500 draws), so that ArviZ's R-hat
  and ESS apply to them as to any draws.
* ``sample_stats``: per-draw statistics the method recorded (NUTS: ``diverging``,
  ``tree_depth``, ``n_steps``, ``acceptance_rate``, ``energy``, ``lp``, ``step_size``; Gibbs:
  its sweep info) and optimisation traces (``TRACE_STATS``: the ``elbo`` of CAVI/SVI) over
  [chain, iteration].

Labels: every ``y`` (observed, replicated, predicted, true) holds class CODES 0..C-1, and
the ``class`` coordinate holds the same codes, so ``y == c`` and ``p.sel({"class": c})``
mean the same class. The original labels (``class_names``: an estimator's ``classes_``)
are the coordinate ``class_label`` along ``class`` (numbers and strings kept as they are;
codes 0..C-1 when no names are given), on every group that holds labels (``observed_data``,
``posterior_predictive``, ``predictions``, ``predictions_constant_data``). Codes keep the
labels numeric, as ``az.plot_ppc`` and ``az.loo_pit`` need; ``p.swap_dims({"class":
"class_label"})`` indexes the probabilities by the original labels instead.

``attrs`` of every group name the model, method, predictive kind and settings (JSON text,
because netCDF attributes must be strings or numbers).

For plain NumPyro runs of a model's ``latent_model`` (``MCMC(NUTS(...))`` and
``az.from_numpyro``), ``arviz_dims`` gives the same dim names and coordinates.
"""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from ppgpc.evaluation.arviz_objects import build
from ppgpc.infer import predictive
from ppgpc.infer.methods import get_method
from ppgpc.infer.dims import arviz_dims, hyperparameter_dims
from ppgpc.infer.results import EXPORT_TAG, TRACE_STATS, stream_key
from ppgpc.models.spec import Inducing
from ppgpc.runtime.programs import jit

__all__ = ["to_inference_data", "training_latent", "exported_chains", "INDEPENDENT_CHAINS",
           "TRACE_STATS", "hyperparameter_dims", "arviz_dims", "LABEL_GROUPS",
           "PREDICTION_DRAWS"]

_BLOCK = 512  # training inputs per block of an on-demand latent (as FitResult does)

INDEPENDENT_CHAINS = 4
"""Chains the export splits the S independent draws of a fit that is not a sampler into
(exact and MAP's closed-form posterior, CAVI's and SVI's q: one chain of S draws), S / 4
each in their order, so that ArviZ's multi-chain R-hat and ESS run on them without warnings
(and read about 1 and about S, as independent draws give)."""


def exported_chains(result) -> tuple[int, int]:
    """(chains, draws) of the export of ``result``: ``INDEPENDENT_CHAINS`` chains of S / 4
    for a fit of one chain of S independent draws when 4 divides S (and S >= 16), else the
    fit's own (a sampler's chains, or one chain of S)."""
    S = result.num_draws
    if (result.num_chains == 1 and not get_method(result.method).sampler
            and S % INDEPENDENT_CHAINS == 0 and S >= 4 * INDEPENDENT_CHAINS):
        return INDEPENDENT_CHAINS, S // INDEPENDENT_CHAINS
    return result.num_chains, S


def _split_chains(value, chains: int):
    """An array (1, S, ...) as (chains, S / chains, ...); anything else as it is."""
    value = np.asarray(value)
    if chains == 1 or value.ndim < 2 or value.shape[0] != 1:
        return value
    return value.reshape((chains, value.shape[1] // chains) + value.shape[2:])


PREDICTION_DRAWS = 200
"""Most draws of ``p`` (and sampled ``y``) the ``predictions`` group holds by default: 200 x
150 points x 6 classes is 1.4 MB, where every draw of a 4 x 800-draw Gibbs fit was 47 MB
(``benchmarks/export_cost.py``); the exact mean is ``p_mean`` beside it."""


def _prediction_step(chains: int, draws: int, cap: int | None) -> int:
    """Every how many draws of each chain the ``predictions`` group keeps, so that it holds
    at most ``cap`` draws in all (1: every draw; ``cap=None``: every draw)."""
    if cap is None:
        return 1
    if isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or cap < 1:
        raise ValueError(f"prediction_draws must be a positive integer or None; got {cap!r}")
    per_chain = max(1, cap // chains)
    return -(-draws // per_chain)


MAX_EXPORT_BYTES = 2 ** 30
"""Largest training-latent array (chain x draw x N x L float64) exported without ``thin``."""

@functools.partial(jit, static_argnames=("log_link",))
def _categorical_parts(key, log_link, latent, y):
    """log p(y_i | f_i) (chain, draw, N) and labels drawn from p(y | f_i) (chain, draw, N)."""
    logp = log_link(latent)
    loglik = jnp.take_along_axis(logp, y[None, None, :, None], axis=-1)[..., 0]
    return loglik, jax.random.categorical(key, logp, axis=-1)


@functools.partial(jit, static_argnames=("log_link",))
def _predictive_parts(key, log_link, f_pred):
    """p(y* = c | f*_s) (chain, draw, n, C) and labels drawn from it (chain, draw, n)."""
    logp = log_link(f_pred)
    return jnp.exp(logp), jax.random.categorical(key, logp, axis=-1)


def training_latent(result) -> jax.Array:
    """(chain, draw, N, L) latent draws at the training inputs: the stored ones, or for a
    fit that stores inducing draws, ``result.training_latent`` block by block with the same
    keys as ``result.log_likelihood`` (so the two agree)."""
    if result.latent is not None:
        return jnp.asarray(result.latent)
    N = result.data.X.shape[0]
    return jnp.concatenate([result.training_latent(None, start, start + _BLOCK, block=i)
                            for i, start in enumerate(range(0, N, _BLOCK))], axis=2)


def _split_hypers(result, chains: int, draws: int):
    """(sampled, point): hyperparameter sites drawn with every posterior draw, (chain, draw,
    ...), and point ones (``point_hypers``, or a site stored as one (1, 1, ...) value
    beside more draws), each as its one value (...)."""
    sampled, point = {}, {}
    for name, value in result.hypers.items():
        value = np.asarray(value)
        one = value.shape[:2] == (1, 1) and (chains, draws) != (1, 1)
        if result.point_hypers or one:
            point[name] = value[0, 0]
        elif value.shape[:2] == (chains, draws):
            sampled[name] = value
        else:
            raise ValueError(f"hyperparameter {name!r} has draws of shape {value.shape[:2]}, "
                             f"neither one value nor one per posterior draw {(chains, draws)}")
    return sampled, point


def _posterior_group(result, chains: int, draws: int, key):
    """(posterior variables, point hyperparameters, dims of both): ``u`` at the inducing
    inputs when there are some."""
    data = result.data
    D = data.X.shape[1]
    L = result.spec.num_latent(result.num_classes)
    ard = bool(getattr(result.kernel, "ard", False))
    posterior = {"f": np.asarray(training_latent(result))}
    dims = {"f": ["obs", "latent"]}
    if result.inducing is not None:  # whitened inducing draws
        posterior["v"], dims["v"] = np.asarray(result.inducing), ["inducing", "latent"]
    sampled, point = _split_hypers(result, chains, draws)
    posterior.update(sampled)
    for name, value in {**sampled, **point}.items():
        shape = value.shape[2:] if name in sampled else value.shape
        var_dims = hyperparameter_dims(name, shape, num_features=D, num_latent=L, ard=ard)
        if var_dims is not None:
            dims[name] = var_dims
    Z = result.hypers.get("inducing_inputs")
    inducing = result.spec.inducing or Inducing()
    own = None
    if Z is not None and result.inducing is not None and inducing.inducing_values is not None:
        # the model's own u where predict_latent's is not it (SVGP with one set per latent:
        # u_c = f_c(Z_c) = L_mm,c v_c before mixing; collapsed fits: u = L_m v at each
        # latent's own Z, without GPD's pseudo-observation noise); None elsewhere
        own = inducing.inducing_values(result.data, result.kernel, result.hyper_draw(0, 0),
                                       jnp.asarray(result.inducing))
    if own is None and Z is not None and np.ndim(Z) == 4 and result.point_hypers \
            and "u" not in posterior:
        # joint draws for per-draw predictives, marginal ones for point conjugate fits
        # (sampled pointwise); Z lies in the space of the training X: no input_scaling
        own = predictive.predict_latent(result, np.asarray(Z)[0, 0], key)
    if own is not None:
        posterior["u"], dims["u"] = np.asarray(own), ["inducing", "latent"]
    return posterior, point, dims


def _dataset(variables: dict, dims: dict, coords: dict, *, sampled: bool = True) -> xr.Dataset:
    """A group as an ``xarray.Dataset``: each array with dims ``[chain, draw]`` (when
    ``sampled``) then ``dims[name]`` (or ``<name>_dim_<i>``), and a coordinate for every dim
    (``coords`` where given, else 0..n-1), as ArviZ's ``from_dict`` lays groups out."""
    lead = ["chain", "draw"] if sampled else []
    data_vars = {}
    for name, value in variables.items():
        value = np.asarray(value)
        rest = value.ndim - len(lead)
        var_dims = list(dims.get(name) or [f"{name}_dim_{i}" for i in range(rest)])
        if len(var_dims) != rest:
            raise ValueError(f"{name!r} has shape {value.shape}, not {lead + var_dims}")
        data_vars[name] = (lead + var_dims, value)
    dataset = xr.Dataset(data_vars)
    return dataset.assign_coords({d: coords[d] if d in coords else np.arange(n)
                                  for d, n in dataset.sizes.items()})


def _point_variables(point: dict, dims: dict, coords: dict, kind: str) -> dict:
    """The point hyperparameters as DataArrays without chain and draw (a scalar stays a
    scalar), each marked ``attrs["point_estimate"] = kind``."""
    out = {}
    for name, value in point.items():
        var_dims = dims.get(name) or [f"{name}_dim_{i}" for i in range(value.ndim)]
        out[name] = xr.DataArray(value, dims=var_dims,
                                 coords={d: coords[d] for d in var_dims if d in coords},
                                 attrs={"point_estimate": kind})
    return out


LABEL_GROUPS = ("observed_data", "posterior_predictive", "predictions",
                "predictions_constant_data")
"""Groups that hold class labels (as codes 0..C-1); each gets the ``class`` (codes) and
``class_label`` (original labels) coordinates."""


def _class_labels(class_names, C: int) -> np.ndarray:
    """(C,) the original labels: ``class_names`` kept as numbers or strings (anything else
    as its ``str``), or the codes 0..C-1."""
    if class_names is None:
        return np.arange(C)
    labels = np.asarray(class_names)
    if labels.ndim != 1 or labels.shape[0] != C:
        raise ValueError(f"class_names must have {C} entries; got {labels.shape}")
    if labels.dtype.kind not in "biufU":
        labels = np.array([str(c) for c in labels.tolist()])
    return labels


def _sample_stats_group(result, to_dataset):
    """The ``sample_stats`` Dataset, or None: per-draw statistics (chain, draw) through
    ``to_dataset``, merged with the traces (``TRACE_STATS`` and any other shape) over
    [chain, iteration]."""
    per_draw, traces = {}, {}
    for name, value in result.sample_stats.items():
        value = np.asarray(value)
        if name in TRACE_STATS or value.shape[:2] != (result.num_chains, result.num_draws):
            value = value.reshape((value.shape[0], -1)) if value.ndim >= 2 else value[None]
            traces[name] = xr.DataArray(value, dims=["chain", "iteration"],
                                        coords={"chain": np.arange(value.shape[0]),
                                                "iteration": np.arange(value.shape[1])})
        else:
            per_draw[name] = value
    parts = ([to_dataset(per_draw)] if per_draw else []) + ([xr.Dataset(traces)] if traces else [])
    if len(parts) == 2:
        return xr.merge(parts, combine_attrs="override")
    return parts[0] if parts else None


def _check_export_size(result, max_bytes) -> None:
    """A clear error, naming the ``thin`` that fits, when the exported f would be too large."""
    if max_bytes is None:
        return
    N = result.data.X.shape[0]
    L = result.spec.num_latent(result.num_classes)
    per_draw = 8 * N * L * result.num_chains
    size = per_draw * result.num_draws
    if size > max_bytes:
        what = (f"exporting {result.num_chains} chain(s) x {result.num_draws} draws of the "
                f"latent at {N} training inputs x {L} latents takes {_bytes(size)}, over "
                f"max_bytes={_bytes(max_bytes)}")
        if per_draw > max_bytes:
            raise ValueError(f"{what}; one draw per chain alone takes {_bytes(per_draw)}, so no "
                             "thin fits: raise max_bytes or pass max_bytes=None")
        step = -(-result.num_draws // (max_bytes // per_draw))
        raise ValueError(f"{what}; pass thin={step} (keeps {-(-result.num_draws // step)} "
                         "draws per chain) or max_bytes=None")


def _bytes(n: float) -> str:
    """A byte count for messages: B, KiB, MiB or GiB."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def _coords(result, feature_names) -> dict:
    """The coordinates of ``obs``, ``latent``, ``class``, ``feature`` (``feature_names`` or
    0..D-1) and, with inducing inputs, ``inducing``."""
    N, D = result.data.X.shape
    features = list(range(D)) if feature_names is None else [str(f) for f in feature_names]
    if len(features) != D:
        raise ValueError(f"feature_names must have {D} entries; got {len(features)}")
    coords = {"obs": np.arange(N), "latent": np.arange(result.spec.num_latent(result.num_classes)),
              "class": np.arange(result.num_classes), "feature": features}
    if "inducing_inputs" in result.hypers:
        coords["inducing"] = np.arange(np.shape(result.hypers["inducing_inputs"])[-2])
    return coords


def _training_groups(result, coords: dict, key_pp, key_u) -> dict:
    """The groups of the training data: ``posterior``, ``posterior_predictive``,
    ``log_likelihood``, ``sample_stats`` (when recorded), ``observed_data`` and
    ``constant_data`` (``X`` and the point hyperparameters)."""
    data, shown = result.data, exported_chains(result)[0]
    posterior, point, dims = _posterior_group(result, result.num_chains, result.num_draws, key_u)
    dims.update({"y": ["obs"], "X": ["obs", "feature"]})
    log_lik, pp_labels = _categorical_parts(key_pp, result.spec.log_link,
                                            jnp.asarray(posterior["f"]), jnp.asarray(data.y))

    def sampled(variables):
        return _dataset({k: _split_chains(v, shown) for k, v in variables.items()}, dims, coords)

    groups = {"posterior": sampled(posterior), "posterior_predictive": sampled({"y": pp_labels}),
              "log_likelihood": sampled({"y": log_lik})}
    stats = _sample_stats_group(result, sampled)
    if stats is not None:
        groups["sample_stats"] = stats
    groups["observed_data"] = _dataset({"y": data.y}, dims, coords, sampled=False)
    constant = _dataset({"X": data.X}, dims, coords, sampled=False)
    if point:
        kind = str(result.info.hyperparameters or "point estimate")
        constant = constant.assign(_point_variables(point, dims, coords, kind))
        constant.attrs["point_estimate"] = kind
    groups["constant_data"] = constant
    return groups


def _prediction_groups(full, result, X_pred, y_pred, coords: dict, key_f, key_y, cap,
                       latent: bool) -> dict:
    """``predictions``: ``p`` [pred, class], sampled ``y`` [pred] (and ``f`` [pred, latent]
    when ``latent``) at every step-th draw of each chain, at most ``cap`` draws; and
    ``predictions_constant_data``: ``X``, ``p_mean`` = ``full.predict_proba(X_pred)``, and
    ``y`` = ``y_pred`` when given. ``key_f=None`` draws f with predict_proba's normals."""
    D, C = result.data.X.shape[1], result.num_classes
    X_pred = jnp.asarray(X_pred, dtype=jnp.float64)
    if X_pred.ndim != 2 or X_pred.shape[1] != D:
        raise ValueError(f"X_pred must have shape (n, {D}); got {X_pred.shape}")
    n = X_pred.shape[0]
    constant = {"X": np.asarray(X_pred)}
    if y_pred is not None:
        y_pred = np.asarray(y_pred)
        if y_pred.shape != (n,) or not np.all((y_pred >= 0) & (y_pred < C)):
            raise ValueError(f"y_pred must be ({n},) class indices in "
                             f"0..{C - 1}; got shape {y_pred.shape}")
        constant["y"] = y_pred.astype(np.int64)
    shown = exported_chains(result)[0]
    per_chain = result.num_chains * result.num_draws // shown
    step = _prediction_step(shown, per_chain, cap)
    # the draws predict_proba averages (the same normals): the mean of p over them is p_mean
    f_pred = _split_chains(predictive.predict_latent(
        result, result.scaled_inputs(X_pred), key_f, shared=True), shown)[:, ::step]
    probs, labels = _predictive_parts(key_y, result.spec.log_link, f_pred)
    constant["p_mean"] = np.asarray(full.predict_proba(X_pred))
    variables = {"p": np.asarray(probs), "y": np.asarray(labels)}
    if latent:
        variables["f"] = np.asarray(f_pred)
    dims = {"f": ["pred", "latent"], "p": ["pred", "class"], "y": ["pred"],
            "X": ["pred", "feature"], "p_mean": ["pred", "class"]}
    coords = {**coords, "pred": np.arange(n)}
    constant = _dataset(constant, dims, coords, sampled=False)
    constant["p_mean"].attrs["description"] = (
        "predict_proba at X_pred: the posterior predictive mean over every draw of the fit")
    # the draw coordinate names the posterior draws the kept ones are
    return {"predictions": _dataset(variables, dims, coords).assign_coords(
                draw=np.arange(0, per_chain, step)),
            "predictions_constant_data": constant}


def _attrs(result) -> dict:
    """``attrs`` of every group: model, method, predictive kind, settings and info (JSON
    text), seed, and the convergence verdict and summary when the fit has a report."""
    attrs = {
        "ppgpc_model": result.spec.name,
        "ppgpc_method": result.method,
        "ppgpc_predictive_kind": result.predictive_kind,
        "ppgpc_point_hypers": int(bool(result.point_hypers)),
        "ppgpc_settings": json.dumps(result.settings, sort_keys=True, default=str),
        "ppgpc_info": json.dumps(result.info.to_dict(), sort_keys=True, default=str),
        "ppgpc_seed": int(result.seed),
    }
    report = result.info.convergence
    if report is not None:
        attrs["ppgpc_converged"] = int(bool(report.converged))
        attrs["ppgpc_convergence"] = report.summary()
    return attrs


def to_inference_data(result, X_pred=None, *, key=None, class_names=None, feature_names=None,
                      y_pred=None, thin=1, max_bytes=MAX_EXPORT_BYTES,
                      prediction_draws=PREDICTION_DRAWS, prediction_latent=False):
    """Build the installed ArviZ's container of a fitted result: ``az.InferenceData``
    (ArviZ 0.2x) or an ``xarray.DataTree`` with one child per group (ArviZ 1;
    ``ppgpc.evaluation.arviz_objects``), with the groups, dims and coordinates of the module
    docstring: ``posterior``, ``constant_data``, ``log_likelihood``,
    ``posterior_predictive``, ``observed_data``, ``sample_stats``, and with ``X_pred``,
    ``predictions`` and ``predictions_constant_data``.

    Args:
        result: a ``FitResult``.
        X_pred: optional (n, D) inputs (in the model's input space) for a ``predictions``
            group.
        key: PRNG key for sampled labels and predictive draws (default from the result's
            seed, and for the predictions the draws of ``predict_proba``).
        class_names: the original labels of classes 0..C-1, for the ``class_label``
            coordinate (default 0..C-1); ``class`` and every ``y`` hold the codes 0..C-1.
        feature_names: labels for the ``feature`` coordinate.
        y_pred: optional (n,) true labels (0..C-1) at ``X_pred``, kept in
            ``predictions_constant_data`` for ``ppgpc.evaluation.exports``.
        thin: keep every ``thin``-th draw (``FitResult.thin``).
        max_bytes: refuse (naming the ``thin`` that fits) to build a training latent
            larger than this many bytes; ``None`` lifts the limit.
        prediction_draws: most draws of ``p`` and ``y`` in ``predictions`` (every k-th
            draw of each chain); ``None`` keeps every draw.
        prediction_latent: also export ``f`` [pred, latent], the latent at ``X_pred``.

    Returns:
        ``az.InferenceData`` (ArviZ 0.2x) or ``xarray.DataTree`` (ArviZ 1).

    Example:
        >>> import numpy as np
        >>> from ppgpc.infer import fit, to_inference_data
        >>> X = np.random.default_rng(0).normal(size=(30, 2)); y = (X[:, 0] > 0).astype(int)
        >>> idata = to_inference_data(fit("ilr_gp", X, y, num_draws=100), X[:4])
        >>> idata.predictions["p"].shape, idata.predictions_constant_data["p_mean"].shape
        ((4, 25, 4, 2), (4, 2))
    """
    full, result = result, result.thin(thin)
    _check_export_size(result, max_bytes)
    k_pp, k_pred, k_pred_y, k_u = jax.random.split(
        stream_key(result.seed, EXPORT_TAG) if key is None else key, 4)
    C = result.num_classes
    labels = {"class": np.arange(C), "class_label": ("class", _class_labels(class_names, C))}
    coords = _coords(result, feature_names)
    groups = _training_groups(result, coords, k_pp, k_u)
    if X_pred is not None:
        groups.update(_prediction_groups(full, result, X_pred, y_pred, coords,
                                         None if key is None else k_pred, k_pred_y,
                                         prediction_draws, prediction_latent))
    attrs = _attrs(result)
    return build({name: (ds.assign_coords(labels) if name in LABEL_GROUPS else ds)
                  .assign_attrs(attrs) for name, ds in groups.items()})
