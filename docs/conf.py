"""Sphinx configuration of the intrinsic_rank docs site.

Build (offline, a few minutes on 2 cores; the gallery runs every script in examples/):

    python -m sphinx -b html -W --keep-going docs docs/_build/html
    python scripts/check_docs_site.py docs/_build/html   # links, images, gallery figures

Outputs that are generated, never edited: docs/_build/, docs/generated/ (autosummary
stubs) and docs/auto_examples/ (the gallery). ``-D sphinx_gallery_conf.plot_gallery=0``
skips running the examples for a quick look at the text.
"""

import importlib
import inspect
import os
import pathlib
import pkgutil
import sys

DOCS = pathlib.Path(__file__).resolve().parent
EXAMPLES = DOCS.parent / "examples"
# Import the package from this checkout even if it was not installed.
sys.path.insert(0, str(DOCS.parent))
# The examples train small torch models; one thread is the fast setting on a shared
# 2-core machine and keeps the gallery's numbers the same from build to build.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import torch  # noqa: E402
from sphinx.pycode import ModuleAnalyzer  # noqa: E402

import intrinsic_rank  # noqa: E402

project = "intrinsic_rank"
author = "the intrinsic_rank developers"
copyright = "the intrinsic_rank developers"
version = release = intrinsic_rank.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints", "auto_examples/*.ipynb",
                    "auto_examples/*.py", "auto_examples/*.zip"]
templates_path = ["_templates"]

# Broken cross-references to our own names fail the build; names from numpy, torch,
# scikit-learn and the standard library have no inventory offline (no intersphinx),
# so they are let through as plain text.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|np|scipy|torch|sklearn|skorch|matplotlib|pandas|transformers)\b.*"),
    (r"py:.*", r"(collections|pathlib|os|typing)\..*"),
    (r"py:class", r"(int|float|bool|str|dict|list|tuple|callable|object|None|slice|"
                  r"bytes|type|array-like|array_like|optional|default|Generator)"),
]

# -- autodoc / autosummary / numpydoc ------------------------------------------------
autosummary_generate = True
autodoc_typehints = "none"
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True


# -- MyST: the user guides stay Markdown, links between .md files resolve ------------
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

# -- sphinx-gallery ------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    # Run every script, not only plot_*.py: each must finish, so a broken example
    # fails the build.
    "filename_pattern": r"\.py$",
    "abort_on_example_error": True,
    "doc_module": ("intrinsic_rank",),
    "reference_url": {"intrinsic_rank": None},
    "backreferences_dir": "generated/backreferences",
    "download_all_examples": False,
    "remove_config_comments": True,
    "min_reported_time": 1,
}

# -- HTML ----------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "intrinsic_rank"
html_static_path = ["_static"]
html_css_files = ["intrinsic_rank.css"]
# The navbar holds the root toctree of index.md: six short titles (Quick start, User guide,
# Examples, API, Results, Architecture), one row at 1280 px. The guides sit under
# user_guide.md and the API's module pages under api.rst, so each shows in the sidebar.
html_theme_options = {
    "navigation_with_keys": False,
    "header_links_before_dropdown": 6,
    "navbar_align": "left",
    "show_nav_level": 1,
    "show_toc_level": 2,
    # Example pages give the page-toc's width to the code, its output and the figures
    # (exact page names: the theme warns when two wildcard patterns match one page).
    "secondary_sidebar_items": {
        "**": ["page-toc"],
        **{f"auto_examples/{script.stem}": [] for script in sorted(EXAMPLES.glob("*.py"))},
    },
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_show_sourcelink = False
# The top-level pages without children of their own (no toctree) would show an empty
# navigation sidebar; they get the full width instead. The section pages (user guide,
# API) keep the sidebar that lists their pages.
html_sidebars = {page: [] for page in ("quickstart", "results", "architecture")}


# -- hooks -----------------------------------------------------------------------


def _skip_foreign_members(app, what, name, obj, skip, options):
    """Leave out members whose text would be another library's, not ours.

    scikit-learn's metadata-routing methods (``set_fit_request`` …) are added to every
    estimator class and cross-reference scikit-learn's own guide; overrides of torch's
    ``Module`` methods that carry no docstring of their own (``train``) would show
    torch's text, which does not describe what the override does.
    """
    if name == "get_metadata_routing" or (name.startswith("set_") and name.endswith("_request")):
        return True
    if hasattr(torch.nn.Module, name) and not getattr(obj, "__doc__", None):
        return True
    return skip


def _doc_comment_of_reexported_data(app, what, name, obj, options, lines):
    """Document a constant by its ``#:`` comment, never by its type's docstring.

    autodoc reads ``#:`` comments only in the module a name is documented under
    (``intrinsic_rank.datasets``), while our constants are defined in its private
    modules (``intrinsic_rank.datasets._tokens``); without a comment it falls back to
    the docstring of the value's type (``str``, ``tuple``), which says nothing about
    the constant.
    """
    if what != "data":
        return
    own = "\n".join(lines).strip()
    if own and own != inspect.cleandoc(type(obj).__doc__ or "").strip():
        return
    lines[:] = []
    module_name, _, attr = name.rpartition(".")
    package = importlib.import_module(module_name)
    for info in pkgutil.iter_modules(getattr(package, "__path__", []), module_name + "."):
        doc = ModuleAnalyzer.for_module(info.name).find_attr_docs().get(("", attr))
        if doc:
            lines[:] = list(doc)
            return


def _snapshot_example_files(app):
    app.example_pngs_before_build = set(EXAMPLES.glob("*.png"))


def _remove_files_written_by_examples(app, exception):
    """The examples save their figures in the working directory, which sphinx-gallery
    sets to examples/; the gallery has its own copies, so drop the new files."""
    for path in set(EXAMPLES.glob("*.png")) - getattr(app, "example_pngs_before_build", set()):
        path.unlink(missing_ok=True)


def setup(app):
    app.connect("builder-inited", _snapshot_example_files, priority=100)
    app.connect("build-finished", _remove_files_written_by_examples)
    app.connect("autodoc-skip-member", _skip_foreign_members)
    # before numpydoc (priority 500), which would rewrite the type's docstring
    app.connect("autodoc-process-docstring", _doc_comment_of_reexported_data, priority=100)
