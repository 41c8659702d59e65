"""Extractive compression of observations: title, key facts, concepts and files, without an LLM.

What the agent gives wins; what it leaves out is extracted from the content with cheap, predictable
rules, so lists and search hits can show a few lines instead of a whole tool output.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from mcp_memory.privacy import without_markers
from mcp_memory.search.analyzer import MARKS
from mcp_memory.search.stopwords import STOP_WORDS
from mcp_memory.services.common import normal_forms

TITLE_CHARS = 120
FACT_CHARS = 240
MAX_FACTS = 5
MAX_CONCEPTS = 8
MAX_FILES = 12
CONCEPT_CHARS = 100
"""The longest concept stored (lower-cased): what the tools accept and an import takes back."""
FILE_CHARS = 1_000
"""The longest file path stored."""

TYPE_IMPORTANCE: dict[str, float] = {
    "decision": 0.8,
    "error": 0.75,
    "fix": 0.75,
    "preference": 0.7,
    "file_change": 0.6,
    "discovery": 0.6,
    "note": 0.5,
    "conversation": 0.45,
    "tool_use": 0.3,
}
"""Default importance by observation type; low-value types fold away first when a session is full."""

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n+|(?<=[。！？])\s*")
# A full stop after these (or after a lone initial, "J. Smith") does not end a sentence.
_ABBREVIATION = re.compile(
    r"(?:^|\s)(?:[A-Z]|Dr|Mr|Mrs|Ms|Mx|Prof|Sr|Jr|St|Mt|No|vs|etc|approx|e\.g|i\.e|cf|Inc|Ltd|Co|Corp|Fig|Vol)\.$"
)
_SIGNAL = re.compile(
    r"\b(because|caus\w*|error|exception|fail\w*|fix\w*|decid\w*|decision|must|should|never|always|"
    r"prefer\w*|instead|resolv\w*|works?|broke\w*|bug|todo|important|root cause|avoid|require\w*)\b"
)  # matched against lower-cased text: IGNORECASE makes Python's re try the alternation at every position
_DIGIT = re.compile(r"\d")
_IDENTIFIER = re.compile(
    r"\b(?:[a-z]+[A-Z]\w*|[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+|[A-Z]{2,}[a-z]{2,}\w*|[A-Za-z]+_\w+"
    r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){1,})\b"
)
# Bounded repeats: unbounded ones backtracked over a long run of `a/a/a…` from every start (seconds per call).
_PATH = re.compile(
    r"(?<![\w@])(?:~?/|\.{1,2}/)?(?:[\w.-]{1,255}/){0,64}[\w-]{1,255}\.(?:py|pyi|js|mjs|ts|tsx|jsx|md|rst|json|toml|ya?ml|"
    r"rs|go|java|kt|c|h|cc|cpp|hpp|rb|php|sh|sql|html|css|scss|txt|cfg|ini|lock|env|xml|csv|ipynb)\b"
    r"|(?<![\w@])(?:~|\.{1,2})?/(?:[\w.-]{1,255}/){1,64}[\w.-]{1,255}"
)
# Not a C preprocessor directive (`#include`, `#ifndef`) nor a region marker: code, not a tag.
_HASHTAG = re.compile(
    r"(?<!\w)#(?!(?:include|define|undef|ifdef|ifndef|elif|else|endif|pragma|import|error|warning|line"
    r"|region|endregion)\b)([A-Za-z][\w-]{1,40})"
)
_FENCE = re.compile(r"(?:```|~~~)[\w+#.-]*")  # a code fence's line, with its language: no sentence
_EMPHASIS = re.compile(r"\*\*(?=\S)([^*\n]{1,300}?)(?<=\S)\*\*")  # "**Decision**: …" reads "Decision: …"
_NAME = re.compile(r"(?<=[a-z,;:] )([A-Z][a-z]+(?: [A-Z][a-z]+){0,2})\b(?!\.\w)")
_ABBREVIATED = re.compile(r"[A-Za-z](?:\.[A-Za-z])+")  # "e.g", "i.e", "U.S": dotted, but no identifier
_WORD = re.compile(rf"(?:[^\W\d_][{MARKS}]*){{4,}}")  # a letter with its marks (Devanagari vowels) is one
_ASCII_WORD = re.compile(r"[a-z]{4,}")  # the same in lower-cased ASCII text (most), a tenth of the time


@dataclass(frozen=True, slots=True)
class Compressed:
    """The compressed form of an observation."""

    title: str
    facts: list[str]
    concepts: list[str]
    files: list[str]


def counted(number: int, noun: str) -> str:
    """A count with its noun in the right number: "1 observation", "2 observations", "1 memory", "2 memories"."""
    if number == 1:
        return f"1 {noun}"
    return f"{number} {noun[:-1]}ies" if noun.endswith("y") else f"{number} {noun}s"


def shorten(text: str, limit: int) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` characters (with an ellipsis)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


def sentences(text: str) -> list[str]:
    """Sentences and lines of `text`, stripped of list markers, empty ones dropped."""
    parts: list[str] = []
    start, joined = 0, False
    for gap in [*_SENTENCE.finditer(text), None]:
        piece = text[start : gap.start() if gap else len(text)]
        if joined:
            parts[-1] += " " + piece  # "Dr. Smith" goes on in the same sentence
        else:
            parts.append(piece)
        if gap is not None:
            joined = "\n" not in gap.group() and _ABBREVIATION.search(parts[-1]) is not None
            start = gap.end()
    cleaned = (_EMPHASIS.sub(r"\1", p.strip()).lstrip("-*•>#").strip() for p in parts)
    return [p for p in cleaned if p and not _FENCE.fullmatch(p)]


def _dedupe(values: Sequence[str], limit: int) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for value in values:
        key = value.casefold()
        if value and key not in seen:
            seen.add(key)
            out.append(value)
    return out[:limit]


def _identifiers(text: str) -> Iterator[re.Match[str]]:
    """The identifiers of `text`, sought only in the words that could hold one.

    Neither an identifier nor a path holds whitespace, so matching word by word finds the same
    matches (a word's edges stand where the text's whitespace stood) at a fraction of the cost.
    """
    for word in text.split():
        if "_" in word or "." in word or word[1:] != word[1:].lower():  # snake, dotted or camel case
            yield from _IDENTIFIER.finditer(word)


def _paths(text: str) -> Iterator[re.Match[str]]:
    """The file paths of `text`, sought word by word as `_identifiers` does (a URL is no local file:
    "https://host/a.html" would otherwise give the made-up path "/host/a.html")."""
    for word in text.split():
        if ("." in word or "/" in word) and "://" not in word:
            yield from _PATH.finditer(word)


def extract_files(text: str) -> list[str]:
    """File paths mentioned in `text`, in order of appearance."""
    found = (m.group().rstrip(".,;:") for m in _paths(text))
    return _dedupe([f for f in found if len(f) <= FILE_CHARS], MAX_FILES)  # longer is no path a tool takes


def extract_identifiers(text: str) -> list[str]:
    """Code identifiers of `text` (snake, camel or dotted case; paths and "e.g" are none), in order."""
    return [i for m in _identifiers(text) if "/" not in (i := m.group()) and not _ABBREVIATED.fullmatch(i)]


def extract_concepts(text: str, exclude: Sequence[str] = ()) -> list[str]:
    """Identifiers, hashtags, proper names and repeated content words of `text`, lower-cased."""
    skip = {e.casefold() for e in exclude}
    found = [m.group(1) for m in _HASHTAG.finditer(text) if m.group(1).casefold() not in STOP_WORDS]  # `#if` is C
    found += extract_identifiers(text)
    found += _names(text)
    folded = text.casefold()
    words = Counter(w for w in (_ASCII_WORD if folded.isascii() else _WORD).findall(folded) if w not in STOP_WORDS)
    # Beside identifiers or names, a word said twice is how an error message reads ("connection to
    # server ... failed: Connection refused ... server running?"), not its topic: it takes three.
    least = 3 if found else 2
    found += [w for w, n in words.most_common() if n >= least]
    concepts = [c for c in map(str.casefold, found) if c not in skip and not any(c in e for e in skip)]
    return _dedupe([c for c in concepts if len(c) <= CONCEPT_CHARS], MAX_CONCEPTS)


def _names(text: str) -> list[str]:
    """Proper names: runs of capitalised words inside a sentence, without the stop words at their
    edges ("saw The Beatles" gives "Beatles"). One word after a colon or semicolon is capitalised only
    because it opens a clause ("Error: No signatures found"), so it names nothing; two still do
    ("Owner: Alice Smith")."""
    names: list[str] = []
    for match in _NAME.finditer(text):
        before = text[: match.start() - 1].rsplit(None, 1)
        if text[match.start() - 2].islower() and before and before[-1][:1].isupper():
            continue  # the rest of a run opening a sentence ("New York users…"): not "York"
        words = match.group(1).split(" ")
        opens_clause = text[match.start() - 2] in ":;"
        while words and words[0].casefold() in STOP_WORDS:
            words.pop(0)  # a stop word opening the run leaves the next word opening the clause
        while words and words[-1].casefold() in STOP_WORDS:
            words.pop()
        if words and not (opens_clause and len(words) == 1):
            names.append(" ".join(words))
    return names


def extract_facts(parts: Sequence[str]) -> list[str]:
    """Up to five informative sentences (numbers, identifiers, decisions, errors), in text order."""
    scored: list[tuple[int, int, str]] = []
    for position, sentence in enumerate(parts):
        score = 0
        score += 2 if _DIGIT.search(sentence) else 0
        score += 2 if any(_identifiers(sentence)) or any(_paths(sentence)) else 0
        score += 2 if _SIGNAL.search(sentence.lower()) else 0
        score -= 1 if len(sentence) < 20 else 0
        if score > 0:
            scored.append((score, position, sentence))
    best = sorted(scored, key=lambda s: (-s[0], s[1]))[:MAX_FACTS]
    return [shorten(s, FACT_CHARS) for _, _, s in sorted(best, key=lambda s: s[1])]


def compress(
    content: str,
    title: str | None = None,
    facts: Sequence[str] | None = None,
    concepts: Sequence[str] | None = None,
    files: Sequence[str] | None = None,
) -> Compressed:
    """The compressed form: the caller's fields where given, extracted ones otherwise.

    What the caller gives is kept whole (the tool's schema already bounds it; a concept that grows
    past CONCEPT_CHARS in lower case is refused); only what is extracted from the content is cut to
    the sizes above.
    """
    parts = sentences(content)
    title = title_or_none(title)  # a blank title is no title: one is made
    made_title = title or shorten(parts[0] if parts else content, TITLE_CHARS)
    if facts is None:
        rest = parts[1:] if not title else parts  # a title of the caller's leaves every sentence a fact
        facts = extract_facts(rest) if rest else []
    found_files = list(files) if files is not None else extract_files(content)
    if concepts is None:
        concepts = extract_concepts(without_markers(f"{title or ''}\n{content}"), exclude=found_files)
    return Compressed(
        title=made_title or "(empty)",
        facts=_dedupe([f.strip() for f in facts], len(facts)),
        concepts=_dedupe(concept_forms(concepts), len(concepts)),
        files=_dedupe([f.strip() for f in found_files], len(found_files)),
    )


def concept_forms(concepts: Sequence[str]) -> list[str]:
    """Concepts as stored: stripped and lower-cased (casefolded), or an error naming one that
    lower case makes longer than CONCEPT_CHARS; blank ones dropped."""
    return [c for c in normal_forms("concepts", concepts, lambda c: c.strip().casefold(), CONCEPT_CHARS) if c]


def title_or_none(title: str | None) -> str | None:
    """A caller's title with single spaces, or None when it shows nothing (blank, or only invisible
    characters such as zero-width spaces): a title no one can read is no title."""
    single = " ".join(title.split()) if title else ""
    return single if any(unicodedata.category(ch)[0] not in "CZ" for ch in single) else None


def compact_line(title: str, facts: Sequence[str], limit: int = 240) -> str:
    """One line for lists and hits: the title and the first facts that fit."""
    text = title
    for fact in facts:
        if len(text) + len(fact) + 3 > limit:
            break
        text += f" — {fact}" if text == title else f"; {fact}"
    return shorten(text, limit)
