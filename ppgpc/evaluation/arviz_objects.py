"""The installed ArviZ's own container of groups, and the ArviZ calls whose form differs
between ArviZ 0.2x and ArviZ 1.

ArviZ 0.2x (what Python 3.11 resolves) holds a posterior's groups in
``arviz.InferenceData``; ArviZ 1 (arviz-base, arviz-stats and arviz-plots, Python >= 3.12)
holds them in an ``xarray.DataTree``, one child node per group. ppgpc builds and reads
exports only through the functions here, so one code path serves both, and every export is
the installed ArviZ's own object:

* ``ARVIZ_1``: whether the installed ArviZ is 1.x (read from the package metadata, without
  importing ArviZ, which takes a second);
* ``build(groups)``: an ``InferenceData`` or ``DataTree`` of named ``xarray.Dataset`` groups;
* ``is_container``, ``group_names``, ``group``: what both containers hold (``to_netcdf``
  and ``az.from_netcdf`` read and write either alike);
* ``psislw``: Pareto-smoothed importance log weights (``az.psislw`` in 0.2x,
  ``arviz_stats``'s array interface in 1.x), normalised;
* ``relative_ess``: the mean-method ESS over the draws, relative to their number;
* ``elpd_data``: leave-one-out ELPD as the installed ArviZ's ``ELPDData``, which its
  ``az.compare`` ranks; ``elpd_values`` reads one under either's names.

Reference: ArviZ 1's migration guide (``arviz.MigrationWarning``), arviz-base's
``from_dict``/``convert_to_datatree`` and arviz-stats' ``loo``.
"""

from __future__ import annotations

import importlib.metadata
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    import xarray

__all__ = ["ARVIZ_1", "build", "is_container", "group_names", "group", "psislw",
           "relative_ess", "elpd_data", "ELPD", "elpd_values"]


def _major(version: str) -> int:
    head = version.split(".")[0]
    return int(head) if head.isdigit() else 0


ARVIZ_1 = _major(importlib.metadata.version("arviz")) >= 1
"""True when the installed ArviZ is 1.x (a ``DataTree`` per export), False for 0.2x."""


def _is_tree(obj) -> bool:
    """An ``xarray.DataTree`` (checked by type name: importing xarray is left to first use)."""
    return any(cls.__name__ == "DataTree" and cls.__module__.startswith("xarray")
               for cls in type(obj).__mro__)


def build(groups: dict):
    """The installed ArviZ's container of ``groups`` ({name: ``xarray.Dataset``}), in their
    order: ``xarray.DataTree`` with one child per group (ArviZ 1) or ``InferenceData``."""
    if ARVIZ_1:
        import xarray as xr

        return xr.DataTree.from_dict({name: ds for name, ds in groups.items()})
    import arviz as az

    return az.InferenceData(**groups)


def is_container(obj) -> bool:
    """Whether ``obj`` is a container of groups: ``InferenceData`` or ``DataTree``."""
    if _is_tree(obj):
        return True
    groups = getattr(obj, "groups", None)
    return callable(groups) and hasattr(obj, "_groups")


def group_names(obj) -> list[str]:
    """The names of the groups ``obj`` holds (``posterior``, ``predictions``, ...)."""
    if _is_tree(obj):
        return list(obj.children)
    return list(obj.groups())


def group(obj, name: str) -> "xarray.Dataset":
    """The group ``name`` of ``obj`` as an ``xarray.Dataset``."""
    if name not in group_names(obj):
        raise KeyError(f"no group {name!r}; the groups are {group_names(obj)}")
    if _is_tree(obj):
        return obj[name].to_dataset()
    return getattr(obj, name)


def psislw(log_ratios, reff: float):
    """(log weights (N, S), Pareto k (N,)) of the importance ratios exp(log_ratios) (N, S)
    along the draws, Pareto smoothed (Vehtari et al. 2024, "Pareto smoothed importance
    sampling", JMLR 25) with relative efficiency ``reff`` and normalised to sum to one."""
    log_ratios = np.asarray(log_ratios, dtype=np.float64)
    if ARVIZ_1:
        from arviz_stats.base import array_stats

        # arviz_stats smooths the log-likelihood's negation: pass -log_ratios
        log_weights, pareto_k = array_stats.psislw(-log_ratios, r_eff=reff, axis=-1)
    else:
        import arviz as az

        log_weights, pareto_k = az.psislw(log_ratios, reff)
    log_weights = np.asarray(log_weights, dtype=np.float64)
    top = log_weights.max(axis=-1, keepdims=True)
    log_weights = log_weights - (top + np.log(np.exp(log_weights - top).sum(axis=-1,
                                                                            keepdims=True)))
    return log_weights, np.asarray(pareto_k, dtype=np.float64)


def relative_ess(draws) -> float:
    """ESS / S of ``draws`` (chain, draw, ...) by ArviZ's ``method="mean"``, averaged over
    the entries (as ``az.loo`` sets its relative efficiency)."""
    import arviz as az

    draws = np.asarray(draws, dtype=np.float64)
    chains, num = draws.shape[:2]
    ess = az.ess(az.convert_to_dataset({"x": draws}), method="mean")["x"].values
    return float(np.mean(ess) / (chains * num))


def elpd_data(loo_i, lppd_i, n_samples: int, warning: bool, pareto_k=None, good_k=None):
    """Leave-one-out ELPD as the installed ArviZ's ``ELPDData`` (log scale), as
    ``az.loo(..., pointwise=True)`` builds it: elpd = sum_i loo_i, se = sqrt(N var_i loo_i),
    p_loo = sum_i lppd_i - elpd, the pointwise values [obs] and, for PSIS, Pareto k [obs].

    Args:
        loo_i: (N,) log p(y_i | y_-i).
        lppd_i: (N,) log p(y_i | y), from the same draws.
        n_samples: draws behind the estimate.
        warning: whether to warn (a Pareto k above ``good_k``).
        pareto_k: (N,) or None (a closed form).
        good_k: the k threshold.
    """
    import xarray as xr

    loo_i = np.asarray(loo_i, dtype=np.float64)
    N = loo_i.shape[0]
    elpd = float(loo_i.sum())
    se = float(np.sqrt(N * np.var(loo_i)))
    p_loo = float(np.sum(lppd_i) - elpd)
    coords = {"obs": np.arange(N)}
    pointwise = xr.DataArray(loo_i, dims=["obs"], coords=coords, name="loo_i")
    k = None if pareto_k is None else xr.DataArray(np.asarray(pareto_k, dtype=np.float64),
                                                   dims=["obs"], coords=coords,
                                                   name="pareto_shape")
    if ARVIZ_1:
        from arviz_stats.utils import ELPDDataLOO

        return ELPDDataLOO(elpd=elpd, se=se, p=p_loo, n_samples=int(n_samples),
                           n_data_points=N, scale="log", warning=bool(warning),
                           good_k=float(0.7 if good_k is None else good_k),
                           elpd_i=pointwise,
                           pareto_k=k if k is not None else xr.zeros_like(pointwise))
    from arviz.stats.stats_utils import ELPDData

    values = [elpd, se, p_loo, n_samples, N, bool(warning), pointwise]
    index = ["elpd_loo", "se", "p_loo", "n_samples", "n_data_points", "warning", "loo_i"]
    if k is not None:
        values.append(k)
        index.append("pareto_k")
    values.append("log")
    index.append("scale")
    if good_k is not None:
        values.append(good_k)
        index.append("good_k")
    return ELPDData(data=values, index=index)


class ELPD(NamedTuple):
    """The numbers of an ``ELPDData`` under either ArviZ's names (0.2x: ``elpd_loo``,
    ``p_loo``, ``loo_i``; 1.x: ``elpd``, ``p``, ``elpd_i``)."""

    elpd: float
    se: float
    p: float
    elpd_i: np.ndarray
    pareto_k: np.ndarray | None


def elpd_values(elpd) -> ELPD:
    """``ELPD`` of an ``ELPDData`` of either ArviZ (``az.loo``, ``psis_loo``, ``exact_loo``)."""
    def get(*names):
        for name in names:
            value = getattr(elpd, name, None)
            if value is not None:
                return value
        return None

    pointwise = get("elpd_i", "loo_i")
    k = get("pareto_k")
    return ELPD(float(get("elpd", "elpd_loo")), float(get("se")), float(get("p", "p_loo")),
                None if pointwise is None else np.asarray(pointwise, dtype=np.float64),
                None if k is None else np.asarray(k, dtype=np.float64))
