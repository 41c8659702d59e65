"""TermSets finds exactly the sets a brute-force Jaccard comparison finds, whichever way it reads."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from mcp_memory.search.postings import encode_terms
from mcp_memory.search.termsets import TermSets


def _group(seed: int, n: int) -> dict[str, list[int]]:
    """`n` word lists drawn from a skewed vocabulary (a few words everywhere, most rare), one in
    five a near-copy of an earlier one; lists may repeat a word and are not sorted."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(3000)]
    lists: dict[str, list[int]] = {}
    for i in range(n):
        if lists and rng.random() < 0.2:
            words = list(rng.choice(list(lists.values())))
            for _ in range(rng.randint(0, 3)):
                words[rng.randrange(len(words))] = rng.randrange(3000)
        else:
            words = rng.choices(range(3000), weights, k=rng.randint(1, 40))
        lists[f"m{i}"] = words
    return lists


def _brute(sets: dict[str, set[int]], probe: set[int], unknown: int, min_share: float) -> dict[str, float]:
    found = {}
    for key, held in sets.items():
        shared = len(held & probe)
        share = shared / (len(held | probe) + unknown) if held else 0.0
        if shared and share >= min_share:
            found[key] = share
    return found


def _member(words: list[int], form: str, i: int) -> np.ndarray | bytes:
    """A word list as an array, as the index's stored blob, or (`mixed`) every other one each way."""
    if form == "blobs" or (form == "mixed" and i % 2):
        return encode_terms(Counter(words).items())
    return np.array(words, dtype=np.int32)


@pytest.mark.parametrize(("seed", "form"), [(0, "arrays"), (1, "blobs"), (2, "mixed")])
def test_every_threshold_finds_exactly_what_brute_force_finds(seed: int, form: str) -> None:
    lists = _group(seed, 1500)
    leave_out = {1, 2, 3} if seed % 2 else set()
    every = TermSets(((k, _member(v, form, i)) for i, (k, v) in enumerate(lists.items())), leave_out)
    sets = {k: set(v) - leave_out for k, v in lists.items()}
    rng = random.Random(seed + 100)
    found_any = 0
    for min_share in (0.0, 0.2, 0.5, 0.7, 0.9, 1.0):
        for key in rng.sample(sorted(lists), 60):
            probe = {w for w in sets[key] if rng.random() < 0.9} | {
                rng.randrange(3000) for _ in range(rng.randint(0, 2))
            }
            probe -= leave_out
            unknown = rng.randint(0, 2)
            expected = _brute(sets, probe, unknown, min_share)
            assert every.similar(probe, min_share, unknown) == expected, (min_share, key)
            found_any += len(expected) > 1
    assert found_any > 50  # probes met other sets, not only themselves


def test_a_group_left_with_no_words_finds_nothing() -> None:
    every = TermSets([("a", np.array([5, 6], dtype=np.int32))], leave_out={5, 6})
    assert every.similar([5, 6, 7], 0.0) == {}
    assert TermSets([]).similar([1], 0.5) == {}
