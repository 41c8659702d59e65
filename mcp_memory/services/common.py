"""What every service shares: its dependencies, the clock, privacy scrubbing and input rules."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo

import anyio.lowlevel
import numpy as np
import numpy.typing as npt

from mcp_memory.clock import Clock, date_only, end_of_day, epoch, parse_moment, to_iso
from mcp_memory.config import Settings
from mcp_memory.db import Database, Tx
from mcp_memory.errors import InvalidInputError
from mcp_memory.ids import PREFIXES, kind_of
from mcp_memory.privacy import PrivacyFilter, name_problem, says_something, without_markers
from mcp_memory.search.index import SearchIndex
from mcp_memory.services.embedding import Embedder
from mcp_memory.services.index_build import IndexBuilder
from mcp_memory.services.indexing import Indexer

Progress = Callable[[int, int, str], Awaitable[None]]
"""Reports (steps done, steps in all, what is next) of a long call, e.g. as MCP progress notifications."""


async def no_progress(done: int, total: int, message: str) -> None:
    """A Progress that reports nowhere."""


class Breather:
    """Lets other requests run during a long computation on the event loop: awaited once per item,
    it yields when `slice_s` of work has passed since it last did. Each database round trip of
    another request waits for one slice, so a save (a dozen trips) beside a pass took 57 ms with
    5 ms slices and takes 14 ms with 1 ms ones, the pass 3 % longer. (Yielding every 100 items
    instead made that save take 0.7 s beside a plan over 100,000 memories.)"""

    def __init__(self, slice_s: float = 0.001) -> None:
        self._slice = slice_s
        self._since = time.perf_counter()

    async def __call__(self) -> None:
        if time.perf_counter() - self._since >= self._slice:
            await anyio.lowlevel.checkpoint()
            self._since = time.perf_counter()


GLOBAL_PROJECT = "*"
"""The project name of the global scope (lessons and slots shared by every project)."""

_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")  # fullmatch: "$" would admit a final newline
_RECORD_PREFIXES = " ".join(f"{prefix}_" for kind, prefix in PREFIXES.items() if kind != "session")


@dataclass(frozen=True, slots=True)
class Deps:
    """Everything a service may use, built once by the server's lifespan."""

    settings: Settings
    db: Database
    index: SearchIndex
    indexer: Indexer
    builder: IndexBuilder
    privacy: PrivacyFilter
    clock: Clock
    embedder: Embedder | None = None  # only with an embedding provider configured


NO_WORDS = (
    "The query has no word to search for (stop words such as 'what' or 'the', punctuation and single letters are "
    "left out): name the thing, person, file or date you are looking for."
)
"""The hint of a search whose query has no word left to look up."""


class Service:
    """Base of the services: access to dependencies and the current time."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.db = deps.db
        self.settings = deps.settings

    def now(self) -> datetime:
        return self.deps.clock()

    async def query_vector(self, query: str) -> npt.NDArray[np.float32] | None:
        """The query's embedding for hybrid search, or None (no provider, or it failed: BM25 alone)."""
        embedder = self.deps.embedder
        return None if embedder is None else await embedder.query_vector(query)

    def now_iso(self) -> str:
        return to_iso(self.deps.clock())

    @property
    def zone(self) -> tzinfo:
        """The database's time zone: the one a caller's date or time without an offset is read in."""
        return self.deps.index.zone

    def searchable(self, query: str) -> bool:
        """Whether `query` has a word (or a date) the index can look up."""
        return bool(self.deps.index.query_words(query, self.now().timestamp()))

    def scrubber(self) -> Scrubber:
        """A scrubber that accumulates redaction counts for one call."""
        return Scrubber(self.deps.privacy)


class Scrubber:
    """Applies the privacy filter to every text of one call and keeps the counts."""

    def __init__(self, privacy: PrivacyFilter) -> None:
        self._privacy = privacy
        self.counts: Counter[str] = Counter()

    def text(self, value: str) -> str:
        result = self._privacy.clean(_readable(value))
        self.counts.update(result.counts)
        return result.text

    def optional(self, value: str | None) -> str | None:
        return None if value is None else self.text(value)

    def many(self, values: Iterable[str] | None) -> list[str] | None:
        return None if values is None else [self.text(v) for v in values]

    def summary(self) -> dict[str, int]:
        return dict(self.counts)

    def query(self, query: str) -> tuple[str, str]:
        """A search query as echoed (secrets and private parts shown as removed) and as searched (without them).

        A redacted secret cannot match anything stored, and must not reach an embedding provider.
        """
        shown = self.text(query)
        return shown, " ".join(without_markers(shown).split())

    def required(self, field: str, value: str) -> str:
        """Scrub a required text; refuse it when no letter or digit is left outside private or secret parts."""
        result = self._privacy.clean(_readable(value))
        if not says_something(result.text):
            if result.counts:
                raise InvalidInputError(field, "must contain text other than private or secret parts")
            raise InvalidInputError(field, "must contain text (letters or digits)")
        self.counts.update(result.counts)
        return result.text


TAG_CHARS = 60
"""The longest tag stored (composed, as tags are kept)."""


def normal_forms(field: str, values: Sequence[str], normalise: Callable[[str], str], limit: int) -> list[str]:
    """Each of `values` as it is stored (`normalise`d), or an error naming the first that grows past
    `limit` characters (markers of redacted parts aside) in that form: lower case or composition
    can lengthen a text ("ß" to "ss"), and what is stored must be what an import of it takes back."""
    forms = []
    for i, value in enumerate(values):
        form = normalise(value)
        if len(form) > limit and len(without_markers(form)) > limit:
            raise InvalidInputError(f"{field}.{i}", f"must be at most {limit} characters as stored ({len(form)})")
        forms.append(form)
    return forms


def _readable(text: str) -> str:
    """`text` with each NUL made U+FFFD: a NUL ends a C string, so SQLite's text functions and
    many readers of an export would stop at it, and it never means anything in a note."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def check_session_id(session_id: str) -> str:
    """A caller-chosen session id, or an error naming the field."""
    if not _SESSION_ID.fullmatch(session_id):
        raise InvalidInputError(
            "session_id",
            "must be 1-128 characters of letters, digits and . _ : @ - (ASCII only: no accented letters), "
            "starting with a letter or digit",
        )
    # Ids are stored, indexed and exported as they are: one holding a secret is refused, not redacted.
    problem = name_problem(session_id)
    if problem is not None:
        raise InvalidInputError("session_id", problem)
    # Ids are routed by their prefix, so a session named "mem_chat" could never be found by id again.
    kind = kind_of(session_id)
    if kind is not None and kind != "session":
        raise InvalidInputError(
            "session_id",
            f"must not start with {session_id.partition('_')[0]}_, the prefix of {kind.replace('_', ' ')} ids "
            f"(a name starting with {_RECORD_PREFIXES} could not be told from a record id); "
            "pick another name, e.g. 'chat-1'",
        )
    return session_id


_NOT_A_MOMENT = "must be an ISO-8601 date or date-time in the years 0001-9999, e.g. 2024-05-01T14:30:00Z"


def moment(field: str, value: str | None, zone: tzinfo) -> str | None:
    """Caller-given time (ISO-8601 or a date; without an offset, in the database's `zone`) as stored
    text, or an error naming the field."""
    if value is None:
        return None
    try:
        return to_iso(parse_moment(value, zone))
    except ValueError:
        raise InvalidInputError(field, _NOT_A_MOMENT) from None
    except OverflowError:  # valid text whose offset moves it past year 1 or 9999 in UTC
        raise InvalidInputError(
            field, "must fall within the years 0001-9999 once converted to UTC, e.g. 2024-05-01T14:30:00Z"
        ) from None


def time_window(since: str | None, until: str | None, zone: tzinfo) -> tuple[str | None, str | None]:
    """A validated (since, until) pair of stored times; a date-only `until` includes that whole day,
    and days and times without an offset are read in the database's `zone`."""
    start, end = _bound("since", since, zone), _bound("until", until, zone)
    if start and end and start > end:
        raise InvalidInputError("since", "must not be later than until")
    return start, end


def _bound(field: str, value: str | None, zone: tzinfo) -> str | None:
    """One end of a time window as stored text. A day at the calendar's edge whose bound in `zone`
    falls past it in UTC is that edge: "until 9999-12-31" in New York still means "until the end"."""
    day = None if value is None else date_only(value)
    if day is None:
        return moment(field, value, zone)
    try:
        return to_iso(end_of_day(day, zone) if field == "until" else parse_moment(day, zone))
    except OverflowError:
        return to_iso(datetime.max if day.year == 9999 else datetime.min)


_CALLER = "caller project"


def note_caller(tx: Tx, project: str) -> None:
    """Note the project of the caller whose write is of global records (the transaction's project):
    those open its context too, so listeners to that project's resources hear of the write."""
    tx.extra[_CALLER] = project


def caller_project(tx: Tx) -> str | None:
    """The caller's project noted by `note_caller`, if any."""
    project = tx.extra.get(_CALLER)
    return project if isinstance(project, str) else None


def idle_cutoff(now: datetime, minutes: int) -> str:
    """Stored time before which an open session counts as idle: one with no observation for `minutes`
    (exactly that long, too) is; stored times have microseconds, so the cutoff is a microsecond later."""
    return to_iso(earlier_by(now, timedelta(minutes=1), minutes) + timedelta(microseconds=1))


def earlier_by(now: datetime, unit: timedelta, count: int) -> datetime:
    """`now` less `count` units, or the first moment of the calendar when that reaches before it (a
    setting meant as "never", given as a very large number, must not fail every call)."""
    try:
        return now - unit * count
    except OverflowError:
        return datetime.min.replace(tzinfo=now.tzinfo)


def epoch_or_none(stored: str | None) -> float | None:
    """A stored time as epoch seconds (what the index filters on), passing None through."""
    return None if stored is None else epoch(stored)


def compared_terms(analyse: Callable[[str], Iterable[str]], text: str | None) -> frozenset[str]:
    """The words two errors or strategies are compared on: not those of our own `[private]` /
    `[REDACTED:…]` markers, which say nothing of what they hid (two private strategies are not alike)."""
    return frozenset(analyse(without_markers(text or "")))


def jaccard(a: AbstractSet[Hashable], b: AbstractSet[Hashable]) -> float:
    """Overlap of two sets of words (or term ids); 0.0 when either is empty (nothing to compare)."""
    return len(a & b) / len(a | b) if a and b else 0.0
