"""The inputs of the four corpora: random and repeated tokens, stdlib prose and code by split.

A byte tokenizer stands in for a real one: it is invertible, so a window's text can be
read back and traced to the documents it came from.
"""

import numpy as np
import pytest

from intrinsic_rank._validation import keyed_seed
from intrinsic_rank.datasets import stdlib_corpus_record, stdlib_documents
from intrinsic_rank.inspection import corpus_record, corpus_token_ids, ordinary_token_ids

SEPARATOR = "\n\n"


class ByteTokenizer:
    """UTF-8 bytes as tokens 3..258; 0, 1, 2 are the special tokens (pad, BOS, EOS)."""

    bos_token_id, eos_token_id, all_special_ids = 1, 2, [0, 1, 2]
    name_or_path = "bytes"

    def __len__(self):
        return 259

    def __call__(self, text, add_special_tokens=True):
        ids = [3 + b for b in text.encode("utf-8")]
        return {"input_ids": [self.bos_token_id, *ids] if add_special_tokens else ids}

    @staticmethod
    def decode(ids):
        return bytes(int(i) - 3 for i in ids).decode("utf-8", errors="replace")


BYTES = ByteTokenizer()


def _documents_of(text, documents):
    """The documents whose texts, joined by the separator, begin ``text`` (the last cut)."""
    used, at = [], 0
    while at < len(text):
        rest = text[at:]
        whole = [p for p, t in documents.items() if rest.startswith(t + SEPARATOR)
                 or rest == t]
        if whole:
            used.append(whole[0])
            at += len(documents[whole[0]]) + len(SEPARATOR)
            continue
        cut = [p for p, t in documents.items() if (t + SEPARATOR).startswith(rest)]
        assert cut, f"text at {at} comes from no document: {rest[:60]!r}"
        used.append(cut[0])
        break
    return used


# ---------------------------------------------------------------- random and repeated


def test_random_and_repeated_without_a_tokenizer():
    random = corpus_token_ids("random", None, 64, n_inputs=50, length=30, random_state=3)
    assert random.shape == (50, 30) and random.dtype == np.int64
    np.testing.assert_array_equal(
        random, np.random.default_rng(3).choice(np.arange(64), size=(50, 30)))
    assert not np.array_equal(
        random, corpus_token_ids("random", None, 64, n_inputs=50, length=30, random_state=4))
    repeated = corpus_token_ids("repeated", None, 64, n_inputs=8, length=21)
    first, second = repeated[:, :10], repeated[:, 10:20]
    np.testing.assert_array_equal(first, second)
    assert all(len(set(row)) == 10 for row in first) and repeated.shape == (8, 21)


@pytest.mark.parametrize("corpus", ["random", "repeated"])
def test_each_split_draws_its_own_reproducible_stream(corpus):
    def draw(split, seed=5):
        return corpus_token_ids(corpus, BYTES, 259, n_inputs=6, length=17, random_state=seed,
                                split=split)

    train, validation, test = (draw(s) for s in ("train", "validation", "test"))
    assert not np.array_equal(train, validation) and not np.array_equal(validation, test)
    np.testing.assert_array_equal(validation, draw("validation"))
    # a held-out split is the train draw of its keyed seed: independent, reproducible
    np.testing.assert_array_equal(validation, draw("train", keyed_seed(5, 1)))
    np.testing.assert_array_equal(test, draw("train", keyed_seed(5, 2)))
    assert (train[:, 0] == 1).all()  # the BOS first
    assert set(train[:, 1:].ravel()) <= set(ordinary_token_ids(BYTES, 259).tolist())


# ---------------------------------------------------------------- prose and code


@pytest.mark.parametrize("corpus", ["prose", "code"])
def test_text_windows_are_consecutive_and_from_their_split_only(corpus):
    n_inputs, length = 24, 65
    ids = corpus_token_ids(corpus, BYTES, 259, n_inputs=n_inputs, length=length,
                           random_state=2, split="validation")
    assert ids.shape == (n_inputs, length) and (ids[:, 0] == BYTES.bos_token_id).all()
    # the windows, end to end, are one stream: whole documents joined by a blank line
    text = BYTES.decode(ids[:, 1:].ravel())
    validation = dict(stdlib_documents(corpus, "validation"))
    used = _documents_of(text, validation)
    assert len(used) == len(set(used)) >= 1
    # another seed takes the documents in another order
    other = corpus_token_ids(corpus, BYTES, 259, n_inputs=n_inputs, length=length,
                             random_state=3, split="validation")
    assert _documents_of(BYTES.decode(other[:, 1:].ravel()), validation) != used


def test_no_held_out_window_occurs_in_the_training_stream():
    train = SEPARATOR.join(text for _, text in stdlib_documents("prose", "train")).encode()
    for split in ("validation", "test"):
        ids = corpus_token_ids("prose", BYTES, 259, n_inputs=32, length=129, random_state=0,
                               split=split)
        windows = [bytes(int(i) - 3 for i in row[1:]) for row in ids]
        assert not any(window in train for window in windows), split
    # while every paragraph of a training window does, as a check of the check
    ids = corpus_token_ids("prose", BYTES, 259, n_inputs=4, length=129, random_state=0)
    pieces = [p for row in ids for p in bytes(int(i) - 3 for i in row[1:]).split(b"\n\n")]
    assert all(piece in train for piece in pieces) and max(map(len, pieces)) > 40


def test_a_split_too_small_is_one_line_with_its_token_count():
    documents = stdlib_documents("prose", "validation")
    tokens = sum(len(t.encode()) for _, t in documents) + len(SEPARATOR) * (len(documents) - 1)
    asked = 100_000 * 64
    assert asked > tokens
    with pytest.raises(ValueError) as error:
        corpus_token_ids("prose", BYTES, 259, n_inputs=100_000, length=65, split="validation")
    assert str(error.value) == (
        f"the prose corpus's validation split has {tokens} tokens ({len(documents)} "
        f"documents), fewer than the 100000 x 64 = {asked} asked: ask for fewer or shorter "
        "inputs")


@pytest.mark.parametrize("kwargs, message", [
    (dict(corpus="wiki"), "corpus must be one of 'random', 'repeated', 'prose', 'code'"),
    (dict(corpus="prose"), "the prose corpus needs the model's tokenizer .*: use 'random' or "
                           "'repeated'"),
    (dict(corpus="code"), "the code corpus needs the model's tokenizer"),
    (dict(corpus="random", split="dev"), "split must be one of 'train', 'validation', "
                                         "'test'; got 'dev'"),
    (dict(corpus="repeated", length=1), "length=1 leaves no room for two copies"),
    (dict(corpus="random", length=0), "length must be an integer >= 1"),
    (dict(corpus="random", n_inputs=0), "n_inputs must be an integer >= 1"),
    (dict(corpus="repeated", length=200), "exceeds the 64 ordinary tokens"),
])
def test_bad_corpus_requests_are_one_line(kwargs, message):
    kwargs = dict(dict(n_inputs=2, length=9), **kwargs)
    with pytest.raises(ValueError, match=message) as error:
        corpus_token_ids(kwargs.pop("corpus"), None, 64, **kwargs)
    assert "\n" not in str(error.value)


def test_the_record_names_the_text_or_describes_the_draw():
    record = corpus_record("code", BYTES)
    expected = stdlib_corpus_record("code")
    assert record["tokenizer"] == "bytes" and record["corpus"] == "code"
    for key in ("source", "python_version", "digest", "n_documents", "characters"):
        assert record[key] == expected[key]
    assert "standard library" in record["description"]
    random = corpus_record("repeated")
    assert random["tokenizer"] is None and "digest" not in random
    assert "same k again" in random["description"]
    with pytest.raises(ValueError, match="corpus must be one of"):
        corpus_record("poetry")
