"""The docs site: every public name has an API entry, and the site builds.

The fast test reads the API pages (``docs/api.rst`` and one page per sub-module in
``docs/api/``) as text (no Sphinx needed), so a new public name without API docs fails the
default test run. The slow one builds the whole site, gallery
included, exactly as CI does.
"""

import importlib
import importlib.util
import os
import pathlib
import pkgutil
import re
import subprocess
import sys
import types

import pytest

import intrinsic_rank

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# The landing page and one page per sub-module (docs/api/datasets.rst, ...).
API_PAGES = sorted(DOCS.glob("api*.rst")) + sorted(DOCS.glob("api/*.rst"))
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
    assert module_name in sections, f"docs/api/*.rst has no section for {module_name}"
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
    assert not missing, f"public names of {module_name} missing from docs/api/*.rst: {missing}"


def test_api_reference_is_one_page_per_module():
    """The sidebar shows the modules, not every name: each public module has its section
    on a page of ``docs/api/``, and the landing page's toctree lists every such page."""
    _, sections = api_entries()
    pages = {page.stem for page in DOCS.glob("api/*.rst")}
    landing = (DOCS / "api.rst").read_text()
    toctree = set(re.findall(r"^   (?:[^<\n]*<)?api/(\w+)>?$", landing, flags=re.M))
    assert toctree == pages, f"docs/api.rst's toctree {sorted(toctree)} != pages {sorted(pages)}"
    for module_name in public_modules():
        homes = [page.stem for page in DOCS.glob("api/*.rst")
                 if re.search(rf"^\.\. automodule:: {re.escape(module_name)}$",
                              page.read_text(), flags=re.M)]
        assert len(homes) == 1, f"{module_name} should have one page in docs/api/, has {homes}"
        assert module_name in sections
    assert not re.search(r"^\.\. (?:currentmodule|automodule|autosummary)::", landing,
                         flags=re.M), "docs/api.rst is the landing page; names go in docs/api/"


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


# -- scripts/check_docs_site.py: the check CI runs on the built site -----------------

def _site_checker():
    spec = importlib.util.spec_from_file_location(
        "check_docs_site", ROOT / "scripts" / "check_docs_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tiny_site(root):
    """A four-page site shaped like ours: a page, an anchor, a gallery with one figure."""
    files = {
        "index.html": '<link rel="stylesheet" href="_static/site.css"><a href="api.html#sec">'
                      'API</a><a href="auto_examples/index.html">gallery</a>'
                      '<a href="#top" id="top">top</a><a href="https://example.org/x">out</a>'
                      '<img src="_images/logo.png">',
        "api.html": '<section id="sec"><a href="index.html">home</a></section>',
        "auto_examples/index.html": '<img src="../_images/sphx_glr_ex_thumb.png">'
                                    '<a href="ex.html">ex</a>',
        "auto_examples/ex.html": '<img class="sphx-glr-single-img" src="../_images/fig.png" '
                                 'srcset="../_images/fig.png">'
                                 '<div class="sphx-glr-script-out"><pre>r* = 3</pre></div>',
        "_static/site.css": "body {}",
        "_images/logo.png": "", "_images/fig.png": "", "_images/sphx_glr_ex_thumb.png": "",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_site_check_passes_a_sound_site(tmp_path):
    check = _site_checker()
    site = _tiny_site(tmp_path)
    assert check.check_static(site, ["index.html", "api.html", "auto_examples/ex.html"]) == []
    assert check.main([str(site), "--no-browser"]) == 0


@pytest.mark.parametrize("breakage, expected", [
    (lambda s: (s / "_images" / "fig.png").unlink(),
     "auto_examples/ex.html: <img> points at a file that does not exist: ../_images/fig.png"),
    (lambda s: (s / "api.html").write_text('<a href="index.html">home</a>'),
     "index.html: link to a missing anchor: api.html#sec"),
    (lambda s: (s / "_static" / "site.css").unlink(),
     "index.html: <link> points at a file that does not exist: _static/site.css"),
    (lambda s: (s / "auto_examples" / "ex.html").write_text('<pre>r* = 3</pre>'),
     "auto_examples/ex.html: a gallery example without a figure"),
    (lambda s: (s / "auto_examples" / "ex.html").write_text(
        '<img class="sphx-glr-single-img" src="../_images/fig.png">'
        '<pre>&lt;Figure size 640x480 with 1 Axes&gt;</pre>'),
     "auto_examples/ex.html: a stray object repr in the page: "
     "'&lt;Figure size 640x480 with 1 Axes&gt;'"),
    (lambda s: (s / "auto_examples" / "index.html").write_text(
        '<img src="../_static/no_image.png"><a href="ex.html">ex</a>'),
     "auto_examples/index.html: a placeholder thumbnail"),
    (lambda s: (s / "api.html").unlink(), "api.html: missing (the sources promise it)"),
])
def test_site_check_finds_each_breakage(tmp_path, breakage, expected):
    check = _site_checker()
    site = _tiny_site(tmp_path)
    breakage(site)
    problems = check.check_static(site, ["index.html", "api.html"])
    assert any(p.startswith(expected) for p in problems), problems


def test_site_check_expects_a_page_per_source_and_example(tmp_path):
    check = _site_checker()
    (tmp_path / "docs" / "api").mkdir(parents=True)
    for name in ("docs/index.md", "docs/api.rst", "docs/api/spectral.rst", "docs/conf.py",
                 "examples/plot_a.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert check.expected_pages(tmp_path / "docs", tmp_path / "examples") == [
        "api.html", "api/spectral.html", "auto_examples/index.html", "auto_examples/plot_a.html",
        "genindex.html", "index.html", "search.html"]


def test_built_site_passes_the_check():
    """The site in docs/_build/html, when one was built here: links, images, gallery figures
    (the pages' list is not compared with the sources: a build may be older than them)."""
    site = DOCS / "_build" / "html"
    if not (site / "index.html").is_file():
        pytest.skip("no built site in docs/_build/html")
    problems = _site_checker().check_static(site)
    assert not problems, "\n".join(problems[:20])


# -- one reference list, the library's citation, history in the changelog -----------------

PAPERS = {  # a phrase only the full citation of each paper holds
    "The Entropic Bound": "Byeong Hoon Yoon",
    "Three tokens force exponential feature rank": "Vicente Opazo",
    "How many different outputs can a Transformer generate?": "2605.22223",
}


def _pages():
    return sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]


def test_each_paper_is_cited_once_in_the_reference_list_and_linked_elsewhere():
    references = (DOCS / "references.md").read_text()
    for title, mark in PAPERS.items():
        assert references.count(mark) == 1, title
        assert f"### {title}" in references, title
    for page in _pages():
        if page.name == "references.md":
            continue
        text = page.read_text()
        for title, mark in PAPERS.items():
            assert mark not in text, (page.name, title)  # linked, not retyped
    index = (DOCS / "index.md").read_text()
    for anchor in ("#the-entropic-bound", "#three-tokens-force-exponential-feature-rank",
                   "#how-many-different-outputs-can-a-transformer-generate"):
        assert f"references.md{anchor}" in index, anchor


def test_citation_cff_cites_the_library_at_its_version():
    yaml = pytest.importorskip("yaml")
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["type"] == "software"
    assert citation["title"].startswith("intrinsic_rank")
    assert citation["version"] == intrinsic_rank.__version__
    assert citation["license"] == "BSD-3-Clause"
    assert citation["authors"] and all("name" in a or "family-names" in a
                                       for a in citation["authors"])
    titles = [reference["title"] for reference in citation["references"]]
    assert len(titles) == 3 and any("Entropic Bound" in t for t in titles)


def test_history_is_in_the_changelog_not_in_the_pages():
    performance = (DOCS / "performance.md").read_text()
    changelog = (ROOT / "CHANGELOG.md").read_text()
    for heading in ("What changed in the students", "Before and after"):
        assert heading not in performance
    assert "#### Before and after, one run" in changelog and "padded (before)" in changelog
    assert "the old code" not in performance and "padded (before)" not in performance
    assert "../CHANGELOG.md" in (DOCS / "changelog.md").read_text()
    reliability = (DOCS / "reliability.md").read_text()
    assert not re.search(r"\(it was |Before: ", reliability)


def test_the_machine_is_named_only_where_a_timing_is():
    timing = re.compile(r"thread|[Tt]iming|[Tt]imed|took|takes|wall|\d(\.\d+)? ?(s|ms|min)\b")
    for page in _pages():
        for paragraph in re.split(r"\n\s*\n", page.read_text()):
            if re.search(r"2-core|virtual machine", paragraph):
                assert timing.search(paragraph), (page.name, paragraph[:120])
        assert not re.search(r"^#+ .*2-core", page.read_text(), re.M), page.name
