"""Write the notebooks of this folder from the cell lists below, and optionally execute them.

    python notebooks/build_notebooks.py                    # write each .ipynb that is not
                                                           # there yet (no outputs)
    python notebooks/build_notebooks.py --execute 01 04    # write, then run 01 and 04 at
                                                           # full size, saving the outputs

Without ``--execute`` an existing notebook is kept as it is (with its outputs); delete it
to have it written again from the cell lists, without outputs.

The notebooks hold no logic of their own: every computation is a call into ``ppgpc``. Their
size is chosen by ``PPGPC_NOTEBOOK_SIZE`` (``full`` or ``small``); when it is unset,
``PPGPC_TEST_SIZE=small`` selects ``small``. The committed copies are
executed at ``full`` size; ``tests/test_notebooks.py`` runs them at ``small`` size.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

SETUP = '''\
%matplotlib inline
import os
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from tqdm import TqdmWarning

import ppgpc

# Every fit below runs with progress=False, so no progress bars. tqdm still warns (naming the
# folder it is installed in) when a notebook has no ipywidgets: that warning is dropped, and
# other warnings print as "Category: message", without the path of the file that raised them.
warnings.filterwarnings("ignore", category=TqdmWarning)
warnings.formatwarning = lambda message, category, *args, **kwargs: (
    f"{category.__name__}: {message}\\n")

# Size switch: PPGPC_NOTEBOOK_SIZE=small|full; PPGPC_TEST_SIZE=small also selects small.
SIZE = os.environ.get("PPGPC_NOTEBOOK_SIZE") or (
    "small" if os.environ.get("PPGPC_TEST_SIZE", "").lower() == "small" else "full")
if SIZE not in ("small", "full"):
    raise ValueError(f"PPGPC_NOTEBOOK_SIZE must be 'small' or 'full', got {SIZE!r}")
SMALL = SIZE == "small"
plt.rcParams["figure.dpi"] = 80
pd.set_option("display.precision", 3)
print(f"size: {SIZE}; ppgpc {ppgpc.__version__}")'''


def md(text: str):
    return new_markdown_cell(text.strip("\n"))


def code(text: str):
    return new_code_cell(text.strip("\n"))


# --------------------------------------------------------------------------- 01 quickstart
QUICKSTART = [
    md("""
# Quickstart: three calibrated GP classifiers on the UCI wine data

This notebook fits each classifier that ppgpc ships with its scikit-learn-style estimator,
on the ILR paper's split of the wine data (50 stratified test points), and compares them on
accuracy, negative log-likelihood (NLL), expected calibration error (ECE) and the Brier
score (docs/math.md section 7). A reliability diagram then shows *where* each model is
over- or under-confident.

| estimator | model (docs/math.md) | inference at full size |
| --- | --- | --- |
| `ILRGPClassifier` | ILR-GP (section 1), C-1 latent GPs | type-II MAP, exact posterior |
| `DirichletGPClassifier` | GPD (section 2), C latent GPs | type-II MAP, exact posterior |
| `LogisticSoftmaxGPClassifier` | logistic-softmax (section 3), C GPs | NUTS on the latent values |

ILR-GP and GPD are GP regressions on transformed labels (isometric-log-ratio coordinates of
smoothed one-hot labels; log-Dirichlet pseudo-counts), so their posterior is Gaussian and
exact; the logistic-softmax model keeps a categorical likelihood.

**Size.** The committed copy ran at full size, with each estimator's defaults: ILR-GP and
GPD take type-II MAP kernel hyperparameters (the kernel priors included) and the closed-form
Gaussian posterior, and choose their smoothing levels (epsilon and the noise tolerance tau
for ILR-GP, alpha_eps for GPD) by closed-form leave-one-out NLL over a grid; the
logistic-softmax model fits its kernel hyperparameters by type-II MAP on the CAVI ELBO, then
samples the latent values by NUTS (4 chains of 500 warm-up steps and 1000 draws).
`PPGPC_NOTEBOOK_SIZE=small` (as in the test suite) fixes epsilon and alpha_eps (ILR-GP's
tau is still chosen by leave-one-out) and fits the logistic-softmax model by CAVI.
"""),
    code(SETUP),
    md("""
## Data

`paper_split` holds out 50 stratified test points (seed 0) and splits the rest into training
and validation parts; the estimators do their own validation, so they get both.
"""),
    code('''
from ppgpc.datasets import load, paper_split

X, y = load("wine")
split = paper_split(X, y, seed=0)
X_fit = np.concatenate([split.X_train, split.X_val])
y_fit = np.concatenate([split.y_train, split.y_val])
print(f"{X_fit.shape[0]} points to fit on, {split.X_test.shape[0]} test points, "
      f"{X.shape[1]} features, classes {sorted(set(y.tolist()))}")'''),
    md("""
## Fit the three classifiers

Every estimator z-scores the inputs with the training statistics, uses an ARD RBF kernel,
and derives every random number from `seed`; `progress=False` keeps the fits quiet. The
last column is each fit's time as this run measured it (JAX compilation included).
"""),
    code('''
from ppgpc import DirichletGPClassifier, ILRGPClassifier, LogisticSoftmaxGPClassifier

if SMALL:
    classifiers = {
        "Exact-ILR": ILRGPClassifier(epsilon=0.999, progress=False),
        "GPD": DirichletGPClassifier(alpha_eps=0.01, progress=False),
        "LSM": LogisticSoftmaxGPClassifier(inference="cavi", progress=False),
    }
else:
    classifiers = {
        "Exact-ILR": ILRGPClassifier(progress=False),   # epsilon, tau: leave-one-out
        "GPD": DirichletGPClassifier(progress=False),   # alpha_eps: leave-one-out
        "LSM": LogisticSoftmaxGPClassifier(progress=False),  # NUTS, the default
    }

rows, probs = [], {}
for name, clf in classifiers.items():
    start = time.perf_counter()
    clf.fit(X_fit, y_fit)
    seconds = time.perf_counter() - start
    scores = clf.evaluate(split.X_test, split.y_test)
    probs[name] = clf.predict_proba(split.X_test)
    rows.append({"model": name, "accuracy": scores["accuracy"], "NLL": scores["nll"],
                 "ECE (top-label)": scores["ece"], "Brier": scores["brier"], "fit s": seconds})
table = pd.DataFrame(rows).set_index("model")
table'''),
    md("""
The smoothing levels chosen (or given), the noise level sigma that Proposition 1 of the ILR
paper derives from epsilon and tau (docs/math.md section 1), and the leave-one-out NLL of
each candidate where a search ran:
"""),
    code('''
ilr, gpd = classifiers["Exact-ILR"], classifiers["GPD"]
print(f"ILR-GP: epsilon = {ilr.epsilon_}, tau = {ilr.tau_}, sigma = {ilr.noise_std_:.3f}")
print(f"GPD:    alpha_eps = {gpd.alpha_eps_}")
searches = [("ILR-GP, per epsilon (at the chosen tau)", ilr.epsilon_scores_),
            ("ILR-GP, per tau (at the chosen epsilon)", ilr.tau_scores_),
            ("GPD, per alpha_eps", gpd.alpha_eps_scores_)]
for what, scores in searches:
    if scores is not None:
        print(f"leave-one-out NLL {what}:",
              {value: round(nll, 4) for value, nll in scores.items()})'''),
    md("""
For reference, the ILR paper's Table 3 (mean over 5 seeds) for wine. One split of 50 test
points is noisy (one error moves the accuracy by 0.02), so only large gaps mean anything;
notebook 05 repeats the protocol over seeds and data sets.
"""),
    code('''
from ppgpc.experiments import PAPER_EXACT

paper = pd.DataFrame(
    {name: {"accuracy": PAPER_EXACT[("wine", name)][0][0],
            "NLL": PAPER_EXACT[("wine", name)][1][0],
            "ECE (top-label)": PAPER_EXACT[("wine", name)][2][0]} for name in classifiers}).T
paper.index.name = "paper (wine)"
paper'''),
    md("""
## Reliability diagrams

Top-label confidence against top-label accuracy in equal-mass bins of at least 10 test
points each (the count is printed at each point), with a grey bar per bin for the central
95% of the accuracy a calibrated model would show there: a point outside its bar is ringed
in red. Points on the diagonal are calibrated; below it, the model is over-confident. With
50 test points there are few bins, and the bars are wide: 50 points cannot show a small
miscalibration.
"""),
    code('''
from ppgpc.evaluation.plotting import reliability_bands_diagram, reliability_bands_grid

y_test = np.searchsorted(ilr.classes_, split.y_test)   # labels as indices into classes_
fig = reliability_bands_grid({name: (p, y_test) for name, p in probs.items()}, min_count=10)'''),
    md("""
One model's diagram, drawn on pyplot's current axes as ArviZ and scikit-learn plots are
(or on the ``ax`` given), with ten bins of five points each: the bars widen as the bins
shrink.
"""),
    code('''
plt.figure(figsize=(5, 4))
ax = reliability_bands_diagram(probs["Exact-ILR"], y_test, min_count=5, label="Exact-ILR")
ax.set_title("wine, seed 0: Exact-ILR")
plt.show()'''),
    md("""
## The posterior in ArviZ

Every fit exports to ArviZ `InferenceData`: the latent draws, the hyperparameters, the
categorical log-likelihood of the labels, posterior-predictive labels and, when inputs are
given, predictions: the class probabilities of 200 of the draws (`predictions["p"]`), and
their exact mean over every draw, which is `predict_proba`
(`predictions_constant_data["p_mean"]`). Notebook 04 walks through the diagnostics; for
leave-one-out on ILR-GP and GPD use `ppgpc.infer.exact_loo` or `ppgpc.infer.psis_loo`
rather than `az.loo` on this export (notebooks 04 and 06 say why).
"""),
    code('''
idata = ilr.to_inference_data(split.X_test)
print(idata)
print("draws of the predictive probabilities:", dict(idata.predictions["p"].sizes))
p_mean = idata.predictions_constant_data["p_mean"].values
print("p_mean is predict_proba:", np.array_equal(p_mean, ilr.predict_proba(split.X_test)))'''),
]


# --------------------------------------------------------------------------- 02 toy mixture
TOY = [
    md("""
# Toy mixtures: what calibrated predictive probabilities look like

Two synthetic settings from the papers, both 2-D Gaussian mixtures with one component per
class and the means on a circle (`ppgpc.datasets.synthetic`). Because the generative model
is known, so are the true class probabilities p(y = c | x) (the Bayes classifier), and every
classifier can be held against them, not only against labels.

1. **The logistic-softmax paper's three-class toy** (Galy-Fajou et al. 2020, Fig. 8 of the
   appendix: 500 points, component variance 0.5): RGB maps of the predictive probabilities of
   the four classifiers side by side. Each class owns a colour channel; saturated colours
   are confident predictions, mixed colours are regions where several classes are plausible.
2. **The ILR paper's effect of epsilon** (its Fig. 5): Exact-ILR with each label-smoothing
   level epsilon, as the overlap sigma of the components grows; test NLL and ECE against
   sigma, with the true probabilities' scores as the floor.

The paper texts lost the means of the components in extraction; we place them on the unit
circle (the generator's `radius` argument changes that).

**Size.** The committed copy ran at full size: 300 training points rather than the paper's
500, a 32 x 32 grid, NUTS with 4 chains of 250 draws (after 500 warm-up steps) for the
logistic-softmax model, and 4 overlap levels x 4 epsilons. `PPGPC_NOTEBOOK_SIZE=small`
shrinks all of it for a quick run (the test suite runs it so).
"""),
    code(SETUP + """

from ppgpc import (DirichletGPClassifier, ILRGPClassifier, LogisticSoftmaxGPClassifier,
                   Selection, SoftmaxSVGPClassifier)
from ppgpc.datasets.synthetic import logistic_softmax_toy
from ppgpc.evaluation.exports import calibration_table
from ppgpc.evaluation.maps import plot_probability_maps
from ppgpc.experiments import epsilon_overlap_sweep"""),
    md("## 1. The three-class toy"),
    code("""
# 1024 test points and a 32 x 32 grid are whole blocks of the predictions' 512-point
# chunks, so one compiled predictive serves them all.
N_TRAIN, GRID = (60, 32) if SMALL else (300, 32)
toy = logistic_softmax_toy(n_train=N_TRAIN, n_test=1024, seed=0)
print(f"{len(toy.y_train)} training points, {len(toy.y_test)} test points, "
      f"sigma = {toy.sigma:.3f}, class counts {np.bincount(toy.y_train).tolist()}")"""),
    md("""
The four classifiers. At full size Exact-ILR and GPD pick their smoothing level (epsilon,
alpha_eps) on a 10% validation split, as in the paper (ILR-GP's noise tolerance tau then
stays at its fixed default, 0.01); the logistic-softmax model is sampled by NUTS, its
default, with kernel hyperparameters by type-II MAP on the CAVI ELBO; the softmax SVGP
(SVGPC) learns 50 inducing points by 2000 steps of SVI. At small size epsilon and alpha_eps
are fixed (tau is chosen by leave-one-out, the default), the logistic-softmax model is
fitted by CAVI and SVGPC has 20 inducing points and 300 steps. Each fit prints its time as
this run measured it.
"""),
    code("""
QUIET = dict(progress=False)
if SMALL:
    classifiers = {
        "Exact-ILR": ILRGPClassifier(epsilon=0.99, **QUIET),
        "GPD": DirichletGPClassifier(alpha_eps=0.01, **QUIET),
        "LSM": LogisticSoftmaxGPClassifier(inference="cavi", **QUIET),
        "SVGPC": SoftmaxSVGPClassifier(num_inducing=20, inference_options=dict(
            max_iter=300, learning_rate=0.05), **QUIET),
    }
else:
    HOLDOUT = Selection(validation="holdout")
    classifiers = {
        "Exact-ILR": ILRGPClassifier(selection=HOLDOUT, **QUIET),
        "GPD": DirichletGPClassifier(selection=HOLDOUT, **QUIET),
        "LSM": LogisticSoftmaxGPClassifier(inference_options=dict(num_samples=250,
                                                                       max_samples=250), **QUIET),
        "SVGPC": SoftmaxSVGPClassifier(num_inducing=50, inference_options=dict(max_iter=2000),
                                       **QUIET),
    }
fit_seconds = {}
for name, clf in classifiers.items():
    start = time.perf_counter()
    clf.fit(toy.X_train, toy.y_train)
    fit_seconds[name] = time.perf_counter() - start
    print(f"{name:10s} {fit_seconds[name]:6.1f} s", flush=True)"""),
    md("""
Test scores, with the true probabilities as the first row. ECE is top-label; the class-wise
ECE (the logistic-softmax paper's) is given too.
"""),
    code("""
probs = {"Bayes (truth)": toy.bayes_probabilities(toy.X_test)}
probs.update({name: clf.predict_proba(toy.X_test) for name, clf in classifiers.items()})
table = calibration_table(probs, toy.y_test)
table"""),
    md("""
The RGB maps. The truth is uncertain (mixed colours) in a band between each pair of
classes and confident far out along each class's direction; a calibrated classifier should
look like it. Training points are drawn in their class colours.
"""),
    code("""
maps = {"Bayes (truth)": toy.bayes_probabilities}
maps.update({name: clf.predict_proba for name, clf in classifiers.items()})
plot_probability_maps(maps, toy.X_train, toy.y_train, grid_size=GRID)"""),
    md("""
## 2. The effect of epsilon as the classes overlap

Exact-ILR with each epsilon held fixed, on three-class mixtures of growing component
standard deviation sigma (`ppgpc.experiments.epsilon_overlap_sweep`). Every point of a curve
is one estimator fitted on 200 training points (60 at small size) and scored on 1024 test
points. Epsilon is not searched, but the noise tolerance tau is: with the default
`tau="auto"` each estimator fits once per tau of its grid, scores the fits by closed-form
leave-one-out NLL, and keeps the best.
"""),
    code("""
if SMALL:
    SIGMAS, EPSILONS, N_SWEEP = (0.3, 1.0), (0.9, 0.999), N_TRAIN   # shapes of the fit above
else:
    SIGMAS, EPSILONS, N_SWEEP = (0.25, 0.5, 1.0, 1.5), (0.9, 0.99, 0.999, 0.99999), 200
start = time.perf_counter()
sweep = pd.DataFrame(epsilon_overlap_sweep(SIGMAS, EPSILONS, n_train=N_SWEEP, n_test=1024,
                                           seed=0, progress=False))
print(f"{len(sweep)} (sigma, epsilon) pairs in {time.perf_counter() - start:.0f} s")
sweep.pivot(index="sigma", columns="epsilon", values="nll")"""),
    code("""
fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
cmap = plt.get_cmap("viridis")
for i, (epsilon, part) in enumerate(sweep.groupby("epsilon")):
    colour = cmap(i / max(len(EPSILONS) - 1, 1))
    for ax, metric in zip(axes, ["nll", "ece", "accuracy"]):
        ax.plot(part["sigma"], part[metric], marker="o", color=colour, label=f"{epsilon:g}")
truth = sweep.drop_duplicates("sigma")
axes[0].plot(truth["sigma"], truth["bayes_nll"], "k--", label="truth")
axes[1].plot(truth["sigma"], truth["bayes_ece"], "k--", label="truth")
for ax, title in zip(axes, ["test NLL", "test ECE (top-label)", "test accuracy"]):
    ax.set_xlabel("component standard deviation sigma")
    ax.set_title(title)
axes[0].legend(title="epsilon", frameon=False, fontsize=8)
plt.tight_layout()"""),
    md("""
What to look for (the ILR paper's Fig. 5): a small epsilon (strong smoothing) should cost
little in NLL when the classes are well separated and protect against over-confidence when
they overlap, while a large epsilon should win only where the classes barely overlap. When
no single epsilon is best at every overlap, it has to be chosen from the data, which is what
the estimators' default `epsilon="auto"` does (by leave-one-out, jointly with tau).
"""),
]

# ------------------------------------------------------------------ 03 MCMC vs conjugate
MCMC = [
    md("""
# MCMC versus conjugate and approximate posteriors

ppgpc computes three posteriors without generic MCMC: the exact Gaussian posterior of ILR-GP
(docs/math.md section 1), the blocked Gibbs sampler of the Polya-Gamma augmented
logistic-softmax model (section 3), and the sparse variational posterior of the softmax
SVGP (section 4). This notebook holds each against NUTS on a model that needs no
conjugacy:

1. The exact ILR-GP latent posterior against NUTS on ILR-GP's latent form
   (`form="latent"`), with the same hyperparameters: they should agree exactly (both are
   the same Gaussian).
2. Logistic-softmax Gibbs on the augmented model against NUTS on the non-augmented latent
   model, with the same hyperparameters: they should agree exactly (the augmentation is
   exact).
3. The softmax SVGP with W = I and its variational q against NUTS on the same full softmax
   GP (W = I), with the hyperparameters of the SVGP fit: they need not agree, since q is a
   Gaussian approximation; the comparison shows how far off it is.

Each comparison uses `ppgpc.evaluation.posteriors.compare_posteriors` on the latent
functions at the training inputs: per variable the largest standardised mean difference
(smd), the largest Monte Carlo z-score of the difference of means (ESS-based standard
errors), the range of the sd ratios, and an energy-distance permutation test on
ESS-thinned joint draws. We show overlaid marginals of the most different elements, R-hat
and ESS tables of the MCMC runs, and the fit times this run measured.

The problem is small on purpose (NUTS on N x C latent values): a three-class circle mixture
(`ppgpc.datasets.synthetic.mixture_problem`) with overlapping classes.

**Size.** The committed copy ran at full size (N = 50, 4 chains of 500 draws after 500
warm-up steps). `PPGPC_NOTEBOOK_SIZE=small` uses N = 30 and 2 chains of 200 draws after 200
warm-up steps, enough to run the code paths in the test suite; the statistics are then
weak.
"""),
    code(SETUP + """

import arviz as az
from scipy.special import softmax

from ppgpc import ILRGPClassifier, LogisticSoftmaxGPClassifier
from ppgpc.evaluation.posteriors import compare_posteriors
from ppgpc.datasets.synthetic import mixture_problem

N, CHAINS, WARMUP, DRAWS = (30, 2, 200, 200) if SMALL else (50, 4, 500, 500)
NUTS = dict(num_warmup=WARMUP, num_samples=DRAWS, max_samples=DRAWS, num_chains=CHAINS)
problem = mixture_problem(N, 500, num_classes=3, sigma=0.6, seed=0)
X, y = problem.X_train, problem.y_train
print(f"N = {N}, class counts {np.bincount(y).tolist()}")


def timed(estimator):
    start = time.perf_counter()
    estimator.fit(X, y)
    return estimator, time.perf_counter() - start


def mcmc_diagnostics(idata, name):
    \"\"\"Min / median / max of R-hat and ESS over the latent values of one MCMC run.\"\"\"
    s = az.summary(idata, var_names=["f"], kind="diagnostics")
    out = s[["r_hat", "ess_bulk", "ess_tail"]].describe().loc[["min", "50%", "max"]]
    return out.rename(index=lambda q: f"{name}: {q}")"""),
    md("""
## 1. Exact ILR-GP against NUTS on its latent form

The exact fit (`inference="exact"`; the estimator's default, `"map"`, would add the kernel
priors) learns the kernel hyperparameters by type-II maximum likelihood and draws the latent
functions from the closed-form Gaussian posterior. NUTS then samples the same
latent functions (C - 1 = 2 per point, whitened) with the hyperparameters fixed at the same
type-II ML values (the driver's default for `form="latent"`). Both fits are given epsilon
and the noise tolerance tau, so that they are fits of one model (with the default
`tau="auto"` each estimator would choose its own tau).
"""),
    code("""
ILR = dict(epsilon=0.99, tau=0.01, progress=False)
exact, t_exact = timed(ILRGPClassifier(inference="exact", **ILR))   # type-II ML
nuts_ilr, t_nuts_ilr = timed(ILRGPClassifier(inference="nuts", **ILR,
                                             inference_options=dict(form="latent", **NUTS)))
idata_exact, idata_nuts_ilr = exact.to_inference_data(), nuts_ilr.to_inference_data()
cmp_ilr = compare_posteriors(idata_exact, idata_nuts_ilr, ["f"], labels=("exact", "NUTS"))
print(f"exact: {t_exact:.1f} s, NUTS: {t_nuts_ilr:.1f} s")
cmp_ilr"""),
    code("cmp_ilr.plot(max_panels=8)"),
    md("""
## 2. Logistic-softmax: Gibbs on the augmented model against NUTS on the original one

Both runs use the kernel hyperparameters of the CAVI ELBO optimum (type-II MAP); Gibbs
samples (f, lambda, n, omega) blockwise, NUTS samples the whitened f under the logistic-
softmax likelihood directly.
"""),
    code("""
gibbs, t_gibbs = timed(LogisticSoftmaxGPClassifier(inference="gibbs", progress=False,
                                                   inference_options=dict(
    num_warmup=WARMUP, num_samples=DRAWS, max_samples=DRAWS, num_chains=CHAINS)))
nuts_lsm, t_nuts_lsm = timed(LogisticSoftmaxGPClassifier(inference="nuts", progress=False,
                                                          inference_options=NUTS))
idata_gibbs, idata_nuts_lsm = gibbs.to_inference_data(), nuts_lsm.to_inference_data()
cmp_lsm = compare_posteriors(idata_gibbs, idata_nuts_lsm, ["f"], labels=("Gibbs", "NUTS"))
print(f"Gibbs: {t_gibbs:.1f} s, NUTS: {t_nuts_lsm:.1f} s")
cmp_lsm"""),
    code("cmp_lsm.plot(max_panels=8)"),
    md("""
## 3. Softmax SVGP against NUTS on the same softmax GP

SVGPC's default model mixes its latents before the link, softmax(W f), with a learned L x L
matrix W; under it W f is a GP whose outputs are correlated (covariance var W W^T), which
is not the model NUTS samples here (independent latents, W = I, `latent_model` of
`models/svgp/`). Comparing the two would blame the model difference on the
variational approximation. So this section fits the SVGP with W held at the identity
(`learn_mixing=False`, a model option of `softmax_svgp` reached through `ppgpc.fit`) and
M = N inducing points: the model, the inducing set and the kernel hyperparameters (NUTS
runs with the ones the SVGP fit learned) are then the same, and the only difference left is
the Gaussian form of q. Both fits see the same inputs (the mixture is already on unit
scale, so no standardisation). We compare the class probabilities softmax(f_i) at the
training inputs, one per posterior draw.
"""),
    code("""
start = time.perf_counter()
svgp = ppgpc.fit("softmax_svgp", X, y, method="svi", max_iter=500 if SMALL else 3000,
                 progress_bar=False, model_options=dict(num_inducing=N, learn_mixing=False))
t_svgp = time.perf_counter() - start
kernel_hypers = {name: np.asarray(value[0, 0]) for name, value in svgp.hypers.items()
                 if name.startswith("kernel_")}      # the SVGP fit's kernel hyperparameters
start = time.perf_counter()
nuts_full = ppgpc.fit("softmax_svgp", X, y, method="nuts", form="latent",
                      hyperparameters=kernel_hypers, progress_bar=False, **NUTS)
t_nuts_full = time.perf_counter() - start
print("W of the SVGP fit:", np.asarray(svgp.hypers["mixing"][0, 0]).tolist())
idata_svgp, idata_nuts_full = ppgpc.to_inference_data(svgp), ppgpc.to_inference_data(nuts_full)
probs_svgp = {"p": softmax(idata_svgp.posterior["f"].values, axis=-1)}
probs_nuts = {"p": softmax(idata_nuts_full.posterior["f"].values, axis=-1)}
cmp_svgp = compare_posteriors(probs_svgp, probs_nuts, labels=("SVGP", "NUTS"))
print(f"SVGP (SVI): {t_svgp:.1f} s, NUTS: {t_nuts_full:.1f} s")
cmp_svgp"""),
    code("cmp_svgp.plot(max_panels=8)"),
    md("## Summary: agreement, MCMC diagnostics and timing"),
    code("""
summary = pd.concat({"ILR-GP: exact vs NUTS": cmp_ilr.table,
                     "LSM: Gibbs vs NUTS": cmp_lsm.table,
                     "softmax GP (W = I): SVGP vs NUTS": cmp_svgp.table})
summary[["n_elements", "max_abs_smd", "max_abs_z", "sd_ratio_min", "sd_ratio_max", "p_value",
         "different"]]"""),
    code("""
pd.concat([mcmc_diagnostics(idata_nuts_ilr, "ILR NUTS"),
           mcmc_diagnostics(idata_gibbs, "LSM Gibbs"),
           mcmc_diagnostics(idata_nuts_lsm, "LSM NUTS"),
           mcmc_diagnostics(idata_nuts_full, "softmax NUTS")])"""),
    code("""
timing = pd.DataFrame({"seconds": {"ILR-GP exact": t_exact, "ILR-GP NUTS (latent)": t_nuts_ilr,
                                   "LSM Gibbs": t_gibbs, "LSM NUTS": t_nuts_lsm,
                                   "SVGP (SVI)": t_svgp, "softmax GP NUTS": t_nuts_full}})
timing["bulk ESS per second (median over f)"] = [
    np.nan,
    *(az.ess(idata, var_names=["f"])["f"].median().item() / t
      for idata, t in [(idata_nuts_ilr, t_nuts_ilr), (idata_gibbs, t_gibbs),
                       (idata_nuts_lsm, t_nuts_lsm)]),
    np.nan,
    az.ess(idata_nuts_full, var_names=["f"])["f"].median().item() / t_nuts_full]
timing"""),
    md("""
Reading the tables: for the two exact pairs (ILR-GP, logistic-softmax) the standardised mean
differences should be small, the z-scores within Monte Carlo error and the energy test
should not flag a difference. For SVGP, fitted here on the very model NUTS samples (W = I,
M = N, the same kernel hyperparameters), whatever differences remain are the variational
approximation's own; the table says how large they are (standardised mean differences of
the class probabilities) and in which direction q's spread is off (the sd ratios, SVGP over
NUTS, below 1 where q is too narrow and above 1 where it is too wide). With the learned W of
SVGPC's default the model itself differs, and this comparison could not separate the two.
The times are this run's, JAX compilation included (or the reading back of compiled
programs from the persistent compilation cache, when an earlier run stored them).
"""),
]

# ------------------------------------------------------------------ 04 arviz diagnostics
ARVIZ = [
    md("""
# The ArviZ diagnostics workflow

A Bayesian fit is only as good as its checks. This notebook runs the standard ones on ppgpc
posteriors of the wine data, all through ArviZ:

1. **MCMC convergence**: trace and rank plots, R-hat and effective sample sizes (`az.summary`)
   for NUTS on ILR-GP's kernel hyperparameters (the collapsed model of docs/math.md section 1) and
   for the logistic-softmax Gibbs sampler (section 3), with a verdict read from them;
2. **model comparison by leave-one-out** (`az.compare`) on the categorical log-likelihood of
   the labels, the same utility for every model, with the right estimator per fit
   (`ppgpc.infer.exact_loo`, `ppgpc.infer.psis_loo`), and only for fits whose chains passed;
3. **a posterior predictive check that can fail**: per confidence bin, the observed fraction
   of correctly predicted labels against its distribution under replicated labels.

The committed copy ran at full size (NUTS: 4 chains of 500 draws after 500 warm-up steps;
Gibbs: 4 chains of 8000 sweeps thinned by 4 after 1000 warm-up sweeps);
`PPGPC_NOTEBOOK_SIZE=small` runs 2 short chains for a quick run (the test suite runs it so):
its R-hat values then say "not converged yet", as they should, and the verdicts below (and
the fits' own convergence warnings) say so.
"""),
    code(SETUP + '''

import arviz as az

from ppgpc import DirichletGPClassifier, ILRGPClassifier, LogisticSoftmaxGPClassifier
from ppgpc.datasets import load, paper_split
# ArviZ 1 (Python >= 3.12) or 0.2x (3.11): an export is the installed one's container, and
# where their plots differ the cells below show both
from ppgpc.evaluation.arviz_objects import ARVIZ_1

NUM_CHAINS = 2 if SMALL else 4
NUM_WARMUP, NUM_SAMPLES = (100, 100) if SMALL else (500, 500)
GIBBS = dict(num_warmup=100, num_samples=100, max_samples=100, thinning=1) if SMALL else dict(
    num_warmup=1000, num_samples=2000, max_samples=2000, thinning=4)  # 2000 kept draws
X, y = load("wine")
split = paper_split(X, y, seed=0)
X_fit = np.concatenate([split.X_train, split.X_val])
y_fit = np.concatenate([split.y_train, split.y_val])'''),
    md("""
## 1. NUTS on ILR-GP's hyperparameters

With `inference="nuts"` and `form="collapsed"`, NUTS samples the kernel hyperparameters from
their posterior under the collapsed Gaussian likelihood of the ILR targets; each draw is
paired with one exact draw of the latent functions given it. Epsilon is fixed at 0.999; the
noise tolerance tau keeps its default, `"auto"`, so the estimator first chooses it by
closed-form leave-one-out over type-II MAP fits, then runs NUTS with it. We use an isotropic
RBF kernel here (one variance, one lengthscale) so that the traces stay readable; the ARD
kernel works the same way with a `feature` dimension on the lengthscale.
"""),
    code('''
start = time.perf_counter()
ilr = ILRGPClassifier(epsilon=0.999, kernel="rbf", inference="nuts", progress=False,
                      inference_options=dict(form="collapsed", num_warmup=NUM_WARMUP,
                                             num_samples=NUM_SAMPLES,
                                             max_samples=NUM_SAMPLES,
                                             num_chains=NUM_CHAINS)).fit(X_fit, y_fit)
print(f"NUTS: {time.perf_counter() - start:.1f} s")
idata_ilr = ilr.to_inference_data()
hypers = ["kernel_variance", "kernel_lengthscale"]
if ARVIZ_1:   # ArviZ 1 (arviz-plots): each chain's draws and density, in its own figure
    az.plot_trace_dist(idata_ilr, var_names=hypers)
else:         # ArviZ 0.2x
    az.plot_trace(idata_ilr, var_names=hypers, figsize=(10, 4))
    plt.tight_layout()'''),
    md("""
Rank plots are the sharper check: for chains that sample the same distribution, each
chain's ranks among the pooled draws are uniform, so every histogram should be flat.
"""),
    code('''
if ARVIZ_1:   # ArviZ 1: the rank ECDFs of each chain against their uniform band
    az.plot_rank(idata_ilr, var_names=hypers)
else:         # ArviZ 0.2x: the rank histograms
    az.plot_rank(idata_ilr, var_names=hypers, figsize=(8, 3))
    plt.tight_layout()'''),
    code('''
summary = az.summary(idata_ilr, var_names=hypers)
summary'''),
    code('''
print(f"divergences: {int(idata_ilr.sample_stats['diverging'].sum())}, "
      f"max R-hat {summary['r_hat'].max():.3f}, min bulk ESS {summary['ess_bulk'].min():.0f}")'''),
    md("""
## 2. The logistic-softmax Gibbs sampler

Blocked Gibbs on the Polya-Gamma augmented model samples 3 x 128 latent values; the (ARD)
kernel hyperparameters are fixed at their type-II MAP point on the CAVI ELBO. One direction is slow
for a plain augmented sweep: where all f_c are negative the logistic-softmax probabilities
sigma(f_c) / sum_k sigma(f_k) are nearly those of a softmax, which does not change when
every f_c moves by the same amount, while the augmentation variables pin f where they are.
ppgpc's sweep therefore moves that common level by elliptical slice sampling with the
augmentation integrated out, and draws lambda and the counts given f (docs/records/gibbs.md; the
older sweep left one chain stuck here, R-hat up to 1.24, bulk ESS 12, in 500 draws per
chain). At full size this run is 4 chains of 8000 sweeps thinned by 4.

We read R-hat and ESS twice: on the latent values f, and on the pointwise log-likelihood
log p(y_i | f_i), the quantity that leave-one-out and the predictions use. The rule
(Vehtari et al. 2021): R-hat below 1.01 and bulk ESS above 100 per chain for every
quantity used.
"""),
    code('''
start = time.perf_counter()
lsm = LogisticSoftmaxGPClassifier(inference="gibbs", progress=False, inference_options=dict(
    num_chains=NUM_CHAINS, **GIBBS)).fit(X_fit, y_fit)
print(f"Gibbs: {time.perf_counter() - start:.1f} s")
idata_lsm = lsm.to_inference_data()
f_summary = az.summary(idata_lsm, var_names=["f"], kind="diagnostics")
ll_summary = az.summary(idata_lsm, group="log_likelihood", var_names=["y"],
                        kind="diagnostics")
pd.concat({"latent f": f_summary[["r_hat", "ess_bulk", "ess_tail"]].describe(),
           "log p(y_i | f_i)": ll_summary[["r_hat", "ess_bulk", "ess_tail"]].describe()},
          axis=1).loc[["min", "50%", "max"]]'''),
    code('''
def verdict(summary, name):
    ok = summary["r_hat"].max() < 1.01 and summary["ess_bulk"].min() > 100 * NUM_CHAINS
    print(f"{name}: max R-hat {summary['r_hat'].max():.3f}, min bulk ESS "
          f"{summary['ess_bulk'].min():.0f} -> {'converged' if ok else 'NOT converged'}")
    return ok

verdict(f_summary, "Gibbs, latent f")
lsm_converged = verdict(ll_summary, "Gibbs, log p(y_i | f_i)")'''),
    md("""
How to read the two verdicts: the log-likelihood terms are what leave-one-out, the
predictive probabilities and the check of section 4 use, so when they pass the LSM fit
enters the comparison below. When the latent values fail while the log-likelihood passes,
the chains have not yet agreed on the common level of the latents, the direction the
probabilities barely depend on: statements about f itself (its posterior mean, its
intervals) would then need a longer run, the probabilities do not.
"""),
    code('''
worst = f_summary["ess_bulk"].idxmin()                       # e.g. "f[17, 2]"
obs, latent = (int(v) for v in worst[2:-1].split(","))
print(f"lowest bulk ESS: {worst}")
if ARVIZ_1:
    az.plot_trace_dist(idata_lsm, var_names=["f"], coords={"obs": [obs], "latent": [latent]})
else:
    fig, axes = plt.subplots(1, 2, figsize=(10, 3))
    az.plot_trace(idata_lsm, var_names=["f"], coords={"obs": [obs], "latent": [latent]},
                  axes=axes[None, :])
    plt.tight_layout()'''),
    md("""
## 3. Leave-one-out across models

Every model is scored on the same utility, the log-probability of each held-out label,
log p(y_i | y_-i). The importance ratios must come from the likelihood the posterior was
conditioned on: for ILR-GP and GPD that is a Gaussian pseudo-likelihood of transformed
targets, not the categorical term in `log_likelihood["y"]`, so `az.loo` on the export
weights their draws wrongly. `ppgpc.infer.psis_loo` uses the right ratios (NUTS on ILR-GP,
Gibbs on LSM), and `ppgpc.infer.exact_loo` is the closed form for the conjugate GPD fit with
point hyperparameters; both return ArviZ's `ELPDData`, which `az.compare` ranks. A fit
enters only if its chains passed the checks above.
"""),
    code('''
from ppgpc.infer import exact_loo, psis_loo

gpd = DirichletGPClassifier(alpha_eps=0.01, progress=False).fit(X_fit, y_fit)
idata_gpd = gpd.to_inference_data()
ilr_converged = summary["r_hat"].max() < 1.01 and summary["ess_bulk"].min() > 100 * NUM_CHAINS
elpd = {"GPD (exact)": exact_loo(gpd.result_)}
for name, fit_, ok in [("Exact-ILR (NUTS)", ilr, ilr_converged),
                       ("LSM (Gibbs)", lsm, lsm_converged)]:
    if ok:
        elpd[name] = psis_loo(fit_.result_)
    else:
        print(f"{name} left out of the comparison: its chains did not pass the checks")
comparison = az.compare(elpd)
comparison'''),
    code('''
loo_ilr = psis_loo(ilr.result_)
print(f"Pareto k of Exact-ILR (NUTS), good below {loo_ilr.good_k:.2f}")
if len(comparison) < 2:                # (the small size: short chains fail the checks)
    print("only one fit passed the checks: nothing to compare")
if ARVIZ_1:   # ArviZ 1: each plot in its own figure, no ax argument
    if len(comparison) > 1:
        az.plot_compare(comparison)
    az.plot_khat(loo_ilr)
else:         # ArviZ 0.2x
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.2))
    if len(comparison) > 1:
        az.plot_compare(comparison, ax=axes[0])
    else:
        axes[0].set_axis_off()
    az.plot_khat(loo_ilr, ax=axes[1])
    plt.tight_layout()'''),
    md("""
## 4. A posterior predictive check that can fail

Replicated class frequencies say little: any model with a class intercept reproduces them.
A sharper statistic is how often the predicted label is right among the points the model is
sure about to a given degree. `ppgpc.evaluation.exports.confidence_check` cuts the training
points into equal-mass bins of their top-label confidence (at least 10 points each) and, per bin,
sets the observed fraction of points whose label is the predicted one against the same
fraction under each posterior draw's replicated labels (`posterior_predictive["y"]`). An
over-confident model puts the observed points below the grey bars (the central 95% of the
replicated fractions), an under-confident one above. It is an in-sample check (the labels
also shaped the posterior), so a pass is weaker evidence than a fail; notebook 06 checks
the probabilities on held-out points.
"""),
    code('''
from ppgpc.evaluation.exports import confidence_check
from ppgpc.evaluation.plotting import confidence_ppc_diagram

models = {"Exact-ILR (NUTS)": idata_ilr, "GPD (exact)": idata_gpd, "LSM (Gibbs)": idata_lsm}
checks = {name: confidence_check(idata) for name, idata in models.items()}
fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
for ax, (name, ppc) in zip(axes, checks.items()):
    confidence_ppc_diagram(ppc, ax=ax, label=name, show_counts=False)
    ax.set_title(name)
plt.tight_layout()'''),
    code('''
pd.DataFrame({name: {"bins": ppc.count.size,
                     "bins outside the 95% band": int(np.sum((ppc.accuracy < ppc.band_lower)
                                                             | (ppc.accuracy > ppc.band_upper))),
                     "smallest two-sided p": ppc.p_value.min()}
              for name, ppc in checks.items()}).T'''),
    md("""
Reading the check: with B bins, about 5% of them fall outside their bands by chance, so one
bin out of 10 just outside is no alarm; several on the same side, or a two-sided p-value
far below 0.05 / B, say that the model's confidence does not match how often it is right.
"""),
]


# ------------------------------------------------------------------ 05 UCI calibration
UCI = [
    md("""
# UCI calibration study

Two experiments of the ILR paper (section 5), at a reduced size:

1. **The exact setting** (its Table 3) on wine, glass and thyroid: for each seed, 50
   stratified test points are held out (`ppgpc.datasets.paper_split`), the classifier
   chooses its smoothing level on a 10% validation split of the rest (the paper's
   protocol, `selection=Selection(validation="holdout")`; ILR-GP's noise tolerance tau then
   stays at its fixed default, 0.01), and accuracy, NLL and top-label ECE are measured on
   the test points (`ppgpc.experiments.run_split`). Exact-ILR and GPD use type-II MAP kernel
   hyperparameters, their default (maximum likelihood lets ARD lengthscales run away on
   sets this small). Reliability diagrams pool the test points of all seeds.
2. **Scaling with the number of classes** (its Fig. 6): a 2-D Gaussian mixture with C
   components on the unit circle and a shared standard deviation, so that neighbouring
   classes overlap more as C grows (`ppgpc.experiments.scaling_with_classes`). The true class
   probabilities are known, so a "Bayes" row shows the best any classifier can do.

**Size.** The committed copy ran at full size with 2 seeds (the paper uses 5; run
`python benchmarks/uci_exact.py` for that), with the logistic-softmax model (LSM) fitted by
CAVI to keep the run short (the paper's LSM rows come from Gibbs sampling; the estimator's
default, NUTS, is what notebook 01 and the benchmark run), and C in (3, 5, 10) with 150
training points. At `PPGPC_NOTEBOOK_SIZE=small` only wine, with epsilon and alpha_eps fixed
(ILR-GP's tau is then chosen by leave-one-out, its default) and CAVI for the
logistic-softmax model, and C in (3, 6) with 60 training points, are run.
"""),
    code(SETUP + '''

from ppgpc import Selection
from ppgpc.experiments import PAPER_EXACT, run_split, scaling_with_classes, summarize

HOLDOUT = Selection(validation="holdout")  # the paper's protocol: one 10% validation split
from ppgpc.evaluation.plotting import reliability_bands_grid'''),
    md("## 1. The exact setting"),
    code('''
if SMALL:
    DATASETS, SEEDS = ["wine"], [0]
    OPTIONS = {"Exact-ILR": {"epsilon": 0.999}, "GPD": {"alpha_eps": 0.01},
               "LSM": {"inference": "cavi"}}
else:
    DATASETS, SEEDS = ["wine", "glass", "thyroid"], [0, 1]
    OPTIONS = {"Exact-ILR": {"selection": HOLDOUT}, "GPD": {"selection": HOLDOUT},
               "LSM": {"inference": "cavi"}}  # NUTS: notebook 01, benchmarks/uci_exact.py

runs = {}
for dataset in DATASETS:
    for model, options in OPTIONS.items():
        runs[dataset, model] = [run_split(dataset, model, seed, progress=False, **options)
                                for seed in SEEDS]
        seconds = sum(r.fit_seconds for r in runs[dataset, model])
        print(f"{dataset:8s} {model:10s} done, {seconds:6.1f} s", flush=True)'''),
    md("""
Our mean (and standard deviation over seeds) beside the paper's mean. Lower is better for
NLL and ECE.
"""),
    code('''
rows = []
for (dataset, model), model_runs in runs.items():
    s = summarize(model_runs)
    paper = PAPER_EXACT[dataset, model]
    rows.append({"dataset": dataset, "model": model,
                 "accuracy": s["accuracy"][0], "acc sd": s["accuracy"][1],
                 "paper acc": paper[0][0],
                 "NLL": s["nll"][0], "NLL sd": s["nll"][1], "paper NLL": paper[1][0],
                 "ECE": s["ece"][0], "ECE sd": s["ece"][1], "paper ECE": paper[2][0],
                 "fit s": s["fit_seconds"][0]})
pd.DataFrame(rows).set_index(["dataset", "model"])'''),
    md("""
Reliability diagrams per data set, one panel per model, pooling the test points of all
seeds: top-label confidence in equal-mass bins of at least 10 points, with the band a
calibrated model would stay within.
"""),
    code('''
for dataset in DATASETS:
    pooled = {model: (np.concatenate([r.probs for r in runs[dataset, model]]),
                      np.concatenate([r.y_test for r in runs[dataset, model]]))
              for model in OPTIONS}
    fig = reliability_bands_grid(pooled, min_count=10)
    fig.suptitle(f"{dataset}: {len(SEEDS)} seed(s) x 50 test points")
    display(fig)'''),
    md("""
## 2. Scaling with the number of classes

The paper tunes the smoothing level on the training NLL; here, at full size, Exact-ILR picks
epsilon on a 10% holdout (tau stays at 0.01) and GPD picks alpha_eps on the training NLL
(`alpha_eps="train"`); at small size epsilon and alpha_eps are fixed (tau is then chosen
by leave-one-out, the default). The component standard deviation is 0.15 for every C:
neighbouring means are 2 sin(pi / C) apart, from 1.73 at C = 3 (no overlap) to 0.62 at
C = 10 (strong overlap).
"""),
    code('''
if SMALL:
    CLASS_COUNTS, N_TRAIN, N_TEST = (3, 6), 60, 512
    SCALING_OPTIONS = {"Exact-ILR": {"epsilon": 0.99}, "GPD": {"alpha_eps": 0.01}}
else:
    CLASS_COUNTS, N_TRAIN, N_TEST = (3, 5, 10), 150, 1024
    SCALING_OPTIONS = {"Exact-ILR": {"selection": HOLDOUT}, "GPD": {"alpha_eps": "train"}}
SCALING_OPTIONS = {model: {"progress": False, **options}
                   for model, options in SCALING_OPTIONS.items()}
start = time.perf_counter()
scaling = pd.DataFrame(scaling_with_classes(
    CLASS_COUNTS, tuple(SCALING_OPTIONS), n_train=N_TRAIN, n_test=N_TEST, sigma=0.15,
    seed=0, options=SCALING_OPTIONS))
print(f"{time.perf_counter() - start:.0f} s")
scaling.set_index(["num_classes", "model"])'''),
    code('''
fig, axes = plt.subplots(1, 3, figsize=(12, 3.3))
for ax, metric, label in zip(axes, ["accuracy", "nll", "ece"],
                             ["accuracy", "NLL", "ECE (top-label)"]):
    for model, part in scaling.groupby("model", sort=False):
        style = dict(color="0.4", linestyle="--") if model == "Bayes" else dict(marker="o")
        ax.plot(part["num_classes"], part[metric], label=model, **style)
    ax.set_xlabel("number of classes C")
    ax.set_title(label)
    ax.set_xscale("log")
    ax.set_xticks(CLASS_COUNTS, [str(c) for c in CLASS_COUNTS])
axes[0].legend(frameon=False)
plt.tight_layout()'''),
]


# ------------------------------------------------------------ 06 checking the probabilities
CHECKS = [
    md("""
# Checking the probabilities

A classifier that reports probabilities makes a claim that can be checked: among the points
it gives 80%, about 80% should carry the predicted label. This notebook checks the ppgpc
classifiers four ways, each a call into the library:

1. **Leave-one-out** (`ppgpc.infer.exact_loo`, `ppgpc.infer.psis_loo`): the exact closed-form
   LOO of the conjugate models against its PSIS estimate, and `az.compare` over models.
2. **Conformal prediction sets** (`ppgpc.ConformalClassifier`): sets of labels that cover
   the true one with probability at least 1 - alpha whatever the probabilities' quality,
   beside the GP probabilities themselves; their sizes show how sharp the probabilities are.
3. **Calibration tests** on the UCI sets: the squared kernel calibration error with a
   p-value (`ppgpc.skce_test`) and equal-mass reliability bins with consistency bands
   (`ppgpc.evaluation.calibration.reliability_bands`).
4. **Post-hoc recalibration** (`ppgpc.fit_temperature`): a temperature-scaled scikit-learn
   `GaussianProcessClassifier` (Laplace approximation, one-vs-rest) beside the GP classifiers,
   raw and temperature-scaled.

**Data.** Wine (bundled) for sections 1, 2 and 4: the ILR paper's 50 stratified test points
(seed 0), and the other 128 points cut in half, stratified: 64 to fit on, 64 held out to
calibrate the conformal sets and the temperatures (never used for fitting). Section 3 uses
every UCI set it finds: the three bundled ones, and the large ones (letter, magic, htru2,
eeg) if their CSV files are in the folder named by `PPGPC_DATA_DIR` (`ppgpc.datasets`).

**Size.** The committed copy ran at full size (smoothing levels chosen by the estimators'
default closed-form leave-one-out search, 1000 resamples per test, all bundled sets).
`PPGPC_NOTEBOOK_SIZE=small` fixes epsilon and alpha_eps (ILR-GP's tau is still chosen by
leave-one-out), uses 200 resamples and only wine in section 3.
"""),
    code(SETUP + """

import arviz as az
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ppgpc import (ConformalClassifier, DirichletGPClassifier, ILRGPClassifier,
                   LogisticSoftmaxGPClassifier, fit_temperature, skce_test)
from ppgpc.datasets import (DatasetNotFoundError, available, load, paper_split,
                            train_validation_split)
# elpd_values: an ELPDData's numbers under one set of names, ArviZ 1's (elpd, se, p,
# elpd_i, pareto_k), whichever ArviZ is installed
from ppgpc.evaluation.arviz_objects import elpd_values
from ppgpc.evaluation.exports import calibration_table
from ppgpc.infer import exact_loo, psis_loo

N_RESAMPLES = 200 if SMALL else 1000
X, y = load("wine")
split = paper_split(X, y, seed=0)
X_rest = np.concatenate([split.X_train, split.X_val])
y_rest = np.concatenate([split.y_train, split.y_val])
halves = train_validation_split(X_rest, y_rest, seed=0, val_fraction=0.5)
X_fit, y_fit, X_cal, y_cal = halves.X_train, halves.y_train, halves.X_val, halves.y_val
X_test, y_test = split.X_test, split.y_test
print(f"fit {len(y_fit)}, calibrate {len(y_cal)}, test {len(y_test)} points; "
      f"classes {sorted(set(y.tolist()))}")"""),
    md("""
## The classifiers

Three ppgpc classifiers (ARD RBF kernel, inputs z-scored inside the estimator; Exact-ILR
and GPD with their defaults, type-II MAP and the leave-one-out search at full size; the
logistic-softmax model by CAVI rather than its default, NUTS, to keep the notebook quick)
and scikit-learn's GP classifier on z-scored inputs with a constant times ARD RBF kernel,
its hyperparameters by maximum marginal likelihood of its Laplace approximation. Each fit
prints its time as this run measured it.
"""),
    code("""
QUIET = dict(progress=False)
smoothing = (dict(ilr=dict(epsilon=0.99), gpd=dict(alpha_eps=0.01)) if SMALL
             else dict(ilr={}, gpd={}))
classifiers = {
    "Exact-ILR": ILRGPClassifier(**smoothing["ilr"], **QUIET),
    "GPD": DirichletGPClassifier(**smoothing["gpd"], **QUIET),
    "LSM (CAVI)": LogisticSoftmaxGPClassifier(inference="cavi", **QUIET),
    "sklearn GPC": make_pipeline(StandardScaler(), GaussianProcessClassifier(
        ConstantKernel() * RBF(np.ones(X.shape[1])), random_state=0)),
}
for name, clf in classifiers.items():
    start = time.perf_counter()
    with warnings.catch_warnings():
        # scikit-learn warns when an ARD lengthscale reaches its bound of 1e5: that input
        # is switched off, which is what ARD is for
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X_fit, y_fit)
    print(f"{name:12s} {time.perf_counter() - start:5.1f} s", flush=True)
classes = classifiers["Exact-ILR"].classes_
index = {name: np.searchsorted(classes, labels)              # labels as indices 0..C-1
         for name, labels in [("fit", y_fit), ("cal", y_cal), ("test", y_test)]}"""),
    md("""
## 1. Exact LOO against PSIS-LOO

Exact-ILR and GPD condition a Gaussian posterior on transformed targets, so with their point
hyperparameters the leave-one-out latent predictive has a closed form (Rasmussen and Williams
section 5.4.2); `exact_loo` pushes it through the link to log p(y_i | y_-i). `psis_loo`
estimates the same from the 1000 posterior draws by Pareto-smoothed importance sampling, with
the ratios taken from the Gaussian pseudo-likelihood the posterior was conditioned on. The
column "az.loo on the export" is ArviZ's `az.loo` on the export's categorical
log-likelihood, which uses that term as the ratio too: the wrong weights for these two
models. For LSM (CAVI: draws from a Gaussian variational posterior) only PSIS applies; its
Pareto k says how far to trust it.
"""),
    code("""
rows, elpd = {}, {}
for name in ["Exact-ILR", "GPD", "LSM (CAVI)"]:
    result = classifiers[name].result_
    psis = psis_loo(result)
    # elpd_values reads an ELPDData under either ArviZ's names: ArviZ 1's elpd, p and
    # elpd_i are ArviZ 0.2x's elpd_loo, p_loo and loo_i
    values = elpd_values(psis)
    bad = values.pareto_k > psis.good_k
    row = {"PSIS-LOO": values.elpd, "PSIS se": values.se,
           "max Pareto k": float(values.pareto_k.max()),
           "points with k above good": int(bad.sum())}
    if name != "LSM (CAVI)":
        exact = exact_loo(result)
        gap = elpd_values(exact).elpd_i - values.elpd_i    # pointwise log p(y_i | y_-i)
        row.update({"exact - PSIS, good-k points": gap[~bad].sum(),
                    "exact - PSIS, other points": gap[bad].sum()})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")                  # its Pareto-k warnings
            naive = az.loo(classifiers[name].to_inference_data())
        row.update({"exact LOO": elpd_values(exact).elpd,
                    "az.loo on the export": elpd_values(naive).elpd})
        elpd[name] = exact
    else:
        elpd[name] = psis
    rows[name] = row
pd.DataFrame(rows).T[["exact LOO", "PSIS-LOO", "az.loo on the export", "PSIS se",
                      "max Pareto k", "points with k above good",
                      "exact - PSIS, good-k points", "exact - PSIS, other points"]]"""),
    md("""
How to read it: PSIS-LOO is an estimate of the exact value. A point's Pareto k below the
"good" threshold (min(1 - 1 / log10 S, 0.7) for S draws; ArviZ's rule) says that its
estimate converges at the usual Monte Carlo rate, not that it is exact: when many points
sit near the threshold (a smoothing level close to 1 makes the pseudo-likelihood sharp and
the importance weights heavy-tailed), their small errors add up. The last two columns split
the gap between the exact and the PSIS value into the points with good k and the rest. For
these models the exact value is the one to use; PSIS is what remains for models without a
closed form, and its k values say how far to trust it. `az.loo` on the export weights the
draws by the categorical term, the wrong ratio for these two models (above); its column
shows how far that moves the estimate.
"""),
    md("""
`az.compare` ranks the models on these ELPD values (exact for the conjugate models, PSIS for
LSM); `se` is the standard error over the 64 points, `dse` that of the difference to the best.
"""),
    code("""
comparison = az.compare(elpd)
comparison"""),
    md("""
## 2. Conformal prediction sets beside the probabilities

`ConformalClassifier(est, alpha=0.1)` learns a score threshold on the 64 held-out calibration
points (adaptive prediction sets, APS, with randomised scores) and returns, for each test
point, the set of labels whose score is below it. Whatever the probabilities, the set holds
the true label with probability at least 90%, and at most 90% + 1/65 on average over
calibration sets. The probabilities decide how small the sets can be: sharp, well-ranked
probabilities give mostly single labels. Class-conditional sets (one threshold per class,
about 21 calibration points each) promise 90% for every class separately. With 50 test
points, a coverage estimate has a standard error of about 0.04. A randomised APS set can be
empty (a point whose most probable label alone scores above the threshold, after its
uniform draw); filling it with the top label would break the upper coverage bound, so
`ppgpc.evaluation.conformal` leaves it empty and the table counts such sets.
"""),
    code("""
rows = {}
for name, clf in classifiers.items():
    for conditional in (False, True):
        conf = ConformalClassifier(clf, alpha=0.1, score="aps", class_conditional=conditional,
                                   seed=0).calibrate(X_cal, y_cal)
        sets = conf.predict_sets(X_test)
        per_class = conf.coverage(X_test, y_test, per_class=True)
        rows[name, "per class" if conditional else "marginal"] = {
            "coverage": conf.coverage(X_test, y_test), "lowest class coverage": np.min(per_class),
            "mean set size": sets.size.mean(), "single label": np.mean(sets.size == 1),
            "empty": np.mean(sets.size == 0)}
pd.DataFrame(rows).T"""),
    md("The first ten test points: Exact-ILR's probabilities, its marginal set and the true "
       "label."),
    code("""
conf = ConformalClassifier(classifiers["Exact-ILR"], alpha=0.1, seed=0).calibrate(X_cal, y_cal)
sets = conf.predict_sets(X_test[:10]).sets
probs = classifiers["Exact-ILR"].predict_proba(X_test[:10])
table = pd.DataFrame(probs, columns=[f"p({c})" for c in classes])
table["set"] = [str([int(c) for c in classes[row]]) for row in sets]
table["label"] = y_test[:10]
table"""),
    md("""
## 3. Calibration tests on the UCI sets

For each data set found, the ILR paper's split (50 stratified test points, seed 0;
`ppgpc.experiments.run_split`): the bundled sets with Exact-ILR and GPD, the large ones (if
present) with their sparse versions (200 inducing points, the paper's smoothing levels,
2000 training points drawn at random, 1000 test points). On the test probabilities,
`skce_test` gives the squared kernel calibration error and the p-value of "these
probabilities are calibrated" by consistency resampling (labels drawn from the
probabilities themselves). With 50 test points the test has little power: a large p-value
means "no evidence of miscalibration", not "calibrated".
"""),
    code("""
from ppgpc.experiments import PAPER_SPARSE_OPTIONS, run_split

found, missing = [], []
for name in (["wine"] if SMALL else available()):
    try:
        load(name)
        found.append(name)
    except DatasetNotFoundError:
        missing.append(name)
print("data sets used:", found)
if missing:
    print("not found (set PPGPC_DATA_DIR to the folder of their CSV files to add them):", missing)

runs = {}
for name in found:
    if name in available(shipped=True):
        for model, options in [("Exact-ILR", smoothing["ilr"]), ("GPD", smoothing["gpd"])]:
            runs[name, model] = run_split(name, model, 0, **options, **QUIET)
    else:
        for model in ("Collapsed-ILR", "Sparse-GPD"):
            runs[name, model] = run_split(name, model, 0, n_test=1000, max_train=2000,
                                          **PAPER_SPARSE_OPTIONS[name, model], **QUIET)
    print(f"{name} done", flush=True)

rows = {}
for key, run in runs.items():
    test = skce_test(run.probs, run.y_test, n_resamples=N_RESAMPLES, seed=0)
    rows[key] = {"test points": len(run.y_test), "accuracy": run.accuracy, "NLL": run.nll,
                 "ECE": run.ece, "SKCE": test.statistic, "p-value": test.p_value}
pd.DataFrame(rows).T"""),
    md("""
Reliability diagrams with consistency bands: equal-mass bins of the top-label confidence,
each with at least 10 test points (so no bin's frequency rests on one point; the count is
printed at each point), and a grey bar per bin for the central 95% of its observed accuracy
if the probabilities were calibrated (Broecker and Smith 2007). Points outside their bars are
ringed in red; about one bin in twenty falls outside by chance.
"""),
    code("""
from ppgpc.evaluation.plotting import reliability_bands_diagram

keys = list(runs)
cols = 2
n_rows = -(-len(keys) // cols)
fig, axes = plt.subplots(n_rows, cols, figsize=(5.2 * cols, 4.4 * n_rows), squeeze=False)
for ax, key in zip(axes.flat, keys):
    reliability_bands_diagram(runs[key].probs, runs[key].y_test, min_count=10,
                              n_resamples=N_RESAMPLES, ax=ax, show_counts=False)
    ax.set_title(f"{key[0]}: {key[1]}")
for ax in axes.flat[len(keys):]:
    ax.set_visible(False)
plt.tight_layout()"""),
    md("""
## 4. Temperature scaling: a recalibrated scikit-learn GPC beside the GP classifiers

Temperature scaling replaces p by softmax(log p / T), with the one number T fitted by minimum
NLL on the 64 calibration points; it never changes the predicted label, only the confidence.
Each classifier gets its own T. The table scores the test points (50): accuracy, NLL, Brier,
top-label and class-wise ECE, and the SKCE test's p-value.
"""),
    code("""
test_probs, temperatures = {}, {}
for name, clf in classifiers.items():
    scaling = fit_temperature(clf.predict_proba(X_cal), index["cal"])
    temperatures[name] = scaling.temperature
    raw = clf.predict_proba(X_test)
    test_probs[name] = raw
    test_probs[f"{name} + T"] = scaling.transform(raw)
print("fitted temperatures:", {name: round(t, 3) for name, t in temperatures.items()})
table = calibration_table(test_probs, index["test"]).to_dataframe()
table["SKCE p-value"] = [skce_test(p, index["test"], n_resamples=N_RESAMPLES, seed=0).p_value
                         for p in test_probs.values()]
table"""),
    md("""
T > 1 means the classifier was over-confident on the calibration points, T < 1
under-confident. Temperature scaling needs held-out labels and fixes one global
confidence error; the GP classifiers' own probabilities need neither, and the checks above
(LOO, conformal set sizes, SKCE p-values and bands) are how to tell whether they need it.
"""),
]


# ------------------------------------------------------------------ 07 your own table
OWN_TABLE = [
    md("""
# Your own table: from a CSV file to checked, saved probabilities

The path to take with your own data, on a table small enough to run quickly: read a CSV
file with pandas, fit two ppgpc classifiers on the DataFrame with its string labels, check
that the fits converged, compare the models by leave-one-out, check the calibration of
their probabilities on held-out rows, turn the probabilities into conformal prediction
sets, and save a model, load it back and predict with it.

The table is Fisher's iris data (150 flowers, 4 measurements in cm, 3 species), written to
a CSV file first so that the notebook starts where your data would: replace the file and the
name of the target column with yours.

**Size.** Iris is small, so both sizes fit the same models on the same rows;
`PPGPC_NOTEBOOK_SIZE=small` only draws fewer resamples for the consistency bands of the
reliability diagram.
"""),
    code(SETUP + """

import shutil
import tempfile
from pathlib import Path

import arviz as az
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split

from ppgpc import ConformalClassifier, DirichletGPClassifier, ILRGPClassifier
from ppgpc.evaluation.exports import calibration_table
from ppgpc.evaluation.plotting import reliability_bands_grid
from ppgpc.infer import exact_loo

N_RESAMPLES = 200 if SMALL else 1000"""),
    md("""
## 1. A CSV file, read as you would read yours

The cell writes iris, with the species as strings, to a CSV file in a new temporary folder
(its path is not printed: it differs on every machine), then reads the file back with
pandas.
"""),
    code("""
iris = load_iris(as_frame=True)
frame = iris.frame.drop(columns="target")
frame["species"] = iris.target_names[iris.target]          # 'setosa', 'versicolor', ...
folder = Path(tempfile.mkdtemp())
frame.to_csv(folder / "iris.csv", index=False)

table = pd.read_csv(folder / "iris.csv")                   # from here on, as with your file
print(f"{len(table)} rows, columns {list(table.columns)}")
table.head()"""),
    md("""
## 2. Split the rows

The inputs are every column but the target, and the labels stay strings. A stratified split
(scikit-learn's `train_test_split`, `random_state=0`) keeps 60% of the rows to fit on and
holds out 40%; the held-out rows are split in half again, one half to calibrate the
conformal sets of section 7, the other to test them. The calibration check of section 6 uses
all the held-out rows, none of which the models saw.
"""),
    code("""
TARGET = "species"
X, y = table.drop(columns=TARGET), table[TARGET]
X_train, X_held, y_train, y_held = train_test_split(X, y, test_size=0.4, stratify=y,
                                                    random_state=0)
X_cal, X_test, y_cal, y_test = train_test_split(X_held, y_held, test_size=0.5,
                                                stratify=y_held, random_state=0)
print(f"fit on {len(y_train)} rows, calibrate on {len(y_cal)}, test on {len(y_test)}; "
      f"classes in the fitting rows: {y_train.value_counts().sort_index().to_dict()}")"""),
    md("""
## 3. Fit two classifiers

Both take the DataFrame and the string labels as they are: `classes_` holds the sorted
labels, and the column names are kept (`feature_names_in_`) and required again, in the same
order, for prediction. With their defaults, `ILRGPClassifier` and `DirichletGPClassifier`
z-score the inputs, use an ARD RBF kernel with type-II MAP hyperparameters and the exact
Gaussian posterior, and choose their smoothing levels (epsilon and the noise tolerance tau
for ILR-GP, alpha_eps for GPD) by closed-form leave-one-out NLL. `progress=False` keeps the
fits quiet; each prints its time as this run measured it.
"""),
    code("""
classifiers = {"Exact-ILR": ILRGPClassifier(progress=False),
               "GPD": DirichletGPClassifier(progress=False)}
for name, clf in classifiers.items():
    start = time.perf_counter()
    clf.fit(X_train, y_train)
    print(f"{name:9s} fitted in {time.perf_counter() - start:5.1f} s, "
          f"classes {clf.classes_.tolist()}")
ilr, gpd = classifiers["Exact-ILR"], classifiers["GPD"]
classes = ilr.classes_
print(f"Exact-ILR chose epsilon = {ilr.epsilon_:g} and tau = {ilr.tau_:g}; "
      f"GPD chose alpha_eps = {gpd.alpha_eps_:g}")"""),
    md("""
## 4. Did the fits converge?

Every fit keeps a report, `convergence_`: whether each optimiser stopped at its tolerance,
the largest Cholesky jitter, and whether a searched value lies at the edge of its grid (for
samplers also R-hat, effective sample sizes and divergences). `fit` warns once when the
report finds a problem; `converged` and `summary` tell the same on demand.
"""),
    code("""
for name, clf in classifiers.items():
    report = clf.convergence_
    print(f"{name}: converged = {report.converged}")
    print(f"    {report.summary(estimator=True)}")"""),
    md("""
The fitted hyperparameters by name (`hyperparameters_`). With a DataFrame, each column's
ARD lengthscale is an entry of its own, in the z-scored units the model was fitted in: a
short lengthscale marks a column along which the probabilities change quickly.
"""),
    code("""
pd.DataFrame({name: {key: np.round(np.asarray(value), 3).tolist()
                     for key, value in clf.hyperparameters_.items()}
              for name, clf in classifiers.items()})"""),
    md("""
## 5. Compare the models by leave-one-out

ILR-GP and GPD condition a Gaussian posterior on transformed labels, so their leave-one-out
predictive has a closed form: `ppgpc.infer.exact_loo` gives log p(y_i | y_-i) for every
fitting row, the log-probability of its label under the fit to the other rows (the
hyperparameters and smoothing levels held at the fitted ones), and `az.compare` ranks the
models by the sum (the ELPD; higher is better), with standard errors over the rows. (For
these two models `az.loo` on the ArviZ export would weight the draws by the wrong
likelihood; notebooks 04 and 06 show why.)
"""),
    code("""
elpd = {name: exact_loo(clf.result_) for name, clf in classifiers.items()}
az.compare(elpd)"""),
    md("""
## 6. Are the probabilities calibrated?

On the held-out rows: accuracy, NLL, Brier score and expected calibration error per model
(`calibration_table`), and the reliability diagram that `ppgpc compare` draws
(`reliability_bands_grid`): equal-mass bins of the top-label confidence with at least 10
rows each, the count printed at each point, and a grey bar per bin for the central 95% of
its accuracy if the probabilities were calibrated; a point outside its bar is ringed in
red. With 60 rows the bins are few and wide.
"""),
    code("""
held_codes = np.searchsorted(classes, y_held.to_numpy())   # labels as indices into classes_
held_probs = {name: clf.predict_proba(X_held) for name, clf in classifiers.items()}
display(calibration_table(held_probs, held_codes))
fig = reliability_bands_grid({name: (p, held_codes) for name, p in held_probs.items()},
                             min_count=10, n_resamples=N_RESAMPLES)"""),
    md("""
## 7. Conformal prediction sets

`ConformalClassifier(clf, alpha=0.1)` learns a score threshold on the 30 calibration rows
(adaptive prediction sets with randomised scores) and returns, for each test row, a set of
labels that holds the true one with probability at least 90% whatever the quality of the
probabilities, and at most 90% + 1/31 on average over calibration sets. Sharp, well-ranked
probabilities make the sets small. With 30 test rows a coverage estimate has a standard
error of about 0.05. A set can be empty (notebook 06 says when); the table counts them.
"""),
    code("""
rows, conformal = {}, {}
for name, clf in classifiers.items():
    conformal[name] = ConformalClassifier(clf, alpha=0.1, seed=0).calibrate(X_cal, y_cal)
    sets = conformal[name].predict_sets(X_test)
    rows[name] = {"coverage": conformal[name].coverage(X_test, y_test),
                  "mean set size": sets.size.mean(), "single label": np.mean(sets.size == 1),
                  "empty": np.mean(sets.size == 0)}
pd.DataFrame(rows).T"""),
    md("The first eight test rows: Exact-ILR's probabilities, its set and the true label."),
    code("""
first = X_test.iloc[:8]
shown = pd.DataFrame(ilr.predict_proba(first), columns=[f"p({c})" for c in classes])
shown["set"] = [", ".join(classes[row]) for row in conformal["Exact-ILR"].predict_sets(first).sets]
shown["label"] = y_test.iloc[:8].to_numpy()
shown"""),
    md("""
## 8. The probabilities of each posterior draw

`predict_proba` averages the class probabilities over posterior draws; `predict_proba_draws`
returns them draw by draw, shape (draws, rows, classes), so the spread of a row's
probabilities can be read off. Here: the mean and the 5% and 95% quantiles over the draws of
the probability of each test row's predicted class.
"""),
    code("""
draws = ilr.predict_proba_draws(X_test)
print("predict_proba_draws(X_test).shape:", draws.shape, "(draws, rows, classes)")
top = draws.mean(axis=0).argmax(axis=1)                    # each row's predicted class
p_top = draws[:, np.arange(len(top)), top]                 # (draws, rows)
pd.DataFrame({"predicted": classes[top], "mean": p_top.mean(axis=0),
              "5%": np.quantile(p_top, 0.05, axis=0), "95%": np.quantile(p_top, 0.95, axis=0),
              "label": y_test.to_numpy()}).head(8)"""),
    md("""
## 9. Save, load and predict

`save` writes the fitted estimator to a folder (netCDF arrays and JSON settings, no
pickle), and `ppgpc.load` reads it back: the loaded model predicts exactly what the saved
one did, and still requires the same columns.
"""),
    code("""
ilr.save(folder / "ilr-model")                 # returns the folder written (a local path)
loaded = ppgpc.load(folder / "ilr-model")
same = np.array_equal(loaded.predict_proba(X_test), ilr.predict_proba(X_test))
print(f"loaded a {type(loaded).__name__}: classes {loaded.classes_.tolist()}, "
      f"epsilon {loaded.epsilon_:g}, columns {list(loaded.feature_names_in_)}")
print("probabilities equal to the original's:", same)
print("predicted labels of the first five test rows:",
      loaded.predict(X_test.iloc[:5]).tolist())"""),
    md("The temporary folder, with the CSV file and the saved model, is removed at the end."),
    code("shutil.rmtree(folder)"),
]



PYMC = [
    md("""
# ppgpc beside PyMC 6: one posterior, two samplers

The same Gaussian-process model fitted twice on the same data: by ppgpc, whose ILR-GP
posterior is exact (a closed form, sampled), and by a PyMC 6 model of the same equations
sampled with PyMC's NUTS. ArviZ then reads both posteriors side by side: its summary, and
ppgpc's `compare_posteriors` (standardised mean differences, sd ratios and an energy test
per variable). If the two agree within their Monte Carlo error, both are right.

**Environment.** PyMC 6 needs Python 3.12 or later and ArviZ 1; ppgpc installs ArviZ 1 on
those Pythons, so both live in one environment:

    pip install . "pymc>=6"

On Python 3.11 (ArviZ 0.2x) PyMC 6 cannot be installed: the PyMC cells then say so and the
rest of the notebook still runs. The committed copy ran on Python 3.12 with PyMC 6.
"""),
    code(SETUP + """

import importlib.util

import arviz as az

from ppgpc import compare_posteriors
from ppgpc.datasets.synthetic import mixture_problem
from ppgpc.evaluation.arviz_objects import ARVIZ_1
from ppgpc.gp.kernels import gram, kernel_params
from ppgpc.infer import fit, to_inference_data

HAVE_PYMC = importlib.util.find_spec("pymc") is not None
print(f"ArviZ {az.__version__} ({'1.x: DataTree' if ARVIZ_1 else '0.2x: InferenceData'}), "
      f"PyMC {'installed' if HAVE_PYMC else 'not installed'}")
DRAWS = 300 if SMALL else 1000"""),
    md("""
## ppgpc: the exact ILR-GP posterior

Three overlapping classes in two dimensions, 40 training points. The driver fits the
kernel hyperparameters by type-II maximum likelihood and then samples the exact posterior
of the latent f (40 points x 2 ILR coordinates) given them: p(f | z, theta_hat), with z the
ILR targets of the smoothed labels and sigma the Proposition 1 noise level
(docs/math.md, section 1).
"""),
    code("""
problem = mixture_problem(40, 10, num_classes=3, sigma=0.5, seed=0)
exact = fit("ilr_gp", problem.X_train, problem.y_train, method="exact",
            num_draws=4 * DRAWS, seed=0)
theta = {name: np.asarray(value[0, 0]) for name, value in exact.hypers.items()}
print("hyperparameters:", {name: np.round(value, 3).tolist() for name, value in theta.items()},
      f"({exact.info.hyperparameters})")
idata_ppgpc = to_inference_data(exact)
print(type(idata_ppgpc).__name__, "with posterior variables",
      sorted(idata_ppgpc.posterior.data_vars))"""),
    md("""
## PyMC: the same model, sampled by NUTS

The model of ppgpc's `latent_model` written in PyMC: f = chol(K) v with v ~ N(0, I) (the
whitened parametrisation NUTS likes), and each target z_i ~ N(f_i, sigma^2). K, the noise
and the targets are ppgpc's own: the Gram matrix at the fitted hyperparameters, and the
prepared data of the fit. Only the sampler differs.
"""),
    code("""
if HAVE_PYMC:
    import pymc as pm
    import pytensor.tensor as pt

    data = exact.data
    K = np.asarray(gram(exact.kernel, kernel_params(theta), data.X))
    chol = np.linalg.cholesky(K + 1e-9 * np.eye(len(K)))
    targets = np.asarray(data.targets)
    N, L = targets.shape
    with pm.Model(coords={"obs": np.arange(N), "latent": np.arange(L)}):
        v = pm.Normal("v", 0.0, 1.0, dims=("latent", "obs"))
        f = pm.Deterministic("f", pt.dot(chol, v.T), dims=("obs", "latent"))
        pm.Normal("z", mu=f, sigma=float(np.sqrt(data.noise_var)), observed=targets,
                  dims=("obs", "latent"))
        start = time.perf_counter()
        idata_pymc = pm.sample(draws=DRAWS, tune=DRAWS, chains=4, random_seed=0,
                               progressbar=False)
    print(f"PyMC NUTS: {time.perf_counter() - start:.1f} s; returned a "
          f"{type(idata_pymc).__name__}")
else:
    idata_pymc = None
    print("PyMC is not installed (it needs Python >= 3.12): pip install . 'pymc>=6'")"""),
    md("""
## The two posteriors in ArviZ

Both are ArviZ objects of the same kind, with f named by the same dims, so ArviZ's summary
reads them alike: NUTS's chains should pass R-hat below 1.01, and the means and standard
deviations of each f should agree with the exact ones within their Monte Carlo errors.
`compare_posteriors` puts a number on "agree": its `different` flag is raised only when the
energy test rejects at the family-wise level 0.01.
"""),
    code("""
if idata_pymc is not None:
    exact_summary = az.summary(idata_ppgpc, var_names=["f"])
    nuts_summary = az.summary(idata_pymc, var_names=["f"])
    print(f"PyMC NUTS: max R-hat {nuts_summary['r_hat'].max():.3f}, "
          f"min bulk ESS {nuts_summary['ess_bulk'].min():.0f}")
    comparison = compare_posteriors(idata_ppgpc, idata_pymc, var_names=["f"],
                                    labels=("ppgpc exact", "PyMC NUTS"))
    display(comparison.table)
    side_by_side = pd.DataFrame({"exact mean": exact_summary["mean"],
                                 "NUTS mean": nuts_summary["mean"],
                                 "exact sd": exact_summary["sd"],
                                 "NUTS sd": nuts_summary["sd"]})
    display(side_by_side.head(6))"""),
    code("""
if idata_pymc is not None:
    comparison.plot()
    plt.show()"""),
    md("""
Reading it: the largest standardised mean difference is a few hundredths of a posterior
standard deviation and the energy test does not reject, so PyMC's NUTS and ppgpc's closed
form describe the same posterior. The closed form needs no sampler and no convergence
check; the PyMC model is the one to extend (another likelihood, a hierarchical prior), and
ppgpc's posterior is the reference it must reproduce where the two models coincide.
"""),
]

NOTEBOOKS = {
    "01_quickstart.ipynb": QUICKSTART,
    "02_toy_mixture.ipynb": TOY,
    "03_mcmc_vs_conjugate.ipynb": MCMC,
    "04_arviz_diagnostics.ipynb": ARVIZ,
    "05_uci_calibration.ipynb": UCI,
    "06_checking_probabilities.ipynb": CHECKS,
    "07_your_own_table.ipynb": OWN_TABLE,
    "08_beside_pymc.ipynb": PYMC,
}


def build(name: str) -> nbformat.NotebookNode:
    nb = new_notebook(cells=NOTEBOOKS[name])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def execute(nb: nbformat.NotebookNode, size: str, timeout: int = 3600) -> float:
    """Run ``nb`` in place at ``size`` in a kernel of this interpreter; return seconds."""
    from nbclient import NotebookClient

    os.environ["PPGPC_NOTEBOOK_SIZE"] = size
    os.environ.setdefault("MPLBACKEND", "Agg")
    start = time.perf_counter()
    NotebookClient(nb, kernel_name="python3", timeout=timeout,
                   resources={"metadata": {"path": str(HERE)}}).execute()
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--execute", nargs="*", default=None,
                        help="notebook name prefixes to execute (none given: all)")
    parser.add_argument("--size", default="full", choices=["full", "small"])
    args = parser.parse_args(argv)
    for name in NOTEBOOKS:
        path = HERE / name
        nb = build(name)
        run = args.execute is not None and (not args.execute
                                            or any(name.startswith(p) for p in args.execute))
        if run:
            print(f"executing {name} at size {args.size} ...", flush=True)
            print(f"  {execute(nb, args.size):.0f} s", flush=True)
        elif path.exists():
            continue  # keep the executed copy; pass --execute to rebuild it
        nbformat.write(nb, path)
        print(f"wrote {path.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
