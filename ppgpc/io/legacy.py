"""Estimator settings of older save formats, translated to today's constructor options.

Save format version 1 (the estimators before they took only their model's options) stored the
options that then existed. Loading such a save translates them (the saved posterior is unchanged):

* ``epsilon_grid`` / ``alpha_eps_grid``, ``validation``, ``cv_folds`` and
  ``validation_fraction`` of ILR-GP and GPD become one ``selection`` (None where all were
  at their defaults);
* ``inference_options["progress_bar"]`` and SVGP's ``progress_bar`` become ``progress``;
* ``ILRGPClassifier(inference="uncollapsed")`` becomes ``SoftmaxSVGPClassifier(link="ilr")``
  with the SVI settings it ran with (5000 steps at 0.01 unless given);
* ``LogisticSoftmaxGPClassifier(inference="svi")`` becomes ``inference="cavi"`` with a
  ``batch_size`` (its default, min(N, 128)) and ``max_iter`` (1000) in
  ``inference_options``; ``inference_options["num_inducing"]`` becomes ``num_inducing``;
* SVGP's ``batch_size``, ``max_iter``, ``learning_rate``, ``validation_fraction`` and
  ``natural_gradient`` move into ``inference_options``; its ``variance_prior_on``,
  ``initial_lengthscale``, ``initial_variance`` and ``ell_estimator`` are dropped at their
  defaults (``ell_estimator`` also where it equals today's automatic choice); any other
  value has no estimator option any more, and loading fails naming the version and the
  setting (``ppgpc.fit`` with ``model_options`` still fits such a model).

Names only: this module returns class names and plain dicts, so it imports no estimator.
"""

from __future__ import annotations

__all__ = ["upgrade", "LegacySettingError"]

_SELECTION_DEFAULTS = {"validation": "loo", "cv_folds": 5, "validation_fraction": 0.1}
_SVI_DEFAULT_STEPS = {"max_iter": 5000, "learning_rate": 0.01}
"""The SVI settings of version 1's ``ILRGPClassifier(inference="uncollapsed")`` when its
``inference_options`` gave none (the driver's defaults, ``ppgpc.infer.svi.SVIOptions``)."""
_LSM_SVI = {"batch_size": 128, "max_iter": 1000}
"""Version 1's ``LogisticSoftmaxGPClassifier(inference="svi")`` defaults: minibatches of
min(N, 128) points, 1000 iterations."""


class LegacySettingError(ValueError):
    """A setting of an old save that today's estimators cannot express."""


def _no_equivalent(version: int, cls: str, name: str, value, where: str) -> LegacySettingError:
    return LegacySettingError(
        f"this save was written in ppgpc's save format version {version}, whose "
        f"{cls} setting {name}={value!r} has no equivalent in today's estimators ({where}); "
        "refit the model, or fit it with ppgpc.fit(..., model_options=...)")


def _selection(params: dict, grid_name: str) -> dict | None:
    """Version 1's grid and validation options as a saved ``Selection`` (None: defaults)."""
    fields = {"grid": params.pop(grid_name)}
    for name, default in _SELECTION_DEFAULTS.items():
        fields[name] = params.pop(name)
    if fields["grid"] is None and all(fields[k] == v for k, v in _SELECTION_DEFAULTS.items()):
        return None
    if fields["grid"] is not None:
        fields["grid"] = tuple(float(v) for v in fields["grid"])
    return fields


def _progress(params: dict, options: dict) -> None:
    """``progress`` from a saved ``progress_bar`` (an option or an inference option)."""
    flag = params.pop("progress_bar", options.pop("progress_bar", None))
    params["progress"] = True if flag is None else bool(flag)


def _ilr(params: dict, options: dict, num_samples: int):
    params["selection"] = _selection(params, "epsilon_grid")
    if params["inference"] != "uncollapsed":
        return "ILRGPClassifier", params, ()
    svgp = {name: params[name] for name in ("kernel", "standardize", "seed",
                                            "max_exact_points", "progress",
                                            "shared_inducing")}
    svgp.update(num_inducing=min(int(params["num_inducing"]), num_samples), link="ilr",
                likelihood_samples=10, shared_kernel=True, kernel_prior=False,
                inference="svi", inference_options={**_SVI_DEFAULT_STEPS, **options})
    dropped = ("epsilon_", "epsilon_scores_", "tau_", "tau_scores_", "noise_std_",
               "noise_scale_")
    return "SoftmaxSVGPClassifier", svgp, dropped


def _gpd(params: dict, options: dict, num_samples: int):
    params["selection"] = _selection(params, "alpha_eps_grid")
    return "DirichletGPClassifier", params, ()


def _lsm(params: dict, options: dict, num_samples: int):
    params["num_inducing"] = options.pop("num_inducing", None)
    if params["inference"] == "svi":
        params["inference"] = "cavi"
        options.setdefault("batch_size", min(num_samples, _LSM_SVI["batch_size"]))
        options.setdefault("max_iter", _LSM_SVI["max_iter"])
    return "LogisticSoftmaxGPClassifier", params, ()


_SVGP_MOVED = ("batch_size", "max_iter", "learning_rate", "validation_fraction",
               "natural_gradient")
_SVGP_REMOVED = {"variance_prior_on": "kernel", "initial_lengthscale": None,
                 "initial_variance": 1.0}


def _svgp(params: dict, options: dict, num_samples: int, version: int):
    cls = "SoftmaxSVGPClassifier"
    natural = params["natural_gradient"]
    ell = params.pop("ell_estimator")
    if ell is not None and ell != ("marginal" if natural is None else "price"):
        raise _no_equivalent(version, cls, "ell_estimator", ell,
                             "the estimator picks 'price' under natural gradients, "
                             "'marginal' otherwise")
    for name, default in _SVGP_REMOVED.items():
        value = params.pop(name)
        if value != default:
            raise _no_equivalent(version, cls, name, value,
                                 "it is an option of the model softmax_svgp's prepare")
    for name in _SVGP_MOVED:
        value = params.pop(name)
        if value is None:
            continue
        if params["inference"] != "svi":
            raise _no_equivalent(version, cls, name, value,
                                 "it set the SVI fit that starts inference='nuts'")
        options.setdefault(name, value)
    return cls, params, ()


def upgrade(class_name: str, params: dict, version: int, num_samples: int):
    """Today's (class name, constructor parameters, fitted attributes to drop) of an
    estimator saved in format ``version``.

    Args:
        class_name: the saved class; params: its saved constructor parameters (decoded).
        version: the save's format version (1; today's passes through).
        num_samples: N, the training points of the saved posterior (for defaults that
            depended on it).

    Raises:
        LegacySettingError: a setting with no equivalent today, named with the version.
        KeyError: a parameter that version ``version`` always wrote is missing.
    """
    params = dict(params)
    options = dict(params.get("inference_options") or {})
    _progress(params, options)
    if class_name == "ILRGPClassifier":
        name, params, dropped = _ilr(params, options, num_samples)
    elif class_name == "DirichletGPClassifier":
        name, params, dropped = _gpd(params, options, num_samples)
    elif class_name == "LogisticSoftmaxGPClassifier":
        name, params, dropped = _lsm(params, options, num_samples)
    else:
        name, params, dropped = _svgp(params, options, num_samples, version)
    if name == class_name:  # None stays None where nothing is left in it
        given = params.get("inference_options")
        params["inference_options"] = options if options or given is not None else None
    return name, params, dropped
