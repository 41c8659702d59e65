"""Questions as people type them: one slip of the fingers in one word of each, the same every run.

A slip is one of the four kinds Damerau counted in most misspellings: a letter left out, a letter
typed twice, a key beside the right one struck instead, or two neighbouring letters swapped. It
falls on a word of at least five letters (a longer word has more room to slip), chosen, like the
slip, by a random generator seeded with the question, so every run asks the same questions.
"""

from __future__ import annotations

import random
import re
import zlib

_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_WORD = re.compile(r"\b[A-Za-z]{5,}\b")


def _beside(letter: str) -> list[str]:
    """The keys left and right of a letter key on a QWERTY keyboard."""
    for row in _ROWS:
        if letter in row:
            i = row.index(letter)
            return [row[j] for j in (i - 1, i + 1) if 0 <= j < len(row)]
    return []


def with_typo(question: str) -> str:
    """`question` with one slip in one of its words of five letters or more (unchanged without one)."""
    rng = random.Random(zlib.crc32(question.encode()))
    words = list(_WORD.finditer(question))
    if not words:
        return question
    match = rng.choice(words)
    word, i = match.group(), rng.randrange(1, len(match.group()) - 1)
    kind = rng.choice(("drop", "double", "beside", "swap"))
    if kind == "drop":
        slipped = word[:i] + word[i + 1 :]
    elif kind == "double":
        slipped = word[:i] + word[i] + word[i:]
    elif kind == "beside" and _beside(word[i]):  # the first letter never slips, so word[i] is lower-case
        slipped = word[:i] + rng.choice(_beside(word[i])) + word[i + 1 :]
    else:
        slipped = word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    return question[: match.start()] + slipped + question[match.end() :]
