"""The package's version, in one place: read by ``pyproject.toml`` (setuptools' dynamic
``version``), the root package's ``__version__``, ``--version`` and the model files' header.

It imports nothing, so every room may read it without an upward import.
"""

__version__ = "0.1.0"
