"""The shared inference layer: ``fit`` any model with any method it supports
(``supported_methods``; new methods through ``register_method``); ``FitResult``, what every
fit returns; ``to_inference_data``, its ArviZ export; ``arviz_dims``, the dim names of a
model's sites for ``az.from_numpyro``; ``exact_loo`` and ``psis_loo``, leave-one-out ELPD as
ArviZ ``ELPDData`` for ``az.compare``. ``ModelSpec`` (``ppgpc.spec``) is the contract a
model module fills. ``ConvergenceReport``, kept in every result's ``info["convergence"]``,
says whether to trust a fit; ``ConvergenceWarning`` is raised when it finds a problem."""

from ppgpc.infer.arviz_export import to_inference_data
from ppgpc.infer.convergence import ConvergenceReport, ConvergenceWarning
from ppgpc.infer.common import register_method, supported_methods
from ppgpc.infer.dims import arviz_dims
from ppgpc.infer.driver import fit
from ppgpc.infer.elpd import exact_loo, psis_loo
from ppgpc.infer.results import FitResult
from ppgpc.spec import ModelSpec

__all__ = ["fit", "supported_methods", "register_method", "FitResult", "ModelSpec",
           "ConvergenceReport", "ConvergenceWarning",
           "to_inference_data", "arviz_dims", "exact_loo", "psis_loo"]
