"""Time in one place: an injectable clock, the UTC ISO-8601 text every record stores, and time zones."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import tzlocal

logger = logging.getLogger(__name__)

Clock = Callable[[], datetime]
"""Returns the current time as an aware UTC datetime; tests pass their own."""

_WEEK_ONLY = re.compile(r"\d{4}-?W\d{2}")
"""An ISO week with no day (`2024-W18`): Python reads it as the Monday, so "until 2024-W18" would
end on that Monday; it is refused rather than read as one day of the seven."""


def system_clock() -> datetime:
    """The real current time in UTC."""
    return datetime.now(UTC)


def to_iso(moment: datetime) -> str:
    """Stored form of a time: UTC, microseconds, `Z` suffix, so text order is time order.

    Raises OverflowError when the moment falls outside the years 1-9999 once converted to UTC.
    """
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    # Not strftime: glibc's %Y drops the zero padding below year 1000, which breaks both the text
    # order and fromisoformat; isoformat always writes four digits.
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def from_iso(text: str) -> datetime:
    """Parse a stored (or caller-given ISO-8601) time back into an aware UTC datetime.

    Raises ValueError for text that is not ISO-8601 and OverflowError for a time whose UTC form
    falls outside the years 1-9999 (e.g. `9999-12-31T23:00:00-05:00`).
    """
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def local_minute(stored: str, zone: tzinfo) -> str:
    """A stored UTC time as a person in `zone` reads it, to the minute (`2026-01-04 22:00`): what the
    context and summaries show, so the day they name is the day a search by date finds it on."""
    return from_iso(stored).astimezone(zone).strftime("%Y-%m-%d %H:%M")


def date_only(text: str) -> date | None:
    """The day an ISO-8601 date names with no time of day (`2026-01-05`, `20260105`,
    `2026-W02-1`), or None for anything else."""
    text = text.strip()
    if "T" in text or " " in text or len(text) > 10 or _WEEK_ONLY.fullmatch(text.upper()):
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def parse_moment(value: str | datetime | date, zone: tzinfo = UTC) -> datetime:
    """Accept a datetime, a date or ISO-8601 text as an aware UTC datetime. A date means its midnight
    and a time without an offset means that wall-clock time, both in `zone` (the database's).

    Raises ValueError and OverflowError as `from_iso` does.
    """
    if isinstance(value, datetime):
        local = value
    elif isinstance(value, date):
        local = datetime(value.year, value.month, value.day)
    else:
        text = value.strip().upper()  # RFC 3339 allows "t" and "z", which fromisoformat refuses in lower case
        if _WEEK_ONLY.fullmatch(text):
            raise ValueError(f"{value!r} is a week, not a day")
        day = date_only(text)
        local = datetime(day.year, day.month, day.day) if day else datetime.fromisoformat(text)
    if local.tzinfo is None:
        local = local.replace(tzinfo=zone)
    return local.astimezone(UTC)


def end_of_day(day: date, zone: tzinfo = UTC) -> datetime:
    """The last microsecond of `day` in `zone`, as an aware UTC datetime (what "until that day" means).

    It is the instant before the next day begins: where clocks go back at midnight, the day's last
    hour comes round twice, and 23:59:59.999999 read on the wall would end it at the first.
    Raises OverflowError when it falls past the year 9999.
    """
    return parse_moment(day + timedelta(days=1), zone) - timedelta(microseconds=1)


def epoch(text: str) -> float:
    """Seconds since the epoch for a stored time (what the search index filters on)."""
    return from_iso(text).timestamp()


_WEEK = timedelta(weeks=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_us(moment: datetime) -> int:
    """Whole microseconds since the epoch of an aware time: exact, as a float of seconds is not."""
    return (moment - _EPOCH) // timedelta(microseconds=1)


def weeks_between(earlier: datetime, later: datetime) -> float:
    """Fractional weeks from `earlier` to `later`, never negative."""
    return max((later - earlier) / _WEEK, 0.0)


def zone(name: str) -> ZoneInfo:
    """The time zone of an IANA name ("Europe/Berlin", "UTC").

    Raises ValueError naming it when this machine's zone data has no such zone.
    """
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):  # ValueError: not even a well-formed key ("../x")
        raise ValueError(f"unknown time zone {name!r}; give an IANA name such as Europe/Berlin or UTC") from None


def local_zone_name() -> str:
    """This machine's time zone by its IANA name; "UTC" when it has none that the zone data knows."""
    try:
        name = tzlocal.get_localzone_name()
        if name:
            zone(name)
            return name
    except (ValueError, ZoneInfoNotFoundError) as exc:  # a TZ of "EST5EDT"-style rules, or conflicting files
        logger.warning("this machine's time zone is not one of the zone data's (%s): using UTC", exc)
    return "UTC"
