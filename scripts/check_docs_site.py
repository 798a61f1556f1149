#!/usr/bin/env python
"""Check a built docs site for broken pages, as a reader's browser would find them.

Usage (after ``python -m sphinx -b html ... docs docs/_build/html``)::

    python scripts/check_docs_site.py docs/_build/html

The static part walks every HTML page and fails on

- a page the sources promise that was not built (every ``docs/*.md``/``*.rst``,
  ``docs/api/*.rst`` and one gallery page per ``examples/*.py``);
- an internal link, stylesheet, script or image whose file does not exist, and a link to
  an anchor (``page.html#name``) that the page does not define;
- a gallery example page without its figure, a gallery thumbnail that is sphinx-gallery's
  placeholder (``no_image.png``), and a stray object repr in an example's output
  (``<Figure size ...>``, ``<matplotlib....>``, ``... object at 0x...``) or in any page.

When Chromium is on ``PATH`` (or named with ``--browser``), a few pages are also rendered
headless at 1280x900 and the check fails on a screenshot that is blank or nearly so (less
than 1 % dark pixels) and on an uncaught JavaScript error or a local file that failed to
load. ``--no-browser`` skips this part; ``--screenshots DIR`` keeps the PNGs.

Exit status: 0 when no problem is found, 1 otherwise (each problem on a line of its own).
Only the standard library is needed for the static part; the blank-page test reads the
screenshots with Pillow (installed with matplotlib) and is skipped without it.
"""

import argparse
import html.parser
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

#: Object reprs that mean a gallery cell ended on an expression whose value is not text.
STRAY_REPRS = (
    re.compile(r"&lt;Figure size [^&]*&gt;|<Figure size [^>]*>"),
    re.compile(r"&lt;matplotlib\.[\w.]+ object at 0x[0-9a-f]+&gt;"),
    re.compile(r"\bobject at 0x[0-9a-f]{6,}"),
)
#: Classes sphinx-gallery gives the figures of an example.
FIGURE_CLASSES = ("sphx-glr-single-img", "sphx-glr-multi-img")
#: Pages that are not examples, inside the gallery folder.
GALLERY_NON_EXAMPLES = {"index", "sg_execution_times"}
#: Share of dark pixels (grey value below 128) under which a screenshot counts as blank.
MIN_DARK_SHARE = 0.01


class _PageParser(html.parser.HTMLParser):
    """Collects the ids, the URLs referenced and the gallery figures of one page."""

    URL_ATTRS = {"a": ("href",), "link": ("href",), "area": ("href",), "img": ("src", "srcset"),
                 "script": ("src",), "source": ("src", "srcset"), "iframe": ("src",)}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.urls, self.figures = set(), [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if attrs.get(key):
                self.ids.add(attrs[key])
        for key in self.URL_ATTRS.get(tag, ()):
            value = attrs.get(key)
            if not value:
                continue
            if key == "srcset":
                self.urls += [(tag, part.split()[0]) for part in value.split(",") if part.split()]
            else:
                self.urls.append((tag, value))
        if tag == "img" and any(c in (attrs.get("class") or "").split() for c in FIGURE_CLASSES):
            self.figures.append(attrs.get("src", ""))


def _parse(path):
    parser = _PageParser()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser


def _is_external(url):
    scheme = urllib.parse.urlsplit(url).scheme
    return bool(scheme) or url.startswith("//")


def expected_pages(source_dir, examples_dir=None):
    """The pages, relative to the site's root, that the sources promise.

    Parameters
    ----------
    source_dir : path-like or None
        The Sphinx source folder (``docs``): each ``*.md``/``*.rst`` in it and in its
        ``api/`` folder gives a page. ``None`` promises nothing.
    examples_dir : path-like or None
        The gallery's scripts (``examples``): each ``*.py`` gives
        ``auto_examples/<name>.html``, plus the gallery's ``auto_examples/index.html``.

    Returns
    -------
    pages : list of str
        For example ``["api.html", "api/datasets.html", ..., "index.html"]``.
    """
    pages = set()
    if source_dir is not None:
        source_dir = pathlib.Path(source_dir)
        for folder, prefix in ((source_dir, ""), (source_dir / "api", "api/")):
            for path in folder.glob("*"):
                if path.suffix in (".md", ".rst") and not path.name.startswith(("_", ".")):
                    if path.name != "sg_execution_times.rst":
                        pages.add(f"{prefix}{path.stem}.html")
        pages |= {"index.html", "genindex.html", "search.html"}
    if examples_dir is not None:
        scripts = sorted(pathlib.Path(examples_dir).glob("*.py"))
        pages |= {f"auto_examples/{script.stem}.html" for script in scripts}
        if scripts:
            pages.add("auto_examples/index.html")
    return sorted(pages)


def check_static(html_dir, expected=()):
    """Every problem a reader would meet without running a browser.

    Parameters
    ----------
    html_dir : path-like
        The built site (``docs/_build/html``).
    expected : iterable of str
        Pages, relative to ``html_dir``, that must exist (see :func:`expected_pages`).

    Returns
    -------
    problems : list of str
        One line per problem, ``"page: what is wrong"``; empty when the site is sound.
    """
    root = pathlib.Path(html_dir).resolve()
    if not (root / "index.html").is_file():
        return [f"{root}: no index.html (is this a built HTML site?)"]
    problems = [f"{page}: missing (the sources promise it)" for page in expected
                if not (root / page).is_file()]
    # The theme's template fragments in _static/ and the copies in _sources/ are no pages.
    pages = sorted(p for p in root.rglob("*.html")
                   if not p.relative_to(root).parts[0].startswith("_"))
    parsed = {path: _parse(path) for path in pages}

    for path, page in parsed.items():
        name = path.relative_to(root).as_posix()
        seen = set()
        for tag, url in page.urls:
            if _is_external(url) or url in seen:
                continue
            seen.add(url)
            parts = urllib.parse.urlsplit(url)
            target_path = urllib.parse.unquote(parts.path)
            if not target_path:
                target = path
            else:
                target = (path.parent / target_path).resolve()
                if target_path.endswith("/"):
                    target = target / "index.html"
            if not target.exists():
                problems.append(f"{name}: <{tag}> points at a file that does not exist: {url}")
                continue
            try:
                target.relative_to(root)
            except ValueError:
                problems.append(f"{name}: <{tag}> points outside the site: {url}")
                continue
            fragment = urllib.parse.unquote(parts.fragment)
            if fragment and target.suffix == ".html" and tag == "a":
                ids = parsed[target].ids if target in parsed else _parse(target).ids
                if fragment not in ids:
                    problems.append(f"{name}: link to a missing anchor: {url}")
        text = path.read_text(encoding="utf-8", errors="replace")
        for pattern in STRAY_REPRS:
            if m := pattern.search(text):
                problems.append(f"{name}: a stray object repr in the page: {m[0]!r}")
                break

    gallery = root / "auto_examples"
    for path in sorted(gallery.glob("*.html")):
        if path.stem in GALLERY_NON_EXAMPLES:
            continue
        if not parsed[path].figures:
            problems.append(f"auto_examples/{path.name}: a gallery example without a figure")
    if (gallery / "index.html").is_file():
        for tag, url in parsed[gallery / "index.html"].urls:
            if tag == "img" and url.rsplit("/", 1)[-1] == "no_image.png":
                problems.append("auto_examples/index.html: a placeholder thumbnail "
                                "(no_image.png); point sphinx_gallery_thumbnail_number at a "
                                "real figure")
    return problems


def find_browser(name=None):
    """The path of a Chromium-like browser: ``name`` if given, else the first on ``PATH``."""
    for candidate in ([name] if name else ["chromium", "chromium-browser", "google-chrome"]):
        found = shutil.which(candidate)
        if found:
            return found
    return None


def _dark_share(png):
    try:
        from PIL import Image
    except ImportError:
        return None
    with Image.open(png) as image:
        histogram = image.convert("L").histogram()
    return sum(histogram[:128]) / max(sum(histogram), 1)


def check_rendered(html_dir, pages, browser, screenshots=None, timeout=90):
    """Render ``pages`` headless at 1280x900; problems are blank pages and script errors.

    Parameters
    ----------
    html_dir : path-like
    pages : iterable of str
        Pages relative to ``html_dir``; those that do not exist are skipped (the static
        check reports them).
    browser : str
        The Chromium executable.
    screenshots : path-like or None
        A folder to keep the PNGs in (``index.png``, ``api_datasets.png``, ...).
    timeout : float
        Seconds allowed for one page.

    Returns
    -------
    problems : list of str
    """
    root = pathlib.Path(html_dir).resolve()
    problems = []
    keep = pathlib.Path(screenshots) if screenshots else None
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        for page in pages:
            if not (root / page).is_file():
                continue
            png = (keep or pathlib.Path(scratch)) / (page[:-len(".html")].replace("/", "_")
                                                     + ".png")
            png.unlink(missing_ok=True)
            command = [
                browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                f"--user-data-dir={tempfile.mkdtemp(dir=scratch)}", "--window-size=1280,900",
                "--enable-logging=stderr", "--v=0", f"--screenshot={png}",
                (root / page).as_uri(),
            ]
            try:
                run = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                problems.append(f"{page}: the browser did not finish within {timeout} s")
                continue
            for line in run.stderr.splitlines():
                if ":CONSOLE" not in line:
                    continue
                if "Uncaught" in line or ("Failed to load resource" in line
                                          and "file://" in line):
                    problems.append(f"{page}: JavaScript: {line.split('] ', 1)[-1]}")
            if not png.is_file():
                problems.append(f"{page}: the browser wrote no screenshot "
                                f"(exit {run.returncode}): {run.stderr[-300:]}")
                continue
            dark = _dark_share(png)
            if dark is not None and dark < MIN_DARK_SHARE:
                problems.append(f"{page}: the rendered page is (nearly) blank: "
                                f"{100 * dark:.2f} % dark pixels")
    return problems


def pages_to_render(html_dir):
    """The index, the API landing page and its first module, a guide and two gallery pages."""
    root = pathlib.Path(html_dir)
    pages = ["index.html", "api.html", "quickstart.html", "auto_examples/index.html"]
    pages += [p.relative_to(root).as_posix() for p in sorted(root.glob("api/*.html"))[:1]]
    examples = [p for p in sorted(root.glob("auto_examples/*.html"))
                if p.stem not in GALLERY_NON_EXAMPLES]
    pages += [p.relative_to(root).as_posix() for p in examples[:1]]
    return pages


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", nargs="?", default="docs/_build/html",
                        help="the built site (default: %(default)s)")
    parser.add_argument("--source", default=None,
                        help="the Sphinx sources whose pages must exist (default: the folder "
                             "two above html_dir when it holds conf.py)")
    parser.add_argument("--examples", default=None,
                        help="the gallery's scripts (default: examples/ beside the sources)")
    parser.add_argument("--no-browser", action="store_true", help="skip the rendered checks")
    parser.add_argument("--browser", default=None, help="the Chromium executable")
    parser.add_argument("--screenshots", default=None, help="keep the screenshots here")
    args = parser.parse_args(argv)

    html_dir = pathlib.Path(args.html_dir)
    source = pathlib.Path(args.source) if args.source else html_dir.resolve().parents[1]
    if not (source / "conf.py").is_file():
        source = None
    examples = pathlib.Path(args.examples) if args.examples else (
        source.parent / "examples" if source is not None else None)
    if examples is not None and not examples.is_dir():
        examples = None

    problems = check_static(html_dir, expected_pages(source, examples))
    n_pages = sum(1 for p in html_dir.rglob("*.html")
                  if not p.relative_to(html_dir).parts[0].startswith("_"))
    rendered = "not rendered (--no-browser)"
    if not args.no_browser:
        browser = find_browser(args.browser)
        if browser is None:
            rendered = "not rendered (no Chromium on PATH)"
        else:
            pages = pages_to_render(html_dir)
            problems += check_rendered(html_dir, pages, browser, args.screenshots)
            rendered = f"{len(pages)} rendered in {os.path.basename(browser)}"
    for problem in problems:
        print(problem)
    print(f"check_docs_site: {n_pages} pages checked, {rendered}: "
          f"{len(problems)} problem{'s' if len(problems) != 1 else ''}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
