"""The SVGP classifiers' ``ModelSpec`` (``svgp_spec``): the softmax SVGP (SVGPC, ``SPEC``)
and, built by ``ppgpc.models.ilr_gp``, the Uncollapsed-ILR (``ppgpc.models.svgp``)."""

from __future__ import annotations

from ppgpc.models.spec import SVI, Inducing, Latent, ModelSpec
from ppgpc.models.svgp.data import pad, prepare, LINKS, SVGPData
from ppgpc.models.svgp.full import (initial_hypers, latent_conditional, latent_model,
                                    num_latent_softmax, prior_factor)
from ppgpc.models.svgp.likelihood import on_devices, LOG_LINKS
from ppgpc.models.svgp.scoring import validation_log_predictive
from ppgpc.models.svgp.variational import (guide, includes_hyper_prior, inducing_latent, model,
                                           own_inducing_values, svi_defaults, svi_result)


__all__ = ["svgp_spec", "SPEC"]

def _prepare_for_link(link: str, X, y, num_classes: int, **options) -> SVGPData:
    """``prepare`` with its link fixed to ``link``: a ``link`` option that differs is refused
    with the model that has it."""
    given = options.pop("link", link)
    if given != link:
        raise ValueError(f"this model's link is {link!r}, got link={given!r}; use the "
                         f"{'ilr_gp_uncollapsed' if given == 'ilr' else 'softmax_svgp'} "
                         "model for that link" if given in LINKS else
                         f"unknown link {given!r}; choose from {list(LINKS)}")
    return prepare(X, y, num_classes, link=link, **options)


def _prepare_softmax(X, y, num_classes: int, **options) -> SVGPData:
    """``prepare`` with ``link="softmax"`` (a module-level function, so that a fit holding
    the spec pickles)."""
    return _prepare_for_link("softmax", X, y, num_classes, **options)


def _prepare_ilr(X, y, num_classes: int, **options) -> SVGPData:
    """``prepare`` with ``link="ilr"`` (a module-level function, so that a fit holding the
    spec pickles)."""
    return _prepare_for_link("ilr", X, y, num_classes, **options)


_PREPARE = {"softmax": _prepare_softmax, "ilr": _prepare_ilr}


def svgp_spec(name: str, link: str, num_latent, description: str) -> ModelSpec:
    """The spec of the sparse variational classifier with ``link`` (one of ``LINKS``).

    Args:
        name: the model name the driver knows it by.
        link: ``"softmax"`` or ``"ilr"``; fixes ``prepare``'s link and the ``log_link``.
        num_latent: ``C -> L`` for that link (C for softmax, C - 1 for ILR).
        description: one line for the model registry.
    """
    return ModelSpec(
        name=name, description=description, prepare=_PREPARE[link], pad=pad,
        num_latent=num_latent,
        log_link=LOG_LINKS[link], initial_hypers=initial_hypers,
        latent=Latent(latent_model=latent_model, latent_conditional=latent_conditional,
                      prior_factor=prior_factor),
        svi=SVI(model=model, guide=guide, result=svi_result,
                validation_log_predictive=validation_log_predictive,
                gaussian_variational_sites=(("q_mean", "q_scale_tril"),),
                includes_hyper_prior=includes_hyper_prior, default_options=svi_defaults),
        inducing=Inducing(inducing_latent=inducing_latent, inducing_values=own_inducing_values),
        sparse_alternative='fit by SVI: inference="svi" (driver method "svi")',
        seeded_prepare=True, place=on_devices)


SPEC = svgp_spec("softmax_svgp", "softmax", num_latent_softmax,
                 "SVGPC: Hensman et al.'s sparse variational GP classifier, softmax link")
"""The softmax SVGP's ``ModelSpec`` (driver name ``"softmax_svgp"``): SVI on whitened
inducing values, and NUTS on the full, non-sparse softmax GP for small N."""
