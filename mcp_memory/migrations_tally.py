"""Migration 7's SQL: a running count of each project's concepts and files, kept by triggers.

Part of the append-only history in `mcp_memory.migrations`; never edit what has shipped.
"""

from __future__ import annotations

_TALLIED = ("concepts", "files")


def _tally(row: str, add: bool, guard: str, seek: bool = False) -> list[str]:
    """Statements a trigger runs to add or take away one row's concepts and files (when `guard` holds);
    with `seek`, the counts that reach 0 are looked for among the row's own values only."""
    statements = []
    for field in _TALLIED:
        match = f"project = {row}.project AND field = '{field}' AND {guard}"
        spent = f"{match} AND value IN (SELECT value FROM json_each({row}.{field}))" if seek else match
        statements += (
            # GROUP BY ends the SELECT, so ON CONFLICT cannot be read as a join's constraint
            [f"INSERT INTO profile_tally (project, field, value, n) SELECT {row}.project, '{field}', j.value, count(*)"
             f" FROM json_each({row}.{field}) j WHERE {guard} GROUP BY j.value"
             " ON CONFLICT (project, field, value) DO UPDATE SET n = n + excluded.n"]
            if add else
            [f"UPDATE profile_tally SET n = n - (SELECT count(*) FROM json_each({row}.{field}) j WHERE j.value"
             f" = profile_tally.value) WHERE {match} AND value IN (SELECT value FROM json_each({row}.{field}))",
             f"DELETE FROM profile_tally WHERE {spent} AND n <= 0"]
        )  # fmt: skip
    return statements


def _tally_triggers(table: str, latest_only: bool, seek: bool = False, only: tuple[str, ...] = ()) -> list[str]:
    """Triggers that keep the count of `table`'s rows: all of them, or only the latest versions
    (`seek`: see `_tally`; `only`: these of the insert, delete and update triggers)."""
    old, new = ("OLD.is_latest = 1", "NEW.is_latest = 1") if latest_only else ("1", "1")
    also = ", is_latest" if latest_only else ""
    events = {
        "insert": ("INSERT", _tally("NEW", True, new)),
        "delete": ("DELETE", _tally("OLD", False, old, seek)),
        "update": (
            f"UPDATE OF project, concepts, files{also}",
            [*_tally("OLD", False, old, seek), *_tally("NEW", True, new)],
        ),
    }
    return [
        f"CREATE TRIGGER {table}_tally_{name} AFTER {event} ON {table} BEGIN {'; '.join(body)}; END"
        for name, (event, body) in events.items()
        if not only or name in only
    ]


PROFILE_TALLY = [
    # The profile's top concepts and files were counted by reading every record's lists (a second at
    # 100k observations). Triggers keep a running count instead, so every writer, whichever process
    # or path it takes (observe, save, import, forget, consolidation), keeps it true in the same
    # transaction as its change; observations count wholly, memories while they are the latest.
    """CREATE TABLE profile_tally (
        project TEXT NOT NULL,
        field   TEXT NOT NULL,
        value   TEXT NOT NULL,
        n       INTEGER NOT NULL,
        PRIMARY KEY (project, field, value)
    ) WITHOUT ROWID""",
    "CREATE INDEX profile_tally_top ON profile_tally (project, field, n DESC, value)",
    *(
        f"INSERT INTO profile_tally (project, field, value, n) SELECT project, '{field}', value, count(*) FROM ("
        f" SELECT o.project, j.value FROM observations o, json_each(o.{field}) j UNION ALL"
        f" SELECT m.project, j.value FROM memories m, json_each(m.{field}) j WHERE m.is_latest = 1"
        ") GROUP BY project, value"
        for field in _TALLIED
    ),
    *_tally_triggers("observations", latest_only=False),
    *_tally_triggers("memories", latest_only=True),
]


TALLY_SEEKS_SPENT_COUNTS = [
    # Taking a row's values away deleted the counts left at 0 by reading every count of the project
    # (without migration 7's index on them, which migration 8 dropped): folding a dozen observations
    # at 100k took 41 ms, and superseding a memory paid the same. The counts that can reach 0 are
    # those of the row's own values, found by the primary key.
    *(f"DROP TRIGGER {table}_tally_{name}" for table in ("observations", "memories") for name in ("delete", "update")),
    *_tally_triggers("observations", latest_only=False, seek=True, only=("delete", "update")),
    *_tally_triggers("memories", latest_only=True, seek=True, only=("delete", "update")),
]
