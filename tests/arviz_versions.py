"""The ArviZ calls the tests make whose form differs between ArviZ 0.2x (Python 3.11) and
ArviZ 1 (Python >= 3.12), so that one test serves both: the library's own reading of either
container is ``ppgpc.evaluation.arviz_objects``; these are what a test asks ArviZ itself."""

from __future__ import annotations

import arviz as az
import xarray as xr

from ppgpc.evaluation.arviz_objects import ARVIZ_1, elpd_values, group_names

__all__ = ["ARVIZ_1", "group_names", "loo", "compare_elpd", "convert", "concat_chains",
           "elpd_values"]


def loo(data):
    """``az.loo(data, pointwise=True)`` read under one set of names (``elpd_values``)."""
    return elpd_values(az.loo(data, pointwise=True))


def compare_elpd(table):
    """The ELPD column of ``az.compare``'s table (``elpd`` in 1.x, ``elpd_loo`` in 0.2x)."""
    return table["elpd" if "elpd" in table.columns else "elpd_loo"]


def convert(variables: dict):
    """{name: (chain, draw, ...) array} as the installed ArviZ's container of a posterior."""
    if ARVIZ_1:
        return az.convert_to_datatree(variables)
    return az.convert_to_inference_data(variables)


def concat_chains(a, b):
    """Two exports of the same model as one with the chains of both (``az.concat(...,
    dim="chain")`` in 0.2x; group by group with xarray in 1.x, data groups kept once)."""
    if not ARVIZ_1:
        return az.concat(a, b, dim="chain")
    groups = {}
    for name in group_names(a):
        first, second = a[name].to_dataset(), b[name].to_dataset()
        if "chain" in first.dims:
            second = second.assign_coords(chain=second["chain"] + first.sizes["chain"])
            groups[name] = xr.concat([first, second], dim="chain")
        else:
            groups[name] = first
    return xr.DataTree.from_dict(groups)
