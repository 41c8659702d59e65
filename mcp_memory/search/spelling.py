"""Respelling a query word that no record holds as the known word one typing slip away.

A search for "tiemout" finds nothing where "timeout" is everywhere. Each word of the query of at
least `MIN_LETTERS` letters whose term no searched record holds is compared with every string one
slip of typing away (a letter left out or typed twice, a key beside the right one struck, two
neighbours swapped: the kinds Damerau found in most misspellings); the candidate whose term the
most records hold replaces it in the query. Shorter words are left alone (one edit from a short
word is too often another word: "sing", "song"), and so are words that name a time ("march" is
not "match") and words with capitals inside (`getUsrName` is an identifier, searched as it is).
Only the searched records' words are candidates, so a respelling never tells of another
project's records.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from mcp_memory.search import dates
from mcp_memory.search.analyzer import Analyzer
from mcp_memory.search.index import SearchIndex

MIN_LETTERS = 5
_WORD = re.compile(r"[^\W\d_]+")  # letters only: the words inside an identifier or a path too


@dataclass(frozen=True, slots=True)
class Respelling:
    """A query with its unknown words respelled, and which words were (as typed, as searched)."""

    text: str
    changes: Sequence[tuple[str, str]] = field(default_factory=tuple)

    def named_from(self, texts: Iterable[str], analyzer: Analyzer) -> Respelling:
        """This respelling with each replacement named by a word of `texts` (what was found) indexed
        as it is. A replacement is only a string one slip from what was typed that is indexed as a
        known word is ("panoramaics" stems as "panoramas" does): the records' own word reads better."""
        if not self.changes:
            return self
        wanted = {new: analyzer.word_terms([new.casefold()])[0] for _, new in self.changes}
        named: dict[str, str] = {}
        for text in texts:
            words = list(dict.fromkeys(w.casefold() for w in _WORD.findall(text)))
            for word, term in zip(words, analyzer.word_terms(words), strict=True):
                for new, wanted_term in wanted.items():
                    if term == wanted_term and new not in named:
                        named[new] = word
            if len(named) == len(wanted):
                break
        return replace(self, changes=tuple((old, named.get(new, new)) for old, new in self.changes))

    def note(self) -> str | None:
        """What a result says of the respelling, if any word was respelled."""
        if not self.changes:
            return None
        pairs = " and ".join(f"{new!r} in place of {old!r}" for old, new in self.changes)
        return f"Searched for {pairs}, which no record holds."


def respell_query(index: SearchIndex, projects: Sequence[str], text: str) -> Respelling:
    """`text` with each word that no record of `projects` holds respelled (see `respell`)."""
    parts = [p for name in projects if (p := index.partition(name)) is not None]
    vocab = index.vocab

    def holders(term: str) -> int:
        tid = vocab.get(term)
        return 0 if tid is None else sum(p.df.get(tid, 0) for p in parts)

    return respell(text, holders, index.analyzer)


def respell(text: str, holders: Callable[[str], int], analyzer: Analyzer) -> Respelling:
    """`text` with each word no record holds (`holders(term)` is how many records hold a term)
    replaced by the known word one edit away that the most records hold, when there is one."""
    chosen: dict[str, str | None] = {}
    pieces: list[str] = []
    changes: list[tuple[str, str]] = []
    end = 0
    for match in _WORD.finditer(text):
        word = match.group()
        lowered = word.casefold()
        if len(word) < MIN_LETTERS or lowered in dates.WORDS or not (word[1:].islower() or word.isupper()):
            continue
        if lowered not in chosen:
            term = analyzer.word_terms([lowered])[0]
            chosen[lowered] = None if term is None or holders(term) else _nearest(lowered, holders, analyzer)
        replacement = chosen[lowered]
        if replacement is not None:
            pieces += [text[end : match.start()], replacement]
            end = match.end()
            if (word, replacement) not in changes:
                changes.append((word, replacement))
    if not changes:
        return Respelling(text)
    return Respelling("".join([*pieces, text[end:]]), tuple(changes))


def _nearest(word: str, holders: Callable[[str], int], analyzer: Analyzer) -> str | None:
    """The string one edit from `word` whose term the most records hold (ties: alphabetical)."""
    candidates = sorted(_edits(word))
    best: tuple[int, str] | None = None
    for candidate, term in zip(candidates, analyzer.word_terms(candidates), strict=True):
        count = 0 if term is None else holders(term)
        if count and (best is None or count > best[0]):
            best = (count, candidate)
    return None if best is None else best[1]


def _keyboard_neighbours() -> dict[str, frozenset[str]]:
    """The keys around each letter key of a QWERTY keyboard, with the letters QWERTZ and AZERTY
    keyboards swap (y/z, a/q, w/z), as a slip of the finger strikes one for the other."""
    rows = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
    near: dict[str, set[str]] = {c: set() for row in rows for c in row}
    for r, row in enumerate(rows):
        for i, key in enumerate(row):
            near[key] |= {row[j] for j in (i - 1, i + 1) if 0 <= j < len(row)}
            if r + 1 < len(rows):  # each row sits half a key to the right of the one above
                below = {rows[r + 1][j] for j in (i - 1, i) if 0 <= j < len(rows[r + 1])}
                near[key] |= below
                for other in below:
                    near[other].add(key)
    for a, b in (("y", "z"), ("a", "q"), ("w", "z")):
        near[a].add(b)
        near[b].add(a)
    return {key: frozenset(keys) for key, keys in near.items()}


_NEAR = _keyboard_neighbours()


def _edits(word: str) -> set[str]:
    """The words `word` may be a slip of the fingers for, one edit away: a letter dropped (not the
    first), a letter added that doubles or sits beside a neighbouring letter on the keyboard, a
    letter struck for a key beside it, or two neighbours swapped. Blind edits (any letter for any)
    would take a word the records lack for another real word too often: "status" for "states",
    "writing" for "waiting". In a word of another script only a doubled or swapped letter is undone."""
    found: set[str] = set()
    for i, letter in enumerate(word):
        around = {word[j] for j in (i - 1, i + 1) if 0 <= j < len(word)}
        if letter in around or _NEAR.get(letter, frozenset()) & around:
            found.add(word[:i] + word[i + 1 :])  # typed once too often
        if i + 1 < len(word):
            found.add(word[:i] + word[i + 1] + letter + word[i + 2 :])
        found |= {word[:i] + key + word[i + 1 :] for key in _NEAR.get(letter, ())}
        if i:
            found |= {word[:i] + key + word[i:] for key in string.ascii_lowercase}  # one left out
    found |= {word + key for key in string.ascii_lowercase}
    found.discard(word)
    return found
