"""Turns text into index terms: unicode lower-casing, identifier splitting, stop words, stemming.

Compound tokens such as `snake_case`, `camelCase`, `os.path.join` or `src/app/db.py` are kept whole
(lower-cased, unstemmed) and also split into their parts, so both `getUserName` and "user name"
find the same record. Runs of CJK ideographs or kana become overlapping character bigrams, since
those scripts do not separate words with spaces.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import Stemmer

from mcp_memory.search.stopwords import STOP_WORDS

ANALYZER_VERSION = 3
"""Bump whenever stored terms would come out differently (a change to `Analyzer.terms` or to the
fields a service indexes): every record is then re-analysed once at start-up."""

_MAX_TERM = 64
_MEMO_SIZE = 50_000  # distinct raw tokens remembered (~270 bytes each); emptied when full
_TOKEN = re.compile(r"\w+(?:['’]\w+)*(?:[./\\:@#-]\w+(?:['’]\w+)*)*")
_SEPARATORS = re.compile(r"[./\\:@#_-]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


class Analyzer:
    """The single place text becomes terms, for documents and queries alike."""

    def __init__(self) -> None:
        self._stemmer = Stemmer.Stemmer("english")
        self._stemmer.maxCacheSize = 50_000
        # One save analyses the same text up to three times (similarity check, supersession, index).
        self._recent = functools.lru_cache(maxsize=32)(self._analyse)
        # Words repeat (Zipf): remembering each raw token's terms spares splitting and stemming it again.
        self._memo: dict[str, tuple[str, ...]] = {}

    def terms(self, text: str) -> list[str]:
        """Index terms of `text` in order, with repeats (term frequency matters to BM25)."""
        return list(self._recent(text))

    def _analyse(self, text: str) -> tuple[str, ...]:
        out: list[str] = []
        if not text:
            return ()
        text = unicodedata.normalize("NFKC", text)
        memo = self._memo
        for raw in _TOKEN.findall(text):
            found = memo.get(raw)
            if found is None:
                terms: list[str] = []
                self._token(raw, terms)
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
        pieces = [p for chunk in _SEPARATORS.split(raw) for p in _CAMEL.split(chunk) if p]
        if len(pieces) > 1:
            whole = raw.casefold().replace("’", "'")
            if len(whole) <= _MAX_TERM:
                out.append(whole)
            for piece in pieces:
                self._word(piece, out)
        else:
            self._word(raw, out)

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

    @staticmethod
    def _cjk(raw: str, out: list[str]) -> None:
        # Split into runs of CJK characters and other word characters; bigram the CJK runs.
        for run in re.findall(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+|[^\W_]+", raw):
            if not _CJK.match(run):
                out.append(run.casefold())
            elif len(run) == 1:
                out.append(run)
            else:
                out.extend(run[i : i + 2] for i in range(len(run) - 1))
