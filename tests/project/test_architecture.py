"""The package's layering is a contract: checked here and by ``lint-imports`` in CI.

* import-linter's contracts in ``pyproject.toml`` (layers, torch-free numpy rooms,
  private modules only inside their package, no cycles between siblings) are kept;
* no private *name* is imported from another package (import-linter checks
  private modules, not ``from package import _name``);
* the numpy rooms import and compute with torch blocked: the one place the suite checks that
  they are torch-free (CI also runs their doctests in an environment without torch).
"""

import ast
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "intrinsic_rank")


def _modules():
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                yield (rel[: -len(".__init__")] if rel.endswith(".__init__") else rel), path


def _room(module):
    """The top-level room of a module: ``intrinsic_rank.nn._heads`` -> ``nn``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imported_names(module, path):
    """``(target module, name, line)`` for every ``from ... import name`` in ``path``."""
    is_package = path.endswith("__init__.py")
    base = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base[: len(base) - (node.level - 1)]
                target = ".".join(parts + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "intrinsic_rank":
                for alias in node.names:
                    yield target, alias.name, node.lineno


def test_import_linter_contracts_are_kept():
    pytest.importorskip("importlinter")
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True))")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "Contracts: 6 kept, 0 broken." in run.stdout


#: the private modules every room may import from: the checks, the table of packaged
#: models (which imports only typing, so that ``--help`` can list them without torch),
#: the stop signals and the atomic writer (the standard library only) and the version
#: (which imports nothing)
_BASE_HOMES = ("intrinsic_rank._validation", "intrinsic_rank._packaged_models",
               "intrinsic_rank._interrupts", "intrinsic_rank._atomic", "intrinsic_rank._lazy",
               "intrinsic_rank._version")


def _private(part):
    return part.startswith("_") and not part.startswith("__")


def test_no_private_name_crosses_a_package():
    offences = []
    for module, path in _modules():
        for target, name, line in _imported_names(module, path):
            if target in _BASE_HOMES or _room(target) == _room(module):
                continue  # the base homes are for every room; a room's own privates
            if _private(name) or any(_private(part) for part in target.split(".")[1:]):
                offences.append(f"{os.path.relpath(path, ROOT)}:{line}: "
                                f"from {target} import {name}")
    assert not offences, "private names imported across packages:\n" + "\n".join(offences)


def test_numpy_rooms_work_without_torch():
    code = textwrap.dedent(
        """
        import sys
        BLOCKED = {"torch", "skorch", "transformers"}

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"{name} is blocked in this test")

        sys.meta_path.insert(0, Block())
        import math
        import numpy as np
        import intrinsic_rank
        from intrinsic_rank import bounds, codes, datasets, metrics, operator_fit, spectral
        X, Y, truth = datasets.make_fixed_operator_task(
            n_samples=64, seq_len=6, d=4, rank=2, noise=0.0, random_state=0,
            return_info=True)
        fit = operator_fit.fit_fixed_operator(X, Y, value_map=truth.value_map)
        print(spectral.numerical_rank(np.diag([3.0, 1.0, 0.0])),
              round(bounds.tail_energy([3.0, 1.0], 1), 6), fit.noise_aware_rank)
        # one call into each numpy room the bounds refinements and metrics hold
        print(bounds.precision_from_dtype("torch.float16") == 2 ** -10,
              bounds.precision_for("paper") == 2 ** -10,
              round(math.exp(bounds.cone_log_fraction(math.pi / 2, 3)), 6),
              bounds.cell_proportions(np.array([0, 0, 1]), 3)["n_empty"],
              codes.__name__, metrics.__name__)
        bounds.hidden_state_geometry([[1.0, 2.0]])
        assert not BLOCKED & set(sys.modules), BLOCKED & set(sys.modules)
        """
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["2", "1.0", "2", "True", "True", "0.5", "1",
                                  "intrinsic_rank.codes", "intrinsic_rank.metrics"]
