#!/usr/bin/env python
"""List the package's modules over 700 lines and functions over 80 lines of code.

The house's size limits: a module of one idea stays under 700 lines, a function under 80
lines of code. Lines of code are the lines that hold a token of the function's code: blank
lines, comments and the docstring do not count; a string that is not a docstring (a message,
a table) does.

Usage::

    python scripts/check_sizes.py [--skip PATH ...] [--modules N] [--functions N]

``--skip`` leaves out a file, or every file under a folder, given relative to the
repository root (for example ``intrinsic_rank/estimators``). Prints one line per module or
function over its limit and exits with status 1 when there is one, 0 otherwise.
"""

import argparse
import ast
import io
import pathlib
import sys
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[1]


def code_lines(source):
    """The line numbers that hold a token of code, docstrings left out."""
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                          tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        lines.update(range(token.start[0], token.end[0] + 1))
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                lines.difference_update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines, tree


def oversized(path, module_limit, function_limit):
    """``(kind, name, size)`` of the module and each function of ``path`` over its limit."""
    source = path.read_text()
    found = []
    n_lines = len(source.splitlines())
    if n_lines > module_limit:
        found.append(("module", "", n_lines))
    lines, tree = code_lines(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            size = len(lines & set(range(node.lineno, node.end_lineno + 1)))
            if size > function_limit:
                found.append(("function", f"{node.name} (line {node.lineno})", size))
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip", nargs="*", default=[], metavar="PATH",
                        help="files or folders to leave out, relative to the repository root")
    parser.add_argument("--modules", type=int, default=700, help="module limit in lines")
    parser.add_argument("--functions", type=int, default=80,
                        help="function limit in lines of code")
    args = parser.parse_args(argv)
    skip = [ROOT / p for p in args.skip]
    over = 0
    for path in sorted((ROOT / "intrinsic_rank").rglob("*.py")):
        if any(path == s or s in path.parents for s in skip):
            continue
        for kind, name, size in oversized(path, args.modules, args.functions):
            over += 1
            unit = "lines" if kind == "module" else "lines of code"
            print(f"{path.relative_to(ROOT)}: {kind} {name} {size} {unit}".replace("  ", " "))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
