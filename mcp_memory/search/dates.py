"""Dates as search terms: a record's own date, the dates its words point at, and dates in queries.

Every dated record is indexed with tokens for its day, month and year (`@2023-05-08`, `@2023-05`,
`@2023`), its day being the one it fell on in the database's time zone. Relative phrases in its
text ("yesterday", "last week", "two days ago", "last Friday") are resolved against the record's
own date and indexed the same way, so "7 May 2023" finds a note written on 8 May that says
"yesterday". Queries get the tokens of the dates they name, absolute ("May 2023", "7 May 2023",
"2023-05-07", "in 2023") or relative to today in that zone ("last week"). A day or month named
without a year ("on May 7", "in June") matches that day or month of any year: records also carry
their days and months without the year (`@--05-08`, `@--05`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import NamedTuple

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

PREFIX = "@"
"""Every date token starts with this; the analyzer never produces it, so they cannot collide."""

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
            ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
            ("november", "nov"), ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}  # fmt: skip
_WEEKDAYS = {
    name: i for i, name in enumerate(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))
}
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "a couple of": 2,
}

WORDS = frozenset(_MONTHS) | frozenset(_WEEKDAYS) | {"yesterday", "today", "tonight", "weekend", "morning", "afternoon"}
"""Words that name a time: a query's way of saying when, never a misspelling of a word about what."""

# The absolute patterns are matched in lower-cased text (`_lowered`): with IGNORECASE, Python's re
# tries every spelling of every month name at every position, half of what reading a note's dates cost.
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
# An ISO date may sit in a name (`snapshot_2024-03-15.sql`: `_` is a word character, so `\b` is
# no edge there) or open a timestamp (`2024-03-15t10:22`, lower-cased), not inside a longer word or number.
_ISO = re.compile(r"(?<![^\W_])(\d{4})-(\d{2})(?:-(\d{2}))?(?=t\d|[\W_]|$)")
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b")
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b")
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b")
_YEAR = re.compile(r"\b(?:in|during|of|since|from)\s+((?:19|20)\d{2})\b")
# A day or month named without a year ("on May 7", "the 3rd of March", "in June") means that day
# or month of any year. A bare month is read only after a preposition ("I may" is no date).
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?![\w-])")
_MONTH_DAY = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?(?![\w:-])")
_PREPOSITION = re.compile(
    r"\b(?:on|of|by|until|till|since|before|after|in|from|to)\s+(?:the\s+)?(?:\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?)?$",
    re.IGNORECASE,
)
_IN_MONTH = re.compile(rf"\b(?:in|during|since|of|early|late|mid)[\s-]+{_MONTH}(?![\w-])(?!\s*\d)")
# Every absolute pattern above but _IN_MONTH needs a digit, and all but _ISO and _YEAR a month name
# standing as a word of its own: most notes have no month name, so most of the patterns are spared.
_DIGIT = re.compile(r"\d")
_MONTH_WORD = re.compile(r"\b(?:" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\b")
_RELATIVE = re.compile(
    r"\b(yesterday|today|tonight|this morning|this afternoon|last night|the day before yesterday|"
    r"last (?:week|weekend|month|year)|"
    r"(a|an|one|two|three|four|five|six|seven|a couple of|\d{1,2}) (day|week|month|year)s? ago|"
    r"last (monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b"
)  # run on lower-cased text: IGNORECASE makes Python's re try the alternation at every position
_RELATIVE_ANY_CASE = re.compile(_RELATIVE.pattern, re.IGNORECASE)  # for queries: short, and spans must fit
# Every relative expression holds one of these: text without any has none (most records).
_RELATIVE_HINTS = ("yesterday", "today", "tonight", "this morning", "this afternoon", "last ", " ago")


def _lowered(text: str) -> str:
    """`text` lower-cased letter for letter, so that a span found in it is the same span of `text`
    (a letter whose lower case is longer, as "İ", is kept as it is)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(low if len(low := letter.lower()) == 1 else letter for letter in text)


def _relative_matches(text: str) -> list[re.Match[str]]:
    """The relative expressions ("yesterday", "two weeks ago", …) of `text`, matched lower-cased."""
    lowered = _lowered(text)
    if not any(hint in lowered for hint in _RELATIVE_HINTS):
        return []
    return list(_RELATIVE.finditer(lowered))


def day_tokens(day: date) -> list[str]:
    """The tokens of one day: itself, its month, its year."""
    # Formatted by hand: strftime's %Y drops the zero padding before year 1000 on glibc.
    return [f"@{day.isoformat()}", f"@{day.year:04d}-{day.month:02d}", f"@{day.year:04d}"]


def month_tokens(year: int, month: int) -> list[str]:
    return [f"@{year:04d}-{month:02d}", f"@{year:04d}"]


def record_tokens(text: str, at: float | None, zone: tzinfo = UTC) -> list[str]:
    """Date tokens of a record dated `at` (epoch seconds) whose text is `text`; its day is the one
    it fell on in `zone`. The dates its text writes out ("the deadline is 2024-03-03") are its
    too: a query takes such words as a date, not as words, so only a date token can meet them."""
    if at is None:
        return []
    day = local_day(at, zone)
    tokens = day_tokens(day) + [token for phrase in _absolute_dates(text)[0] for token in phrase.tokens]
    for match in _relative_matches(text):
        # "yesterday" on the calendar's first day names no day (OverflowError), nor "a year ago" in
        # the year 1 a year ("@0000")
        with contextlib.suppress(OverflowError):
            tokens += [token for token in _resolve(match, day) if token[1] != "-" and token[1:5] != "0000"]
    return _with_yearless(tokens)


def text_tokens(text: str) -> list[str]:
    """Date tokens of the dates a text writes out, for a record with no date of its own (a lesson:
    "since the 2024-12-20 outage"); its relative phrases name no day without one."""
    return _with_yearless([token for phrase in _absolute_dates(text)[0] for token in phrase.tokens])


def _with_yearless(tokens: list[str]) -> list[str]:
    """The tokens, and each day and month again without its year, for questions that name none:
    `@--05-07`, `@--05`; a date named twice is still one date."""
    tokens = tokens + [f"{PREFIX}--{token[6:]}" for token in tokens if len(token) in (8, 11) and token[1] != "-"]
    return list(dict.fromkeys(tokens))


def local_day(at: float, zone: tzinfo) -> date:
    """The day epoch second `at` falls on in `zone`; the UTC day where the zone's offset would leave
    the years 1-9999 (a record dated on the calendar's first or last day)."""
    try:
        moment = _EPOCH + timedelta(seconds=at)  # not fromtimestamp: some platforms refuse times before 1970
    except OverflowError:  # the last microseconds of 9999 round up to the year 10000 as epoch seconds
        return date.max if at > 0 else date.min
    try:
        return moment.astimezone(zone).date()
    except (OverflowError, ValueError):
        return moment.date()


def query_tokens(text: str, now: datetime) -> list[str]:
    """Date tokens of the dates a query names; relative ones count from the day `now` falls on
    (in its own time zone)."""
    return query_dates(text, now)[0]


class DatePhrase(NamedTuple):
    """A date a query names: where it writes it, its tokens, and whether it counts from today."""

    start: int
    end: int
    tokens: list[str]
    relative: bool = False


def query_phrases(text: str, now: datetime) -> list[DatePhrase]:
    """The dates a query names ("Feb 9", "2026-01-27", "in June", "last week") that give tokens,
    the absolute ones first; relative ones count from the day `now` falls on."""
    phrases, taken = _absolute_dates(text)
    for match in _RELATIVE_ANY_CASE.finditer(text):
        if any(s < match.end() and match.start() < e for s, e in taken):
            continue  # read as (part of) an absolute date already
        if found := _week_asked(match, now.date()) or _resolve(match, now.date()):
            phrases.append(DatePhrase(*match.span(), found, relative=True))
    return phrases


def query_dates(text: str, now: datetime) -> tuple[list[str], list[tuple[int, int]]]:
    """The date tokens of a query, and where it writes the absolute dates that gave some, as
    (start, end): their words need not be searched again. The words of a relative phrase ("4 years
    ago") stay searchable, as the record that says them resolves them from its own day, not from today."""
    phrases = query_phrases(text, now)
    tokens = dict.fromkeys(token for phrase in phrases for token in phrase.tokens)
    return list(tokens), [(p.start, p.end) for p in phrases if not p.relative]


def blanked(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """`text` with spaces where `spans` (a query's dates) stand, so its words are read without them."""
    for start, end in spans:
        text = text[:start] + " " * (end - start) + text[end:]
    return text


def _absolute_dates(text: str) -> tuple[list[DatePhrase], list[tuple[int, int]]]:
    """The dates `text` writes out ("Feb 9", "2026-01-27", "in June") that give tokens, and the
    spans of every date-like phrase read (given tokens or not)."""
    phrases: list[DatePhrase] = []
    taken: list[tuple[int, int]] = []

    def free(match: re.Match[str]) -> bool:
        span = match.span()
        if any(s < span[1] and span[0] < e for s, e in taken):
            return False
        taken.append(span)
        return True

    def add(match: re.Match[str], found: list[str]) -> None:
        if found:
            phrases.append(DatePhrase(*match.span(), found))

    lowered = _lowered(text)
    digits = _DIGIT.search(lowered) is not None
    months = _MONTH_WORD.search(lowered) is not None

    def matches(pattern: re.Pattern[str], needed: bool) -> Iterable[re.Match[str]]:
        return pattern.finditer(lowered) if needed else ()

    for match in matches(_ISO, digits):
        if free(match):
            year, month, day = (int(g) if g else 0 for g in match.groups())
            add(match, _valid_day(year, month, day) if day else month_tokens(year, month))
    for match in matches(_DAY_MONTH_YEAR, digits and months):
        if free(match):
            add(match, _valid_day(int(match[3]), _MONTHS[match[2]], int(match[1])))
    for match in matches(_MONTH_DAY_YEAR, digits and months):
        if free(match):
            add(match, _valid_day(int(match[3]), _MONTHS[match[1]], int(match[2])))
    for match in matches(_MONTH_YEAR, digits and months):
        if free(match):
            add(match, month_tokens(int(match[2]), _MONTHS[match[1]]))
    for match in matches(_YEAR, digits):
        if free(match):
            add(match, [f"@{match[1]}"])
    for match in matches(_DAY_MONTH, digits and months):
        if not _modal(text, match, 2) and free(match):
            add(match, _yearless_day(_MONTHS[match[2]], int(match[1])))
    for match in matches(_MONTH_DAY, digits and months):
        if not _modal(text, match, 1) and free(match):
            add(match, _yearless_day(_MONTHS[match[1]], int(match[2])))
    for match in matches(_IN_MONTH, months):
        if free(match):
            add(match, [f"{PREFIX}--{_MONTHS[match[1]]:02d}"])
    return phrases, taken


def _week_asked(match: re.Match[str], today: date) -> list[str]:
    """A query's "last week" / "N weeks ago" means that whole calendar week (Monday to Sunday).

    A record saying "last week" names one moment, so it keeps the single day seven days back;
    a question asking about last week wants anything dated in it.
    """
    phrase = match.group(1).lower()
    if phrase in ("last week", "last weekend"):
        back = 1
    elif match.group(3) and match.group(3).lower() == "week":
        count_word = match.group(2).lower()
        back = int(count_word) if count_word.isdigit() else _NUMBERS[count_word]
    else:
        return []
    monday = today - timedelta(days=today.weekday() + 7 * back)
    first = 5 if phrase == "last weekend" else 0
    return [token for offset in range(first, 7) for token in day_tokens(monday + timedelta(days=offset))]


def _valid_day(year: int, month: int, day: int) -> list[str]:
    try:
        return day_tokens(date(year, month, day))
    except ValueError:
        return month_tokens(year, month) if 1 <= month <= 12 else []


def _modal(text: str, match: re.Match[str], group: int) -> bool:
    """Whether the month word of a yearless date is rather the verb: "may" in lower case, not
    right after a preposition ("they may 2x it", but "on may 7")."""
    if text[match.start(group) : match.end(group)] != "may":  # as written: `match` is of the lower-cased text
        return False
    return _PREPOSITION.search(text, 0, match.start(group)) is None


def _yearless_day(month: int, day: int) -> list[str]:
    """The token of a day named without a year (none for a day no year has)."""
    try:
        date(2000, month, day)  # a leap year: 29 February is a day
    except ValueError:
        return []
    return [f"{PREFIX}--{month:02d}-{day:02d}"]


def _resolve(match: re.Match[str], day: date) -> list[str]:
    """The tokens a relative expression points at, counted back from `day`."""
    phrase = match.group(1).lower()
    if phrase in ("today", "tonight", "this morning", "this afternoon"):
        return day_tokens(day)
    if phrase in ("yesterday", "last night"):
        return day_tokens(day - timedelta(days=1))
    if phrase == "the day before yesterday":
        return day_tokens(day - timedelta(days=2))
    if phrase in ("last week", "last weekend"):
        return day_tokens(day - timedelta(days=7))
    if phrase == "last month":
        first = day.replace(day=1) - timedelta(days=1)
        return month_tokens(first.year, first.month)
    if phrase == "last year":
        return [f"@{day.year - 1:04d}"]
    if phrase.startswith("last "):
        weekday = _WEEKDAYS[phrase[5:]]
        back = (day.weekday() - weekday) % 7 or 7
        return day_tokens(day - timedelta(days=back))
    count_word, unit = match.group(2).lower(), match.group(3).lower()
    count = int(count_word) if count_word.isdigit() else _NUMBERS[count_word]
    if unit == "day":
        return day_tokens(day - timedelta(days=count))
    if unit == "week":
        return day_tokens(day - timedelta(weeks=count))
    if unit == "month":
        months = day.year * 12 + day.month - 1 - count
        return month_tokens(months // 12, months % 12 + 1)
    return [f"@{day.year - count:04d}"]
