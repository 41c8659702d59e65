"""Turns text into index terms: unicode lower-casing, accent folding, identifier splitting, stop words, stemming.

Compound tokens such as `snake_case`, `camelCase`, `os.path.join` or `src/app/db.py` are kept whole
(lower-cased, unstemmed) and also split into their parts, so both `getUserName` and "user name"
find the same record; a path's file name (`db.py`) is a term too. Runs of CJK ideographs or kana,
and of Thai, Lao, Myanmar or Khmer letters, become overlapping bigrams of letters, since those
scripts do not separate words with spaces, and any Latin word inside them (`使用Redis缓存`) is
analysed as a word of its own.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import Stemmer

from mcp_memory.search.stopwords import STOP_WORDS

ANALYZER_VERSION = 11
"""Bump whenever stored terms would come out differently (a change to `Analyzer.terms`, to the
fields a service indexes, or to the date a record is indexed under): every record is then
re-analysed once at start-up. 6: a session is dated when its observations happened. 7: words keep
their combining marks (Devanagari, Tamil), Greek, Hebrew and Arabic marks are folded away, and
Thai, Lao, Myanmar and Khmer text is bigrammed as CJK text is. 8: a date the text writes out is
one of the record's date tokens. 9: a word wrapped in underscores (`__init__`) is split too. 10: soft
hyphens, zero-width spaces and word joiners no longer cut a word apart. 11: an ISO date inside a
name (`snapshot_2024-03-15.sql`) or a timestamp (`2024-03-15T10:22:01Z`) is a date of its day."""


def _mark_class() -> str:
    """The combining marks (Unicode M*) as regex ranges: `\\w` leaves them out, which would cut
    words of scripts that write vowels as marks (Devanagari हिन्दी, Tamil, Hebrew points) apart."""
    ranges: list[tuple[int, int]] = []
    for cp in [*range(0x300, 0x20000), *range(0xE0100, 0xE01F0)]:  # where the marks are
        if unicodedata.category(chr(cp))[0] == "M":
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    return "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ranges)


MARKS = _mark_class()
"""Every combining mark, as the inside of a regex character class (`[{MARKS}]`)."""
_MARK = re.compile(f"[{MARKS}]")
_W = rf"[\w{MARKS}]"  # a word character, or a mark on one
_MAX_TERM = 64
_MEMO_SIZE = 50_000  # distinct raw tokens remembered (~270 bytes each); emptied when full
# Scripts written without spaces between words: Chinese and Japanese, and Thai, Lao, Myanmar, Khmer
_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff"
# A word with `++` or `#` (`C++`, `C#`, `F#`) keeps them, else `c` would fall away alone; otherwise
# apostrophes and separators join words into one token (`don't`, `os.path.join`, `src/app/db.py`).
_TOKEN_SHAPE = r"\w{W}*(?:\+\+|#(?!\w)|(?:['’]{W}+)*(?:[./\\:@#-]{W}+(?:['’]{W}+)*)*)"
_TOKEN = re.compile(_TOKEN_SHAPE.format(W=r"\w"))  # ASCII text (most) holds no marks, and this is faster
_TOKEN_MARKED = re.compile(_TOKEN_SHAPE.format(W=_W))
_SEPARATORS = re.compile(r"[./\\:@#_-]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_CJK = re.compile(f"[{_CJK_CHARS}]")
_CJK_RUN = re.compile(f"[{_CJK_CHARS}][{_CJK_CHARS}{MARKS}]*")
_CLUSTER = re.compile(f".[{MARKS}]*", re.DOTALL)  # a letter with its marks (Thai ที่ is three code points)
_LINE_REF = re.compile(r"(.*\.[^\W\d_]\w*)(?::\d+)+")  # `db.py:42`, `src/app/db.py:42:7`
_FOLDED_SCRIPTS = ("LATIN ", "GREEK ", "HEBREW ", "ARABIC ")
_HYPHENATED = re.compile(r"[^\W\d_]+-[^\W\d_]+")  # `e-mail`, `set-up`: also indexed joined up
# Invisible inside a word (text pasted from web pages and PDFs holds them), where \w would cut it
# apart: soft hyphen, zero-width space, word joiner, zero-width no-break space. The zero-width
# (non-)joiners stay: some scripts and emoji need them.
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u2060\ufeff"))


class Analyzer:
    """The single place text becomes terms, for documents and queries alike."""

    def __init__(self) -> None:
        self._stemmer = Stemmer.Stemmer("english")
        self._stemmer.maxCacheSize = 50_000
        self._candidate_stemmer = Stemmer.Stemmer("english", 0)  # no cache: its words are mostly made up
        # One save analyses the same text up to three times (similarity check, supersession, index).
        self._recent = functools.lru_cache(maxsize=32)(self._analyse)
        # Words repeat (Zipf): remembering each raw token's terms spares splitting and stemming it again.
        self._memo: dict[str, tuple[str, ...]] = {}

    def terms(self, text: str) -> list[str]:
        """Index terms of `text` in order, with repeats (term frequency matters to BM25)."""
        return list(self._recent(text))

    @staticmethod
    def tokens(text: str) -> list[str]:
        """The words of `text` as `terms` reads them, whole (`C#`, `src/db.py`, a word with combining marks)."""
        if text.isascii():
            return _TOKEN.findall(text)
        return _TOKEN_MARKED.findall(unicodedata.normalize("NFKC", text).translate(_INVISIBLE))

    def word_terms(self, words: list[str]) -> list[str | None]:
        """The term each word of letters alone is indexed under (None for a stop word), as `terms`
        would give it; nothing is remembered, so a burst of made-up words (the spelling candidates
        of search/spelling.py) crowds neither memo."""
        out: list[str | None] = []
        for word in words:
            word = (word if word.isascii() else _fold_accents(word)).casefold()
            if word in STOP_WORDS or len(word) > _MAX_TERM or len(word) < 2 or not word.isalpha():
                out.append(None)
            else:
                out.append(self._candidate_stemmer.stemWord(word))
        return out

    def _analyse(self, text: str) -> tuple[str, ...]:
        out: list[str] = []
        if not text:
            return ()
        if not text.isascii():
            text = unicodedata.normalize("NFKC", text).translate(_INVISIBLE)
        memo = self._memo
        for raw in (_TOKEN if text.isascii() else _TOKEN_MARKED).findall(text):
            found = memo.get(raw)
            if found is None:
                terms: list[str] = []
                self._token(raw if raw.isascii() else _fold_accents(raw), terms)
                found = tuple(terms)
                if len(memo) >= _MEMO_SIZE:
                    memo.clear()
                memo[raw] = found
            out += found
        return tuple(out)

    def _token(self, raw: str, out: list[str]) -> None:
        if _CJK.search(raw):
            self._cjk(raw, out)
            return
        if raw[-1] in "+#":  # a language name such as C++ or C#: kept whole, its word analysed too
            out.append(raw.casefold())
            self._token(raw.rstrip("+#"), out)
            return
        pieces = [p for chunk in _SEPARATORS.split(raw) for p in _CAMEL.split(chunk) if p]
        if len(pieces) > 1 or pieces[:1] != [raw]:  # `__init__`, one word wrapped, is asked for as "init" too
            whole = raw.casefold().replace("’", "'")
            if len(whole) <= _MAX_TERM:
                out.append(whole)
                self._path_names(whole, out)
            if _HYPHENATED.fullmatch(raw):
                self._word(raw.replace("-", ""), out)
            for piece in pieces:
                self._word(piece, out)
        else:
            self._word(raw, out)

    @staticmethod
    def _path_names(whole: str, out: list[str]) -> None:
        # A file is named by its base name as often as by its path, and with or without a line number.
        path = whole
        if (line_ref := _LINE_REF.fullmatch(whole)) is not None:
            path = line_ref[1]
            out.append(path)
        base = path[max(path.rfind("/"), path.rfind("\\")) + 1 :]
        if base != path and _SEPARATORS.search(base):
            out.append(base)

    def _word(self, word: str, out: list[str]) -> None:
        word = word.casefold().replace("’", "'")
        if "'" in word:
            word = word[:-2] if word.endswith("'s") else word.replace("'", "")
        if len(word) > _MAX_TERM or word in STOP_WORDS:
            return
        if word.isdigit():
            out.append(word)
        elif len(word) > 1:
            out.append(self._stemmer.stemWord(word) if word.isalpha() else word)

    def _cjk(self, raw: str, out: list[str]) -> None:
        # Bigram each run of a script without spaces, a letter being one with its marks; what lies
        # between runs (`Redis` in `使用Redis缓存`) is tokenised on its own.
        start = 0
        for run in _CJK_RUN.finditer(raw):
            self._between(raw[start : run.start()], out)
            letters = _CLUSTER.findall(run[0])
            if len(letters) == 1:
                out.append(letters[0])
            else:
                out.extend(letters[i] + letters[i + 1] for i in range(len(letters) - 1))
            start = run.end()
        self._between(raw[start:], out)

    def _between(self, text: str, out: list[str]) -> None:
        for token in _TOKEN_MARKED.findall(text):
            self._token(token, out)


def _fold_accents(text: str) -> str:
    """`text` without the marks on its Latin, Greek, Hebrew and Arabic letters (`Café` → `Cafe`,
    `καφές` → `καφες`, pointed Hebrew → unpointed), as people type those words without them. Marks
    that make another letter (Cyrillic й, kana with dakuten) or write a vowel (Devanagari) stay."""
    if unicodedata.is_normalized("NFD", text) and not _MARK.search(text):
        return text  # nothing decomposes and no mark is there: most text of most scripts
    kept: list[str] = []
    foldable = False
    for char in unicodedata.normalize("NFKD", text):
        if unicodedata.category(char) == "Mn":
            if foldable:
                continue
        else:
            foldable = char < "\u0250" or unicodedata.name(char, "").startswith(_FOLDED_SCRIPTS)
        kept.append(char)
    # Recompose what stayed decomposed (kana with dakuten, Cyrillic й), as NFKC had it.
    return unicodedata.normalize("NFC", "".join(kept))
