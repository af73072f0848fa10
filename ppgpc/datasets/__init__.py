"""Data for the classifiers: the UCI datasets, the ILR paper's split protocol, feature scaling and
synthetic problems.

Three small datasets ship with the package (``wine``, ``glass``, ``thyroid``). Four larger
ones (``letter``, ``magic``, ``htru2``, ``eeg``) are read from a folder given as
``data_dir`` or by the ``PPGPC_DATA_DIR`` environment variable. Every file is a CSV with
one header row, the feature columns, then a final ``label`` column. Provenance, checksums
and licence (CC BY 4.0): ``ppgpc/datasets/data/README.md``.

* ``registry``: what can be loaded and ``load``;
* ``splits``: the paper's train/validation/test splits and stratified folds;
* ``scaling``: z-scores (and robust or min-max scaling) fitted on training inputs;
* ``synthetic``: Gaussian mixtures and the logistic-softmax toy problems of the notebooks;
* ``tables``: a user's own CSV table of features and labels (``read_table``).

Example:
    >>> from ppgpc import datasets
    >>> X, y = datasets.load("glass")
    >>> X.shape, sorted(set(y.tolist()))
    ((214, 9), [1, 2, 3, 5, 6, 7])
    >>> split = datasets.paper_split(X, y, seed=0)
    >>> split.X_test.shape, split.X_val.shape, split.X_train.shape
    ((50, 9), (16, 9), (148, 9))
    >>> X_train, X_val, X_test = datasets.standardize(split.X_train, split.X_val, split.X_test)
"""

from ppgpc.datasets.registry import (DATA_DIR_ENV, DATASETS, DatasetFormatError, DatasetInfo,
                                     DatasetNotFoundError, available, load)
from ppgpc.datasets.scaling import SCALING_METHODS, Standardizer, standardize
from ppgpc.datasets.tables import Table, read_features, read_table
from ppgpc.datasets.splits import (Split, SplitIndices, TrainValidationSplit, paper_split,
                                   paper_split_indices, stratified_folds, train_validation_split)

__all__ = ["DATASETS", "DATA_DIR_ENV", "DatasetFormatError", "DatasetInfo", "DatasetNotFoundError",
           "available", "load", "Split", "SplitIndices", "TrainValidationSplit", "paper_split",
           "paper_split_indices", "stratified_folds", "train_validation_split",
           "SCALING_METHODS", "Standardizer", "standardize", "Table", "read_table",
           "read_features"]
