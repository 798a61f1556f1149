"""The docs site: every public name has an API entry, and the site builds.

The fast test reads ``docs/api.rst`` as text (no Sphinx needed), so a new public name
without API docs fails the default test run. The slow one builds the whole site, gallery
included, exactly as CI does.
"""

import importlib
import os
import pathlib
import pkgutil
import re
import subprocess
import sys
import types

import pytest

import intrinsic_rank

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
API_PAGES = sorted(DOCS.glob("api*.rst"))
# The command line is documented by its --help and the README, not the API pages.
NOT_API = {"intrinsic_rank.cli"}


def public_modules():
    """``intrinsic_rank`` and each of its sub-modules whose name has no leading underscore."""
    names = ["intrinsic_rank"]
    for info in pkgutil.iter_modules(intrinsic_rank.__path__, "intrinsic_rank."):
        if not info.name.rpartition(".")[2].startswith("_") and info.name not in NOT_API:
            names.append(info.name)
    return names


def api_entries():
    """``{module: names}`` listed in the API pages, and the modules given a section.

    A name counts when it is an ``autosummary`` entry or a ``py:data``/``py:function``/…
    directive under ``.. currentmodule:: module``.
    """
    listed, sections = {}, set()
    for page in API_PAGES:
        module, in_autosummary = None, False
        for line in page.read_text().splitlines():
            if m := re.match(r"\.\. (?:currentmodule|automodule|module|py:module):: (\S+)", line):
                module, in_autosummary = m[1], False
                if not line.startswith(".. currentmodule"):
                    sections.add(module)
            elif line.startswith(".. autosummary::"):
                in_autosummary = True
            elif m := re.match(r"\.\. (?:py:)?(?:data|function|class|exception|auto\w+):: (\w+)",
                               line):
                listed.setdefault(module, set()).add(m[1])
                in_autosummary = False
            elif in_autosummary and (m := re.fullmatch(r"   ([A-Za-z_]\w*)", line)):
                listed.setdefault(module, set()).add(m[1])
            elif line and not line.startswith(" "):
                in_autosummary = False
    return listed, sections


def test_api_pages_parse():
    listed, sections = api_entries()
    assert API_PAGES, "no docs/api*.rst"
    assert "AttentionRankEstimator" in listed["intrinsic_rank"]
    assert "make_attention_task" in listed["intrinsic_rank.datasets"]
    assert {"intrinsic_rank", "intrinsic_rank.spectral"} <= sections


@pytest.mark.parametrize("module_name", public_modules())
def test_every_public_name_is_in_the_api_pages(module_name):
    """Each name of ``__all__`` is listed under its module, is a sub-module with its own
    section, or is the same object as a name listed elsewhere (a re-export such as
    ``intrinsic_rank.estimators.AttentionRankEstimator``)."""
    listed, sections = api_entries()
    module = importlib.import_module(module_name)
    assert module_name in sections, f"docs/api.rst has no section for {module_name}"
    documented_objects = [
        getattr(importlib.import_module(mod), name)
        for mod, names in listed.items() for name in names
        if hasattr(importlib.import_module(mod), name)
    ]
    missing = []
    for name in module.__all__:
        obj = getattr(module, name)
        if name in listed.get(module_name, ()):
            continue
        if isinstance(obj, types.ModuleType) and obj.__name__ in sections:
            continue
        if isinstance(obj, (type, types.FunctionType)) and any(
            obj is other for other in documented_objects
        ):
            continue
        missing.append(name)
    assert not missing, f"public names of {module_name} missing from docs/api.rst: {missing}"


def test_api_pages_list_only_public_names():
    """No stale or private entry: everything listed is in its module's ``__all__``."""
    listed, _ = api_entries()
    stale = {
        module: sorted(names - set(importlib.import_module(module).__all__))
        for module, names in listed.items()
    }
    assert not any(stale.values()), stale


@pytest.mark.slow
def test_docs_site_builds(tmp_path):
    """The CI command: warnings are errors, every example runs into the gallery."""
    for package in ("sphinx", "sphinx_gallery", "numpydoc", "myst_parser",
                    "pydata_sphinx_theme"):
        pytest.importorskip(package)
    out = tmp_path / "html"
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("INTRINSIC_RANK_TEST_THREADS", "1"),
               MPLBACKEND="Agg")
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q",
         str(DOCS), str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )
    assert build.returncode == 0, build.stderr[-5000:]

    index = (out / "index.html").read_text()
    for target in ("quickstart.html", "attention_rank_estimator.html", "api.html",
                   "auto_examples/index.html", "results.html"):
        assert f'href="{target}' in index, target
    examples = sorted((ROOT / "examples").glob("*.py"))
    assert len(examples) >= 4
    gallery = (out / "auto_examples" / "index.html").read_text()
    for script in examples:
        page = out / "auto_examples" / f"{script.stem}.html"
        assert page.exists(), page
        assert f"{script.stem}.html" in gallery
        # the gallery shows what the script printed, so it really ran
        assert "Out:" in page.read_text() or "sphx-glr-script-out" in page.read_text()
    api = (out / "api.html").read_text()
    assert "generated/intrinsic_rank.AttentionRankEstimator.html" in api
    assert (out / "generated" / "intrinsic_rank.spectral.energy_effective_rank.html").exists()
