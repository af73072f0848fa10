"""The shared inference driver: ``fit`` any model with any method it supports; and
``arviz_dims``, the dim names of a model's sites for ``az.from_numpyro``; ``exact_loo`` and
``psis_loo``, leave-one-out ELPD as ArviZ ``ELPDData`` for ``az.compare``."""

from ppgpc.infer.driver import fit, register_method, supported_methods
from ppgpc.infer import cavi as _cavi, gibbs as _gibbs  # noqa: F401  (register methods)
from ppgpc.infer import svi as _svi  # noqa: F401  (registers method "svi")
from ppgpc.infer.dims import arviz_dims
from ppgpc.infer.elpd import exact_loo, psis_loo
from ppgpc.infer.results import FitResult
from ppgpc.infer.spec import ModelSpec

__all__ = ["fit", "supported_methods", "register_method", "FitResult", "ModelSpec",
           "arviz_dims", "exact_loo", "psis_loo"]
