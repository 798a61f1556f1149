"""Names of a package that load from its submodules on first use (PEP 562, SPEC 1).

A package lists which submodule gives each of its names; importing the package imports
none of them, so a declaration or ``--help`` that needs only the package's light names
pays for nothing heavy (numpy, torch). This module imports only the standard library.
"""

import importlib

__all__ = ["lazy_names"]


def lazy_names(package, table, namespace, submodules=()):
    """``(home, __getattr__, __dir__)`` of a package whose names load on first use.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    table : dict of str -> sequence of str
        Submodule (``"_sweep"``, or a relative name such as ``"..inspection"``) -> the
        names it gives the package.
    namespace : dict
        The package's ``globals()``: a loaded name is kept there, so it loads once.
    submodules : sequence of str, default=()
        Submodules that are names of the package themselves (``intrinsic_rank.spectral``),
        imported on first use.

    Returns
    -------
    home : dict of str -> str or None
        Each name and the module it comes from (``None`` for a submodule).
    getattr, dir : callable
        The package's module-level ``__getattr__`` and ``__dir__``.

    Examples
    --------
    >>> space = {"__all__": ["sqrt"]}
    >>> home, get, names = lazy_names("math", {"": ["sqrt"]}, space)
    >>> get("sqrt")(4.0), "sqrt" in space, names()[-1]
    (2.0, True, 'sqrt')
    >>> home, get, names = lazy_names("xml", {}, {}, submodules=["dom"])
    >>> get("dom").__name__
    'xml.dom'
    """
    home = {name: module for module, names in table.items() for name in names}
    home.update({name: None for name in submodules})

    def __getattr__(name):
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = home[name]
        if module is None:  # a submodule: importing it makes it the package's attribute
            value = importlib.import_module(f".{name}", package)
            namespace[name] = value
            return value
        target = (importlib.import_module(package) if module == "" else
                  importlib.import_module(module if module.startswith(".") else f".{module}",
                                          package))
        value = getattr(target, name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(namespace.get("__all__", ())) | set(home))

    return home, __getattr__, __dir__
