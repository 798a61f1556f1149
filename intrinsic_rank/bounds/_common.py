"""What the bounds' modules share: a result dict with attribute access."""


class Certificate(dict):
    """A dict with attribute access (like sklearn's Bunch, without sklearn)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None
