"""Inference: ``fit`` any model with any method it supports, and what a fit returns.

The driver (``driver.fit``) runs a model's ``ModelSpec`` (``ppgpc.models.spec``) with one
of the registered methods; a method runs on every model that fills the capability groups
it needs (``methods.supported_methods``; new methods through ``register_method``):

* ``exact`` and ``map`` (``exact``): point hyperparameters by type-II ML or MAP
  (``sites``, ``optimize``), then the conjugate posterior;
* ``nuts`` (``nuts``, ``mcmc``): NUTS on a model's collapsed or latent form, run in compiled
  windows until its chains pass the convergence check;
* ``gibbs`` (``gibbs``, ``mcmc``): a model's own Gibbs kernel, in the same windows;
* ``cavi`` (``cavi``): a model's coordinate-ascent VI;
* ``svi`` (``svi``, ``natgrad``): NumPyro SVI with optax, natural-gradient steps on
  Gaussian variational factors.

Every runner hands the driver a ``RunOutput`` (``records``), and every fit returns a
``FitResult`` (``results``), one frozen form whose predictions are pure functions of its
draws (``predictive``) and whose ``info`` is a typed ``FitInfo`` (``records``).
``convergence`` says whether to trust a fit (R-hat and ESS from
``ppgpc.evaluation.chain_diagnostics``, divergences, optimiser convergence, Cholesky
jitter; the check also decides when samplers and SVI stop), ``ConvergenceWarning`` when it
finds a problem; ``arviz_export`` (``to_inference_data``, with the dims of ``dims``) and
``elpd`` (``exact_loo``, ``psis_loo``) give ArviZ objects, imported on first use; ``loo``
scores a conjugate fit's closed-form leave-one-out for choosing a smoothing level.
"""

from ppgpc import _config  # noqa: F401  (float64 and the compilation cache first)
from ppgpc.infer.methods import register_method, supported_methods
from ppgpc.infer.convergence import ConvergenceReport, ConvergenceWarning
from ppgpc.infer.dims import arviz_dims
from ppgpc.infer.driver import fit
from ppgpc.infer.records import FitInfo, RunOutput
from ppgpc.infer.results import FitResult
from ppgpc.models.spec import ModelSpec

__all__ = ["fit", "supported_methods", "register_method", "FitResult", "FitInfo", "RunOutput",
           "ModelSpec", "ConvergenceReport", "ConvergenceWarning",
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
