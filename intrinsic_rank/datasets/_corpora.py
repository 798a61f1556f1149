"""Small offline text corpora of different kinds, shipped with the package.

Each is a few kilobytes written for this project: a passage of English prose
and a module of Python source. With uniform random tokens and a repeated short
passage they span corpora of clearly different complexity for a language
model, offline and reproducibly.
"""

from importlib import resources

__all__ = ["load_text_corpus"]

_FILES = {"prose": "corpus_prose.txt", "code": "corpus_code.txt"}


def load_text_corpus(name):
    """One of the package's text corpora, as a single string.

    Parameters
    ----------
    name : {"prose", "code"}
        ``"prose"``: about 3 KB of narrative English prose (a story in seven
        paragraphs); ``"code"``: about 3 KB of Python source (a small
        inventory ledger with classes, functions, f-strings and a main block).

    Returns
    -------
    text : str
        The corpus, line breaks kept.

    Raises
    ------
    ValueError
        For a name that is not one of the corpora.

    Examples
    --------
    >>> prose = load_text_corpus("prose")
    >>> prose.split()[:3], len(prose) > 2000
    (['The', 'lighthouse', 'on'], True)
    >>> load_text_corpus("code").splitlines()[2]
    'from dataclasses import dataclass, field'
    """
    if name not in _FILES:
        raise ValueError(f"name must be one of {', '.join(map(repr, _FILES))}; got {name!r}")
    return (resources.files("intrinsic_rank") / "data" / _FILES[name]).read_text("utf-8")
