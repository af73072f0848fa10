"""Sparse variational GP classifier (Hensman et al. 2015; docs/math.md section 4), with a softmax
link (SVGPC, C latents) or the inverse ILR link (Uncollapsed-ILR, C-1 latents; docs/math.md
section 1 "Uncollapsed sparse" and the ILR paper's section 3.3).

Model, for N points, C classes, L latent functions (L = C for ``link="softmax"``, C - 1 for
``link="ilr"``), M inducing inputs Zm and an L x L mixing matrix W:

    v_c ~ N(0, I_M),   u_c = f_c(Zm) = L_mm v_c          (whitened inducing values, c = 1..L)
    f_c(x_i) | v_c ~ N(a_i^T v_c, k_ii - a_i^T a_i),     a_i = L_mm^-1 k_mi
    y_i | f_i ~ Categorical(link(W f_i))                 softmax(W f) or softmax(V W f)

Variational family: q(v_c) = N(m_c, S_c), S_c = R_c R_c^T with a full lower-triangular R_c
(``q_mean`` (L, M), ``q_scale_tril`` (L, M, M)), and q(f | v) = p(f | v), so that

    ELBO = (N / B) sum_{i in batch} E_q[log p(y_i | W f_i)] - sum_c KL(q(v_c) || N(0, I)).

The expected log-likelihood E_q[log p(y_i | W f_i)] of the ELBO is a Monte Carlo estimate
with reparameterisation, in one of three forms (``SVGPData.ell_estimator``):

* ``"marginal"`` (default; local reparameterisation, as GPyTorch and Pyro's SVGP do): S draws
  per point of f_ic from its marginal under q,
  q(f_ic) = N(a_i^T m_c, k_ii - |a_i|^2 + |R_c^T a_i|^2), independent across points, latents
  and draws (``likelihood_samples`` = S, default 10), averaged. The expectation is the same
  as the joint form's, since each point's term only depends on its own marginal; the
  variance is much lower, because the points of a minibatch no longer share one draw of v.
  This costs an extra O(L M^2 B) per step for |R_c^T a_i|^2.
* ``"price"``: the marginal draws, with the gradient with respect to each marginal variance
  taken from Price's theorem instead of the reparameterisation,
  d/d s2_ic E[log p(y_i | f_i)] = 1/2 E[d^2 log p(y_i | f_i) / d f_ic^2],
  estimated on the same draws (the gradient with respect to the marginal means is the
  reparameterisation one, which is Bonnet's theorem). The ELBO value is the marginal
  estimator's. For the softmax and inverse-ILR links the second derivative is
  -(G^T (diag p - p p^T) G)_cc <= 0, with G the linear map from f to the logits (W, or V W)
  and p the class probabilities, so the estimated gradient of every variance has the right
  sign on every draw. That is what natural-gradient steps on q(v) need: the new precision
  (1 - gamma) P + gamma (I - 2 d ELL / d S) stays positive definite
  (``ppgpc.infer.natgrad``).
* ``"joint"``: one draw of v = m + R e shared by the minibatch, then
  f_i = a_i^T v + sqrt(k_ii - |a_i|^2) e_i.

The KL is analytic (``WhitenedPrior``). A minibatch of B of the N points is drawn without
replacement (``minibatch_rows``: the B smallest of per-point uniforms u_i from
``fold_in(key, i)``) and its likelihood scaled by N / B; the normals of point i come from
``fold_in(key, i)`` as well (``row_normals``), so a point's terms do not depend on how many
rows the data has. (The joint estimator draws its minibatch with
``numpyro.plate("data", N, subsample_size=B)``, whose indices the guide shares.)

Padded data (``pad``, ``ppgpc.runtime.padding``; the marginal and Price estimators): the padded
rows have likelihood weight zero in full batches and are never drawn into a minibatch, N is
the number of real rows; where the inducing inputs are the training inputs (M = N, the
default below 200 points) they are padded too, each padded one an identity block of K_mm
that no input sees, so its q(v) stays the prior N(0, 1) with KL zero.
Kernel hyperparameters, inducing inputs and W are ``numpyro.param`` sites (point
estimates maximising the ELBO); inducing inputs start at k-means++ centres. With
``prepare(kernel_prior=True)`` the model also adds the kernel's log prior log p(theta)
(factor site ``kernel_log_prior``, outside the data plate, so not scaled by N / B), and SVI
then maximises ELBO + log p(theta): type-II MAP of the kernel hyperparameters instead of
type-II ML. W can carry the latents' scale (W f has the same law under (W diag(s),
var / s^2) for any s > 0), so a prior on var alone does not bound it;
``prepare(variance_prior_on="mixed")`` puts the variance prior on the amplitude each latent
has in W f, var_l |W[:, l]|^2 (``mixed_amplitudes``), which is invariant along that ridge.

Per-latent kernels and inducing inputs (``prepare(shared_kernel=False,
shared_inducing=False)``): each latent f_c gets its own kernel hyperparameters and its own
inducing inputs Zm_c, so u_c = f_c(Zm_c), L_mm,c and a_ci = L_mm,c^-1 k_c(Zm_c, x_i) are per
latent, and everything above holds with a_i replaced by a_ci: GPyTorch's batch-shaped
multitask SVGP, which the ILR paper's SVGPC and Uncollapsed-ILR baselines were built on
(L M inducing inputs in all, L Cholesky factors of M x M per step). The two options are
independent.

NumPyro sites: params ``kernel_variance`` () or (L,), ``kernel_lengthscale`` (D,) or () (with
a leading L axis under ``shared_kernel=False``), ``inducing_inputs`` (M, D) or (L, M, D),
``mixing`` (L, L) in the model and ``q_mean`` (L, M), ``q_scale_tril`` (L, M, M) in the
guide (the model reads them too under the marginal estimator, as Pyro's
``VariationalSparseGP`` does); latent ``v`` (L, M), ``f`` (B, L) (joint estimator only);
observed ``y`` (B,), or (S, B) under the marginal estimator with the likelihood scaled by 1/S;
on several devices (``on_devices``, the driver's ``devices``) the marginal estimator's sum
over the batch is taken device by device and enters as the factor ``y_batch`` instead.
Fit with driver method ``"svi"`` (``ppgpc.infer.svi``).
Predictions use the driver's ``"inducing"`` predictive kind: draws of v and the SVGP
conditional at new inputs (``inducing_latent``).

For small N, ``latent_model``/``latent_conditional`` give the full (non-sparse) GP with the
same link and W = I, whitened (f_c = chol(K) w_c), for ``method="nuts", form="latent"``: the
exact posterior to compare the variational one with.

The link ``"gaussian"`` (``prepare_regression``) replaces the categorical likelihood by
Y_i ~ N(W f_i, sigma^2 I); it exists so that the bound can be checked against Titsias's
collapsed bound (``ppgpc.gp.sparse``), which it equals at the optimal q(v) when W = I.

The package's modules, each one concept: ``data`` (``SVGPData``, ``prepare``, padding,
minibatch rows and per-row normals), ``conditional`` (the whitened prior and its KL, the
SVGP conditional p(f | v)), ``likelihood`` (the links and the expected log-likelihood's
estimators, on one device or several), ``scoring`` (held-out scoring during SVI),
``variational`` (the NumPyro model and guide, the hyperparameter priors, the fitted
result), ``full`` (the non-sparse latent model for NUTS) and ``classifier`` (the
``ModelSpec``).
This face names the model's API.
"""

from __future__ import annotations

from ppgpc.models.svgp.data import (DEFAULT_LIKELIHOOD_SAMPLES, ELL_ESTIMATORS, LINKS, SVGPData,
                                    VARIANCE_PRIOR_ON, minibatch_rows, num_points, pad, prepare,
                                    prepare_regression, row_normals)
from ppgpc.models.svgp.conditional import WhitenedPrior, marginal_moments, svgp_conditional
from ppgpc.models.svgp.likelihood import (LOG_LINKS, batch_log_likelihood_sum, log_likelihood,
                                          log_likelihood_curvature, mixing_matrix, on_devices)
from ppgpc.models.svgp.scoring import VALIDATION_CHUNK, validation_log_predictive
from ppgpc.models.svgp.variational import (guide, includes_hyper_prior, inducing_latent,
                                           inducing_values, mixed_amplitudes, model,
                                           own_inducing_values, prior_params, svi_result)
from ppgpc.models.svgp.full import (initial_hypers, latent_conditional, latent_model, log_link,
                                    num_latent, num_latent_ilr, num_latent_softmax, prior_factor)
from ppgpc.models.svgp.classifier import SPEC, svgp_spec

__all__ = ["DEFAULT_LIKELIHOOD_SAMPLES", "ELL_ESTIMATORS", "LINKS", "SVGPData",
           "VARIANCE_PRIOR_ON", "minibatch_rows", "num_points", "pad", "prepare",
           "prepare_regression", "row_normals", "WhitenedPrior", "marginal_moments",
           "svgp_conditional", "LOG_LINKS", "batch_log_likelihood_sum", "log_likelihood",
           "log_likelihood_curvature", "mixing_matrix", "on_devices", "VALIDATION_CHUNK",
           "validation_log_predictive", "guide", "includes_hyper_prior", "inducing_latent",
           "inducing_values", "mixed_amplitudes", "model", "own_inducing_values", "prior_params",
           "svi_result", "initial_hypers", "latent_conditional", "latent_model", "log_link",
           "num_latent", "num_latent_ilr", "num_latent_softmax", "prior_factor", "SPEC",
           "svgp_spec"]
