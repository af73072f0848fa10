"""The shared inference layer: ``fit`` any model with any method it supports
(``supported_methods``; new methods through ``register_method``); ``FitResult``, what every
fit returns; ``to_inference_data``, its ArviZ export; ``arviz_dims``, the dim names of a
model's sites for ``az.from_numpyro``; ``exact_loo`` and ``psis_loo``, leave-one-out ELPD as
ArviZ ``ELPDData`` for ``az.compare``. ``ModelSpec`` (``ppgpc.models.spec``) is the contract a
model module fills. ``ConvergenceReport``, kept in every result's ``info["convergence"]``,
says whether to trust a fit; ``ConvergenceWarning`` is raised when it finds a problem."""

from ppgpc import _config  # noqa: F401  (float64 before any array)
from ppgpc.infer.convergence import ConvergenceReport, ConvergenceWarning
from ppgpc.infer.common import register_method, supported_methods
from ppgpc.infer.dims import arviz_dims
from ppgpc.infer.driver import fit
from ppgpc.infer.results import FitResult
from ppgpc.models.spec import ModelSpec

__all__ = ["fit", "supported_methods", "register_method", "FitResult", "ModelSpec",
           "ConvergenceReport", "ConvergenceWarning",
           "to_inference_data", "arviz_dims", "exact_loo", "psis_loo"]


def __getattr__(name: str):
    """The ArviZ export and the ELPD functions, imported on first use (they import ArviZ)."""
    if name == "to_inference_data":
        from ppgpc.infer.arviz_export import to_inference_data
        return to_inference_data
    if name in ("exact_loo", "psis_loo"):
        from ppgpc.infer import elpd
        return getattr(elpd, name)
    raise AttributeError(f"module 'ppgpc.infer' has no attribute {name!r}")
