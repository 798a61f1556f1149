"""What :func:`~intrinsic_rank.experiments.register` refuses: what would break the command line.

The command line builds every command's parser from the registry, so one bad
declaration would break every command (even ``sweep --help``). :func:`refusal`
says, in one line, what in a declaration would: an option that clashes with the
options every command takes or with another of its own, a reserved command, quick
or full settings that are not JSON-able dicts, a JSON name that leaves ``--out``,
an option type, conversion or part named by a string that its module does not
define. A module is read, not imported (``--help`` imports nothing heavy): its
top-level names are found in its source. This module imports only the standard
library.
"""

import argparse
import importlib.util
import json
import os
import re

from ._arguments import Option
from ._shared_options import COMMON_FLAGS

__all__ = ["RESERVED_COMMANDS", "refusal"]

RESERVED_COMMANDS = ("reproduce", "all")
"""Commands no experiment may take: the command line's own, and the word that means every
piece of the report."""

_RESERVED_DESTS = {"command", "experiment"}
"""Destinations the command line itself uses on every command's namespace."""

_COMMAND = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")

_REQUIRED = ("run", "tables", "plot", "verdicts", "summary")
_OPTIONAL = ("prepare", "check", "saved", "extra_files")


def _settings_problem(which, value):
    if not isinstance(value, dict):
        return (f"{which} must be a dict of JSON-able settings (the reproduce report's "
                f"{which} scale); got {type(value).__name__}")
    try:
        json.dumps(value)
    except (TypeError, ValueError) as error:
        return f"{which} must be a dict of JSON-able settings ({error})"
    return None


def _name_problem(experiment):
    for what, value in (("name", experiment.name), ("command", experiment.command)):
        if not isinstance(value, str) or not _COMMAND.fullmatch(value):
            return (f"the {what} {value!r} must be a word of letters, digits, '-' and '_' "
                    "(not starting with '-')")
        if value in RESERVED_COMMANDS:
            return f"the {what} {value!r} is reserved (the command line's own)"
    stem = experiment.json_name
    if stem is not None and (not isinstance(stem, str) or not stem or stem in (".", "..")
                             or "/" in stem or "\\" in stem or "\0" in stem
                             or (os.altsep and os.altsep in stem) or os.sep in stem):
        return (f"json_name {stem!r} must be a plain file name, which stays inside --out "
                "(no folder, no '..')")
    return None


def _option_problem(experiment, option, flags, dests):
    if not isinstance(option, Option):
        return f"its options must be Option declarations; got {option!r}"
    for flag in option.flags:
        if flag in COMMON_FLAGS:
            return (f"option {flag} clashes with the option every command takes "
                    f"({', '.join(f for f in COMMON_FLAGS if f != '-h')})")
        if flag in flags:
            return f"option {flag} is declared twice"
        flags.add(flag)
    if option.dest in set(COMMON_FLAGS.values()) | _RESERVED_DESTS:
        return (f"option {option.flag}: its destination {option.dest!r} is one the command "
                "line uses itself; give another dest")
    if option.dest in dests:
        return (f"options {dests[option.dest].flag} and {option.flag} share the destination "
                f"{option.dest!r}")
    dests[option.dest] = option
    for what, value in (("type", option.type), ("convert", option.convert)):
        if value is None:
            continue
        if isinstance(value, str):
            if experiment.module is None:
                return (f"option {option.flag}: its {what} {value!r} names a function of the "
                        "experiment's module, and it has none")
        elif not callable(value):
            return f"option {option.flag}: its {what} must be callable; got {value!r}"
    return None


def _module_source(module):
    """The source of ``module`` without importing it, or ``None`` (no source file)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as error:
        raise LookupError(f"its module {module!r} cannot be found ({error})") from None
    if spec is None:
        raise LookupError(f"its module {module!r} cannot be found")
    origin = getattr(spec, "origin", None)
    if not origin or not origin.endswith(".py"):
        return None
    try:
        with open(origin, encoding="utf-8") as stream:
            return stream.read()
    except OSError:
        return None


def _defines(source, name):
    """Whether ``source`` defines ``name`` at its top level (read, never imported)."""
    text = "\n" + source
    if any(f"\n{form}" in text for form in (f"def {name}(", f"async def {name}(",
                                             f"class {name}(", f"class {name}:",
                                             f"{name} = ", f"{name}: ")):
        return True  # the usual forms, found by plain search (--help pays for this)
    if not re.search(rf"\b{re.escape(name)}\b", source):
        return False
    import ast  # rarer forms (an import, a tuple assignment): the parse tree decides

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True  # the import will say what is wrong
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((alias.asname or alias.name.split(".")[0]) == name for alias in node.names):
                return True
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target)):
                    return True
    return False


def _module_problem(experiment):
    """A name the experiment needs from its module that the module does not define."""
    if experiment.module is None:
        return None
    try:
        source = _module_source(experiment.module)
    except LookupError as error:
        return str(error)
    if source is None:
        return None
    needed = [(f"option {option.flag}: its {what}", value)
              for option in experiment.options
              for what, value in (("type", option.type), ("convert", option.convert))
              if isinstance(value, str)]
    needed += [(f"the part {part}", f"_{part}") for part in _REQUIRED
               if _unresolved(getattr(experiment, part))]
    for what, name in needed:
        if not _defines(source, name):
            return f"{what} names {name}, which {experiment.module} does not define"
    return None


def _unresolved(part):
    """Whether a required part is to be looked up in the module (not given as a callable)."""
    return getattr(part, "part", None) is not None and getattr(part, "fallback", 0) is None


class _QuietFormatter(argparse.HelpFormatter):
    """A formatter of fixed width: building a trial parser asks no terminal for its size."""

    def __init__(self, prog):
        super().__init__(prog, width=80)


def _parser_problem(experiment):
    """What argparse itself refuses when the command's parser is built."""
    parser = argparse.ArgumentParser(prog=experiment.command, add_help=False,
                                     formatter_class=_QuietFormatter)
    try:
        experiment.add_arguments(parser)
    except (argparse.ArgumentError, ValueError, TypeError, KeyError) as error:
        return f"its options cannot make a command ({error})"
    return None


def refusal(experiment):
    """Why registering ``experiment`` would break the command line, in one line; or ``None``.

    Parameters
    ----------
    experiment : Experiment

    Returns
    -------
    problem : str or None

    Examples
    --------
    >>> import dataclasses
    >>> from intrinsic_rank.experiments import EXPERIMENTS
    >>> refusal(EXPERIMENTS["ladder"]) is None
    True
    >>> refusal(dataclasses.replace(EXPERIMENTS["ladder"], json_name="../x"))
    "json_name '../x' must be a plain file name, which stays inside --out (no folder, no '..')"
    """
    problem = _name_problem(experiment)
    for which in ("quick", "full"):
        problem = problem or _settings_problem(which, getattr(experiment, which))
    flags, dests = set(), {}
    for option in experiment.options:
        problem = problem or _option_problem(experiment, option, flags, dests)
    return problem or _module_problem(experiment) or _parser_problem(experiment)
