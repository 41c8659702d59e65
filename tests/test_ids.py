"""Record ids: a kind prefix, then time, then randomness, sorting in the order one process made them."""

from __future__ import annotations

import pytest

from mcp_memory import ids
from mcp_memory.ids import kind_of, new_id


def test_ids_made_in_one_millisecond_sort_in_the_order_they_were_made() -> None:
    made = [new_id("lesson") for _ in range(5_000)]  # many share a millisecond

    assert made == sorted(made)
    assert len(set(made)) == len(made)
    assert {kind_of(i) for i in made} == {"lesson"}


def test_an_id_made_after_the_clock_stepped_back_still_sorts_after(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_600_000_000_000 * 1_000_000]  # in the past: ids made after this test are not held back
    monkeypatch.setattr(ids.time, "time_ns", lambda: now[0])
    monkeypatch.setattr(ids, "_last", (0, 0))
    first = new_id("memory")
    now[0] -= 5_000 * 1_000_000  # an NTP correction of five seconds
    second = new_id("memory")
    now[0] += 10_000 * 1_000_000
    third = new_id("memory")

    assert first < second < third
    assert second[4:14] == first[4:14]  # the millisecond of the first: the clock's step is not taken
    assert third[4:14] > first[4:14]
