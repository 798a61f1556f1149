"""The sweep command's model file: where ``--save-model`` may write, and the write itself.

Reading data files and the model file format live with the estimators
(:mod:`intrinsic_rank.estimators`: ``load_xy``, ``load_model_file``, re-exported here);
what is left is the command's side: the rule for its ``--save-model`` path
(:func:`check_model_path`) and :func:`save_model_file`, the estimators' writer inside
the command's output stage.
"""

import functools
import os

from ... import estimators
from ..._validation import check_output_file
from ...estimators import MODEL_FORMAT, ModelVersionWarning, load_model_file, load_xy
from ..runner import atomic_file

__all__ = ["MODEL_FORMAT", "ModelVersionWarning", "check_model_path", "load_model_file",
           "load_xy", "save_model_file"]

SWEEP_FILES = ("sweep.json", "sweep.png", "sweep.csv", ".sweep.files.json")
"""The files ``intrinsic-rank sweep`` writes in ``--out``, its record of them included
(``--save-model`` may not be one)."""


def save_model_file(estimator, path):
    """Store a fitted estimator in ``path`` (:func:`intrinsic_rank.estimators.save_model_file`).

    The same file, written through the runner's atomic files: inside a command's
    output stage it is renamed in with the run's other files, and a run that fails
    or is interrupted first leaves ``path`` as it was.

    Parameters
    ----------
    estimator : BaseEstimator
        A fitted scikit-learn estimator.
    path : str or path-like

    Returns
    -------
    path : str

    Examples
    --------
    >>> import tempfile
    >>> from sklearn.linear_model import LinearRegression
    >>> model = LinearRegression().fit([[0.0], [1.0]], [0.0, 2.0])
    >>> path = save_model_file(model, os.path.join(tempfile.mkdtemp(), "m.joblib"))
    >>> load_model_file(path).coef_
    array([2.])
    """
    return estimators.save_model_file(
        estimator, path, atomic_file=functools.partial(atomic_file, companion=False))


def check_model_path(path, out, own_files=SWEEP_FILES):
    """``--save-model``: a file that can be written, checked before any work.

    Not empty, not a folder, not one of the command's own files in ``out``
    (``OUT/sweep.json`` would be overwritten by the JSON, ``OUT/.sweep.files.json``
    by the folder's record of its files), in a folder that
    exists or can be created where a file can really be written, with free
    space (:func:`~intrinsic_rank._validation.check_output_file`).

    Parameters
    ----------
    path : str
    out : str
        ``--out``.
    own_files : sequence of str, default=SWEEP_FILES

    Returns
    -------
    path : str

    Raises
    ------
    ValueError
        One line starting with ``--save-model``.

    Examples
    --------
    >>> import tempfile
    >>> out = tempfile.mkdtemp()
    >>> check_model_path(os.path.join(out, "sweep.csv"), out)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --save-model '...sweep.csv' is one of this run's own output files ...
    """
    return check_output_file(path, "--save-model",
                             reserved=[os.path.join(out, name) for name in own_files])
