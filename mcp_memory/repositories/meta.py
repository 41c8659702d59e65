"""SQL for the key/value meta table, the audit log and database-wide health figures."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from mcp_memory.db import NESTED_ACTIONS, Later, Tx
from mcp_memory.repositories.base import Repository

_ZONE = "SELECT value FROM meta WHERE key = 'timezone'"
_AUDIT_HEAD = "SELECT coalesce(max(seq), 0) FROM audit_log"

COUNTED_TABLES = (
    "sessions",
    "observations",
    "memories",
    "lessons",
    "outcomes",
    "mistake_cards",
    "slots",
    "actions",
    "action_dependencies",
    "relations",
    "forgotten",
    "audit_log",
    "search_docs",
    "search_terms",
)

_REFLECTION = "reflection:"
"""Key prefix of a project's reflection, one entry per project (archive_tables.py names it too)."""
_FORGOTTEN_FACTS = "forgotten_facts:"
"""Key prefix of the facts a project forgot, one entry per project (like `reflection:`): the value is
`{"fingerprints": [...], "forgotten_at": ...}`, the sorted fingerprints and when the last was added."""


class MetaRepository(Repository):
    """Settings the database remembers about itself, and read-only health checks."""

    async def get(self, key: str) -> str | None:
        value = await self.conn.fetchval("SELECT value FROM meta WHERE key = ?", (key,))
        return None if value is None else str(value)

    async def set(self, key: str, value: str) -> None:
        await self.conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    async def reflection(self, project: str) -> dict[str, Any]:
        """What the project's last reflection keeps on its profile: `reflected_at` and `insights` ({} if none)."""
        stored = json.loads(await self.get(f"{_REFLECTION}{project}") or "{}")
        return stored if isinstance(stored, dict) else {}

    async def keep_reflection(self, project: str, at: str, insights: list[str]) -> None:
        """Replace the project's reflection (as an export's `reflections` table carries it)."""
        await self.set(
            f"{_REFLECTION}{project}", json.dumps({"reflected_at": at, "insights": insights}, sort_keys=True)
        )

    async def add_forgotten_facts(self, project: str, fingerprints: Iterable[str], at: str) -> None:
        """Record that `project` forgot the facts with these fingerprints (never their text)."""
        new = set(fingerprints)
        known = await self.forgotten_facts(project)
        if new <= known:
            return
        value = {"fingerprints": sorted(known | new), "forgotten_at": at}
        await self.set(f"{_FORGOTTEN_FACTS}{project}", json.dumps(value, sort_keys=True))

    async def forgotten_facts(self, project: str) -> frozenset[str]:
        """Fingerprints of the facts `project` forgot."""
        stored = json.loads(await self.get(f"{_FORGOTTEN_FACTS}{project}") or "{}")
        return frozenset(stored.get("fingerprints", ()))

    async def projects_of(self, table: str) -> list[str]:
        """Distinct projects holding rows of one of the project-scoped tables."""
        if table not in COUNTED_TABLES or table in ("action_dependencies", "search_terms", "audit_log"):
            raise ValueError(f"not a project-scoped table: {table}")
        rows = await self.conn.fetchall(f"SELECT DISTINCT project FROM {table} ORDER BY project")
        return [str(r[0]) for r in rows if r[0] is not None]

    async def schema_version(self) -> int:
        return int(await self.conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations") or 0)

    async def table_counts(self, project: str | None = None) -> dict[str, int]:
        """Rows per table; with `project`, that project's rows (the shared vocabulary is left out)."""
        if project is None:
            return {t: int(await self.conn.fetchval(f"SELECT count(*) FROM {t}")) for t in COUNTED_TABLES}
        counts = {}
        for table in COUNTED_TABLES:
            if table == "search_terms":
                continue
            sql = (
                "SELECT count(*) FROM action_dependencies d JOIN actions a ON a.id = d.action_id WHERE a.project = ?"
                if table == "action_dependencies"
                else f"SELECT count(*) FROM {table} WHERE project = ?"
            )
            counts[table] = int(await self.conn.fetchval(sql, (project,)))
        return counts

    async def integrity_check(self) -> list[str]:
        rows = await self.conn.fetchall("PRAGMA integrity_check")
        return [str(r[0]) for r in rows]

    async def pragmas(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in (
            "journal_mode",
            "page_size",
            "page_count",
            "freelist_count",
            "foreign_keys",
            "synchronous",
        ):
            out[name] = await self.conn.fetchval(f"PRAGMA {name}")
        out["sqlite_version"] = await self.conn.fetchval("SELECT sqlite_version()")
        return out

    async def last_audit_seq(self, queued: Later | None = None) -> int:
        """The newest audit row's seq (0 for an empty log); `queued`: the read `queue_last_audit_seq` queued."""
        if queued is not None and isinstance(self.conn, Tx):
            return int((await self.conn.rows_of(queued))[0][0])
        return int(await self.conn.fetchval(_AUDIT_HEAD))

    @staticmethod
    def queue_last_audit_seq(tx: Tx) -> Later:
        """Queue the read of `last_audit_seq` on the transaction's next trip, saving a trip of its own."""
        return tx.fetch_later(_AUDIT_HEAD)

    async def zone(self, queued: Later | None = None) -> str | None:
        """The time zone the stored date terms are analysed in; `queued`: the read `queue_zone` queued."""
        if queued is not None and isinstance(self.conn, Tx):
            rows = await self.conn.rows_of(queued)
            return str(rows[0][0]) if rows else None
        return await self.get("timezone")

    @staticmethod
    def queue_zone(tx: Tx) -> Later:
        """Queue the read of `zone` on the transaction's next trip."""
        return tx.fetch_later(_ZONE)

    async def audit_stamp(self, seq: int) -> str | None:
        """The time of audit row `seq` ("" for row 0, which stands for an empty log; None if missing)."""
        if seq == 0:
            return ""
        value = await self.conn.fetchval("SELECT at FROM audit_log WHERE seq = ?", (seq,))
        return None if value is None else str(value)

    async def changes_since(self, seq: int) -> int:
        """How many record changes the audit rows after `seq` list (a record may count more than once)."""
        return int(
            await self.conn.fetchval(
                "SELECT coalesce(sum(json_array_length(changes)), 0) FROM audit_log WHERE seq > ?", (seq,)
            )
        )

    async def action_since(self, seq: int, action: str) -> bool:
        """Whether an audit row after `seq` records `action`, as its own or as one run inside another."""
        found = await self.conn.fetchval(
            "SELECT 1 FROM audit_log WHERE seq > ? AND (action = ? OR (detail IS NOT NULL AND EXISTS "
            f"(SELECT 1 FROM json_each(detail, '$.{NESTED_ACTIONS}') WHERE value = ?))) LIMIT 1",
            (seq, action, action),
        )
        return found is not None

    async def audit_since(self, seq: int, limit: int = 1000) -> list[tuple[int, str, str]]:
        """Audit rows after `seq`: (seq, action, changes JSON), oldest first."""
        rows = await self.conn.fetchall(
            "SELECT seq, action, changes FROM audit_log WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
        )
        return [(r[0], r[1], r[2]) for r in rows]
