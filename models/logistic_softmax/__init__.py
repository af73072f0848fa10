"""Logistic-softmax GP classifier with its conjugate augmentation (docs/math.md section 3).

Model, for N points and C classes (one latent GP per class, one shared kernel):

    f^c ~ GP(0, k_theta),   c = 1..C
    p(y_i = k | f_i) = sigma(f_i^k) / sum_c sigma(f_i^c)          (sigma the logistic)

Augmented model (appendix A.1; exact, every conditional conjugate):

    lambda_i ~ flat on (0, inf),   n_ic | lambda_i ~ Poisson(lambda_i),
    omega_ic | n_ic ~ PG(y'_ic + n_ic, 0),
    p(y_i | f_i, n_i, omega_i)
        = prod_c 2^-(y'_ic + n_ic) exp((y'_ic - n_ic) f_ic / 2 - f_ic^2 omega_ic / 2)

with y' the one-hot labels. Integrating (lambda, n, omega) out gives back the likelihood above.

NumPyro sites (stable names, shared with the other classifiers):

* ``kernel_variance`` (), ``kernel_lengthscale`` (D,) or (): kernel hyperparameters;
* ``f_white`` (C, N) and the deterministic ``f`` (N, C): the whitened latent,
  f^c = chol(K) v^c;
* ``y`` (N,): the observed labels, categorical with log-probabilities ``log_link(f)``, one
  per point inside the plate ``data`` (``latent_model``), or
* ``lambda`` (N,), ``n`` (N, C), ``omega`` (N, C) and the factor ``y_augmented``
  (``augmented_model``, for documentation and ``Predictive``; lambda's flat prior is improper).

Inference (all through ``ppgpc.infer.fit``), each algorithm in a module of its own:

* ``"gibbs"``: the blocked Gibbs sampler of docs/math.md section 3 (``gibbs_kernel``, module
  ``gibbs``), an init/step pair over ``GibbsState`` plugged into NumPyro's
  ``MCMC``; hyperparameters fixed or sampled by an HMC step per sweep (HMC-within-Gibbs,
  ``hyper_potential``); with the method option ``num_inducing`` = M the inducing-point
  sampler of the DTC model f = K_nm K_mm^-1 u (``inducing_gibbs_kernel``, module
  ``gibbs_inducing``; O(N M^2 C) per sweep), its kernel hyperparameters and
  inducing inputs fixed at the stochastic sparse CAVI's point (``fit_inducing_hypers``)
  unless given, held as draws of the whitened inducing values (predictive kind
  ``"inducing"``);
* ``"cavi"``: coordinate-ascent VI of appendix A.2 (``fit_cavi``; the init/step pair
  ``cavi_init``/``cavi_step`` in ``cavi``), full (M = N) or sparse, with
  type-II ML or MAP of the kernel hyperparameters (and inducing inputs) on the ELBO by
  optax Adam; with ``batch_size``/``class_batch_size`` the stochastic version of appendix
  A.3 (``stochastic_cavi``: minibatches of points and classes, natural-gradient steps
  on q(v) with a Robbins-Monro step size). The full version is held as joint draws of f at
  the training inputs (``sample_q_f``); a sparse one as draws of the whitened inducing
  values (``sample_q_v``), which predicts with q's own predictive p(f* | u) q(u)
  (``inducing_latent``), so nothing N x N is formed and its cost is O(N M^2);
* ``"nuts"`` (``form="latent"``): NUTS on ``latent_model`` (hyperparameters given or sampled).

NUTS and the full CAVI run on training data padded to a few fixed sizes (``pad``,
``ppgpc.runtime.padding``): padded rows have the identity prior block, no label (one-hot row zero)
and likelihood weight zero, so the real rows' posterior is the unpadded one. The Gibbs
samplers and the sparse and stochastic CAVI run at the data's own N (``pads``).

Modules: ``model`` (data, sites, ``SPEC``), ``link`` (``log_link``), ``gibbs`` and
``gibbs_inducing`` (the samplers' init/step pairs and blocks), ``elliptical_slice`` (the
level move), ``cavi`` and ``stochastic_cavi`` (the variational fits). This face names the
model's API; the algorithms' pieces are imported from their modules.
"""

from ppgpc.models.logistic_softmax.link import log_link
from ppgpc.models.logistic_softmax.model import (FULL_CAVI_ON_ONE_DEVICE, INDUCING_FIT_BATCH,
                                                 INDUCING_FIT_ITERATIONS, SPEC, LSMData,
                                                 augmented_model, fit_cavi, fit_hypers,
                                                 fit_inducing_hypers, initial_hypers,
                                                 latent_conditional, latent_model, num_latent,
                                                 on_devices, pad, pads, prepare)

__all__ = ["SPEC", "LSMData", "prepare", "pad", "pads", "num_latent", "log_link",
           "initial_hypers", "latent_model", "augmented_model", "latent_conditional",
           "fit_cavi", "fit_hypers", "fit_inducing_hypers", "on_devices",
           "INDUCING_FIT_BATCH", "INDUCING_FIT_ITERATIONS", "FULL_CAVI_ON_ONE_DEVICE"]
