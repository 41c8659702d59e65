"""Numbered, append-only schema migrations; `mcp_memory.migrate` applies them.

Never edit a migration that has shipped: add the next number.
"""

from __future__ import annotations

from mcp_memory.migrations_tally import PROFILE_TALLY, TALLY_SEEKS_SPENT_COUNTS

# Times are UTC ISO-8601 text ("2026-01-02T03:04:05.000000Z"); lists are JSON arrays in TEXT.
_V1_FOUNDATION = [
    """CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    """CREATE TABLE sessions (
        id                TEXT PRIMARY KEY,
        project           TEXT NOT NULL,
        agent_id          TEXT,
        title             TEXT,
        started_at        TEXT NOT NULL,
        last_activity_at  TEXT NOT NULL,
        ended_at          TEXT,
        summary           TEXT,
        summary_source    TEXT,
        summarized_at     TEXT,
        folded_digest     TEXT,
        observation_count INTEGER NOT NULL DEFAULT 0,
        folded_count      INTEGER NOT NULL DEFAULT 0,
        created_at        TEXT NOT NULL,
        updated_at        TEXT NOT NULL
    )""",
    "CREATE INDEX sessions_by_project ON sessions (project, started_at)",
    "CREATE INDEX sessions_open ON sessions (project, agent_id, ended_at, last_activity_at)",
    """CREATE TABLE observations (
        id          TEXT PRIMARY KEY,
        project     TEXT NOT NULL,
        session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        agent_id    TEXT,
        seq         INTEGER NOT NULL,
        type        TEXT NOT NULL,
        title       TEXT NOT NULL,
        content     TEXT NOT NULL,
        facts       TEXT NOT NULL DEFAULT '[]',
        concepts    TEXT NOT NULL DEFAULT '[]',
        files       TEXT NOT NULL DEFAULT '[]',
        importance  REAL NOT NULL DEFAULT 0.5,
        ref         TEXT,
        occurred_at TEXT,
        created_at  TEXT NOT NULL
    )""",
    "CREATE INDEX observations_by_session ON observations (session_id, seq)",
    "CREATE INDEX observations_by_time ON observations (project, coalesce(occurred_at, created_at))",
    "CREATE INDEX observations_by_ref ON observations (project, ref) WHERE ref IS NOT NULL",
    """CREATE TABLE memories (
        id          TEXT PRIMARY KEY,
        project     TEXT NOT NULL,
        agent_id    TEXT,
        session_id  TEXT REFERENCES sessions (id) ON DELETE SET NULL,
        kind        TEXT NOT NULL,
        title       TEXT,
        content     TEXT NOT NULL,
        concepts    TEXT NOT NULL DEFAULT '[]',
        files       TEXT NOT NULL DEFAULT '[]',
        importance  REAL NOT NULL DEFAULT 0.5,
        ref         TEXT,
        occurred_at TEXT,
        root_id     TEXT NOT NULL,
        parent_id   TEXT REFERENCES memories (id) ON DELETE SET NULL,
        version     INTEGER NOT NULL DEFAULT 1,
        is_latest   INTEGER NOT NULL DEFAULT 1,
        superseded_by TEXT,
        similarity  REAL,
        created_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL
    )""",
    "CREATE INDEX memories_latest ON memories (project, is_latest, kind)",
    "CREATE INDEX memories_chain ON memories (root_id, version)",
    """CREATE TABLE lessons (
        id                 TEXT PRIMARY KEY,
        project            TEXT NOT NULL,
        agent_id           TEXT,
        kind               TEXT NOT NULL DEFAULT 'lesson',
        content            TEXT NOT NULL,
        context            TEXT,
        tags               TEXT NOT NULL DEFAULT '[]',
        task_type          TEXT,
        confidence         REAL NOT NULL,
        reinforcements     INTEGER NOT NULL DEFAULT 0,
        fingerprint        TEXT NOT NULL,
        last_reinforced_at TEXT NOT NULL,
        decayed_at         TEXT,
        deleted_at         TEXT,
        source             TEXT NOT NULL DEFAULT '{}',
        created_at         TEXT NOT NULL,
        updated_at         TEXT NOT NULL,
        UNIQUE (project, fingerprint)
    )""",
    "CREATE INDEX lessons_by_kind ON lessons (project, kind, deleted_at)",
    """CREATE TABLE outcomes (
        id          TEXT PRIMARY KEY,
        project     TEXT NOT NULL,
        agent_id    TEXT,
        session_id  TEXT REFERENCES sessions (id) ON DELETE SET NULL,
        task        TEXT NOT NULL,
        task_type   TEXT NOT NULL,
        task_type_inferred INTEGER NOT NULL DEFAULT 0,
        success     INTEGER,
        score       REAL,
        steps       TEXT NOT NULL DEFAULT '[]',
        strategy    TEXT,
        duration_s  REAL,
        error       TEXT,
        feedback    TEXT,
        mistakes    TEXT NOT NULL DEFAULT '[]',
        successes   TEXT NOT NULL DEFAULT '[]',
        created_at  TEXT NOT NULL
    )""",
    "CREATE INDEX outcomes_by_type ON outcomes (project, task_type, created_at)",
    """CREATE TABLE mistake_cards (
        id               TEXT PRIMARY KEY,
        project          TEXT NOT NULL,
        merge_key        TEXT NOT NULL,
        task_type        TEXT,
        type             TEXT NOT NULL,
        task             TEXT NOT NULL,
        wrong_decision   TEXT,
        correct_decision TEXT NOT NULL,
        why              TEXT,
        seen_count       INTEGER NOT NULL DEFAULT 1,
        first_seen_at    TEXT NOT NULL,
        last_seen_at     TEXT NOT NULL,
        created_at       TEXT NOT NULL,
        updated_at       TEXT NOT NULL,
        UNIQUE (project, merge_key)
    )""",
    """CREATE TABLE outcome_mistake_cards (
        outcome_id TEXT NOT NULL REFERENCES outcomes (id) ON DELETE CASCADE,
        card_id    TEXT NOT NULL REFERENCES mistake_cards (id) ON DELETE CASCADE,
        PRIMARY KEY (outcome_id, card_id)
    )""",
    """CREATE TABLE slots (
        id          TEXT PRIMARY KEY,
        project     TEXT NOT NULL,
        name        TEXT NOT NULL,
        content     TEXT NOT NULL DEFAULT '',
        size_limit  INTEGER NOT NULL,
        pinned      INTEGER NOT NULL DEFAULT 0,
        description TEXT,
        created_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL,
        UNIQUE (project, name)
    )""",
    """CREATE TABLE actions (
        id           TEXT PRIMARY KEY,
        project      TEXT NOT NULL,
        agent_id     TEXT,
        title        TEXT NOT NULL,
        description  TEXT,
        status       TEXT NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'active', 'blocked', 'done', 'cancelled')),
        priority     INTEGER NOT NULL DEFAULT 0,
        parent_id    TEXT REFERENCES actions (id) ON DELETE SET NULL,
        tags         TEXT NOT NULL DEFAULT '[]',
        due          TEXT,
        completed_at TEXT,
        created_at   TEXT NOT NULL,
        updated_at   TEXT NOT NULL
    )""",
    "CREATE INDEX actions_by_status ON actions (project, status, priority)",
    "CREATE INDEX actions_by_parent ON actions (parent_id)",
    """CREATE TABLE action_dependencies (
        action_id  TEXT NOT NULL REFERENCES actions (id) ON DELETE CASCADE,
        depends_on TEXT NOT NULL REFERENCES actions (id) ON DELETE CASCADE,
        PRIMARY KEY (action_id, depends_on),
        CHECK (action_id <> depends_on)
    )""",
    "CREATE INDEX action_dependencies_reverse ON action_dependencies (depends_on)",
    """CREATE TABLE relations (
        id          TEXT PRIMARY KEY,
        project     TEXT NOT NULL,
        source_id   TEXT NOT NULL,
        target_id   TEXT NOT NULL,
        type        TEXT NOT NULL,
        weight      REAL NOT NULL DEFAULT 1.0,
        note        TEXT,
        created_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL,
        UNIQUE (source_id, target_id, type)
    )""",
    "CREATE INDEX relations_by_target ON relations (target_id)",
    """CREATE TABLE audit_log (
        seq     INTEGER PRIMARY KEY AUTOINCREMENT,
        at      TEXT NOT NULL,
        project TEXT,
        actor   TEXT,
        action  TEXT NOT NULL,
        changes TEXT NOT NULL,
        detail  TEXT
    )""",
    # The search index's stored form: each record's analysed terms as (term id, count) pairs, so a
    # start-up rebuild reads ready postings instead of re-tokenising every record.
    """CREATE TABLE search_terms (
        id   INTEGER PRIMARY KEY AUTOINCREMENT,
        term TEXT NOT NULL UNIQUE
    )""",
    """CREATE TABLE search_docs (
        doc_id     TEXT PRIMARY KEY,
        kind       TEXT NOT NULL,
        subtype    TEXT,
        project    TEXT NOT NULL,
        session_id TEXT,
        at         REAL NOT NULL,
        length     INTEGER NOT NULL,
        terms      BLOB NOT NULL,
        analyzer   INTEGER NOT NULL
    )""",
]

_V2_RANKING_AND_VECTORS = [
    # Where an episodic record sits in its session and how important it is: ranking uses both.
    "ALTER TABLE search_docs ADD COLUMN seq INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE search_docs ADD COLUMN weight REAL NOT NULL DEFAULT 0.5",
    # Optional embedding vectors (float32 blobs), one per indexed record: which model made it,
    # and a digest of the text it was made from, so a changed record or model is re-embedded.
    """CREATE TABLE embeddings (
        doc_id     TEXT PRIMARY KEY,
        model      TEXT NOT NULL,
        dim        INTEGER NOT NULL,
        digest     TEXT NOT NULL,
        vector     BLOB NOT NULL,
        created_at TEXT NOT NULL
    )""",
]

_V3_TEXT_DIGESTS = [
    # A digest of the text each record was indexed from: a vector is current only while it matches.
    "ALTER TABLE search_docs ADD COLUMN digest TEXT NOT NULL DEFAULT ''",
    "CREATE INDEX embeddings_model ON embeddings (model)",
]

_V4_ANALYZER_INDEX = [
    # Start-up asks whether any record was analysed by another analyzer version: with this index
    # that is two short range scans instead of reading every stored term list from disk.
    "CREATE INDEX search_docs_analyzer ON search_docs (analyzer)",
]

_TABLE_OF_PREFIX = {
    "obs": "observations", "mem": "memories", "les": "lessons", "out": "outcomes", "mc": "mistake_cards",
    "slot": "slots", "act": "actions",
}  # fmt: skip

_V5_DANGLING_RELATIONS = [
    # Deleting a slot or trimming a mistake card used to leave its relations behind, and an export
    # holding such an edge cannot be imported: drop every edge whose end names a record that is gone.
    f"DELETE FROM relations WHERE ({end} LIKE '{prefix}\\_%' ESCAPE '\\' AND {end} NOT IN (SELECT id FROM {table}))"
    for prefix, table in _TABLE_OF_PREFIX.items()
    for end in ("source_id", "target_id")
]

_V6_RELATIONS_PER_PROJECT = [
    # Relations were unique by (source, target, type) alone, so two projects relating the same two
    # global lessons or slots shared one edge (and its note). SQLite cannot change a table's UNIQUE
    # rule in place: build the table anew, copy every edge, and swap it in with its index.
    """CREATE TABLE relations_v6 (
        id          TEXT PRIMARY KEY,
        project     TEXT NOT NULL,
        source_id   TEXT NOT NULL,
        target_id   TEXT NOT NULL,
        type        TEXT NOT NULL,
        weight      REAL NOT NULL DEFAULT 1.0,
        note        TEXT,
        created_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL,
        UNIQUE (project, source_id, target_id, type)
    )""",
    "INSERT INTO relations_v6 (id, project, source_id, target_id, type, weight, note, created_at, updated_at) "
    "SELECT id, project, source_id, target_id, type, weight, note, created_at, updated_at FROM relations",
    "DROP TABLE relations",
    "ALTER TABLE relations_v6 RENAME TO relations",
    "CREATE INDEX relations_by_target ON relations (target_id)",
]


_V8_NO_TALLY_INDEX = [
    # Migration 7's index on the counts moved an entry on every count a write changed: 0.25 ms more
    # per observation on disk, for a top-k read that scans the (project, field) rows in 2 ms at 100k.
    "DROP INDEX IF EXISTS profile_tally_top",
]

_V9_FORGOTTEN_RECORDS = [
    # What memory_forget deleted, by id and project only (never its text): an export carries these,
    # so an import on another machine forgets the same records and none comes back from an old copy.
    """CREATE TABLE forgotten (
        id           TEXT PRIMARY KEY,
        project      TEXT NOT NULL,
        kind         TEXT NOT NULL,
        forgotten_at TEXT NOT NULL
    )""",
    "CREATE INDEX forgotten_by_project ON forgotten (project)",
]

_V10_OBSERVATIONS_BY_TYPE = [
    # memory_observations filtered by type counted its matches by reading every observation of the
    # project (45 ms at 100,000); with this index, 1 ms. A write costs no measurable more.
    "CREATE INDEX observations_by_type ON observations (project, type, coalesce(occurred_at, created_at))",
]

_V11_FOLDED_OBSERVATIONS = [
    # A folded observation's row is deleted and a line of its session's digest stands for it; an
    # import of a copy made before the fold brought the row back beside the line (counted twice).
    # Its id is kept here (never its text), and travels with exports, so no copy stores it again.
    """CREATE TABLE folded_observations (
        id          TEXT PRIMARY KEY,
        project     TEXT NOT NULL,
        session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        happened_at TEXT NOT NULL,
        folded_at   TEXT NOT NULL
    )""",
    "CREATE INDEX folded_observations_by_session ON folded_observations (session_id, happened_at)",
]

_V12_RELATIONS_BY_SOURCE = [
    # The unique index leads with the project, so finding the edges of records that go away (a
    # forget, a fold at the observation cap, a pruned outcome), which spans every project, read the
    # whole table: 57 ms at a million edges, on every observe past the cap. With this: 0.1 ms.
    "CREATE INDEX relations_by_source ON relations (source_id)",
]

_NAMES_NOT_ASCII = "project GLOB '*[^ -~]*' AND project != nfc(project)"
# Project names are stored composed (NFC) from now on: a macOS client's roots gave "Café" decomposed
# while a typed name is composed, so one project was two. Rows are renamed where they stand; a row
# whose composed name would collide with one already there (a slot, lesson or mistake card kept in
# both spellings) is left as it was, whole, rather than merged by guesswork. nfc() is registered on
# every connection. Renaming observations and memories moves their profile counts by trigger.
_V13_COMPOSED_PROJECT_NAMES = [
    *(
        f"UPDATE OR IGNORE {table} SET project = nfc(project) WHERE {_NAMES_NOT_ASCII}"
        for table in (
            "sessions", "observations", "memories", "lessons", "outcomes", "mistake_cards", "slots",
            "actions", "relations", "forgotten", "folded_observations", "audit_log",
        )
    ),
    # An indexed record and its entry keep one project: a lesson left in the old spelling keeps its entry's.
    f"UPDATE search_docs SET project = nfc(project) WHERE {_NAMES_NOT_ASCII}"
    " AND doc_id NOT IN (SELECT id FROM lessons WHERE project GLOB '*[^ -~]*' AND project != nfc(project))",
]  # fmt: skip

_V14_PRUNED_OUTCOMES = [
    # Consolidation deletes old outcomes a heuristic or anti-pattern stands for; their task type,
    # result and time stay here (never their text), so score histories and success rates per task
    # type outlive them. Travels with exports; a row brought back by restore_forgotten wins over it.
    """CREATE TABLE pruned_outcomes (
        id         TEXT PRIMARY KEY,
        project    TEXT NOT NULL,
        task_type  TEXT NOT NULL,
        success    INTEGER,
        score      REAL,
        created_at TEXT NOT NULL,
        pruned_at  TEXT NOT NULL
    )""",
    "CREATE INDEX pruned_outcomes_by_type ON pruned_outcomes (project, task_type, created_at)",
]

_V15_OBSERVATIONS_BY_SESSION_TIME = [
    # When a session's first and latest observations happened (the context's recent sessions, the
    # sessions list, a session's search date) read every row of each session: 19 ms for the 25
    # sessions of 500 observations a context lists. With this index, two seeks per session: 0.1 ms.
    "CREATE INDEX observations_by_session_time ON observations (session_id, coalesce(occurred_at, created_at))",
]

_V16_FIX_CUES = [
    # Naming the fix of each error a search finds ran the patterns of services/fixes.py over every
    # observation of a window after it, on every query: about 2 ms of a 9 ms recall at 100k. What
    # they find depends on the observation alone, so it is worked out when the observation is
    # recorded or imported (Cues, as JSON; NULL: worked out when read, as for rows from before).
    "ALTER TABLE observations ADD COLUMN fix_cues TEXT",
    # Whatever changes an observation's text, its cues are no longer its own.
    "CREATE TRIGGER observations_fix_cues_stale AFTER UPDATE OF type, title, content, concepts, files "
    "ON observations WHEN NEW.fix_cues IS OLD.fix_cues AND NEW.fix_cues IS NOT NULL "
    "BEGIN UPDATE observations SET fix_cues = NULL WHERE id = NEW.id; END",
]

# Microseconds since 1970 of a stored time (to_iso's YYYY-MM-DDTHH:MM:SS.ffffffZ; NULL for any other
# form), exactly: the whole seconds of its first 19 characters, plus its six digits of fraction.
_V17_US = (
    "CASE WHEN length({t}) = 27 AND substr({t}, 20, 1) = '.' AND substr({t}, 27) = 'Z' "
    "THEN CAST(strftime('%s', substr({t}, 1, 19)) AS INTEGER) * 1000000 + CAST(substr({t}, 21, 6) AS INTEGER) END"
)
_V17_SINCE = "max({r}.last_reinforced_at, coalesce({r}.decayed_at, ''))"
_V17_SET_SINCE = "UPDATE lessons SET since_us = {us} WHERE rowid = NEW.rowid"

_V17_LESSON_STANDINGS = [
    # Lessons rank by their confidence as of now (decayed for the weeks since it was last set), so no
    # stored order answers "the best ten": each read judges every lesson of a scope. Judged in Python,
    # that was over a second at 100,000 lessons. SQL judges them now, from an index holding all it
    # reads, with the time since which each confidence decays kept as a number beside it (parsing
    # the text for every lesson on every read cost more than the judging).
    "ALTER TABLE lessons ADD COLUMN since_us INTEGER",
    "UPDATE lessons SET since_us = " + _V17_US.format(t=_V17_SINCE.format(r="lessons")),
    "CREATE TRIGGER lessons_since_us_insert AFTER INSERT ON lessons BEGIN "
    + _V17_SET_SINCE.format(us=_V17_US.format(t=_V17_SINCE.format(r="NEW")))
    + "; END",
    "CREATE TRIGGER lessons_since_us_update AFTER UPDATE OF last_reinforced_at, decayed_at ON lessons BEGIN "
    + _V17_SET_SINCE.format(us=_V17_US.format(t=_V17_SINCE.format(r="NEW")))
    + "; END",
    "CREATE INDEX lessons_by_standing ON lessons "
    "(project, deleted_at, task_type, kind, reinforcements, confidence, since_us, id)",
]

_V18_SESSIONS_BY_ACTIVITY = [
    # The recent sessions the context lists and memory_sessions pages through, most recently active
    # first: without this each read sorted every session of the project with its summary and digest
    # (3.4 ms of a 17 ms context at 2,000 sessions). An observe moves its session's entry; measured
    # beside the writes it costs nothing we could tell apart (unlike the profile's counts, migration 8).
    "CREATE INDEX sessions_by_activity ON sessions (project, last_activity_at, id)",
]

_V20_MEMORIES_BY_CONTENT = [
    # A memory saved again with the same content is the same memory, however its title, concepts or
    # files make their term sets differ (a long title first, none the second time): the search index
    # finds only near-duplicates by Jaccard, so the save also seeks the same content here. Length and
    # opening keep the index small; the content itself is compared on the rows they lead to.
    "CREATE INDEX memories_by_content ON memories (project, length(content), substr(content, 1, 16)) "
    "WHERE is_latest = 1",
]

MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (1, "foundation: every table of the product reference", _V1_FOUNDATION),
    (2, "ranking attributes on stored terms; embedding vectors", _V2_RANKING_AND_VECTORS),
    (3, "digests of indexed text, so vectors follow their records", _V3_TEXT_DIGESTS),
    (4, "an index on the analyzer version of stored terms, for a quick start-up check", _V4_ANALYZER_INDEX),
    (5, "drop relations left pointing at deleted slots and mistake cards", _V5_DANGLING_RELATIONS),
    (
        6,
        "relations unique per project, so projects never share an edge between global records",
        _V6_RELATIONS_PER_PROJECT,
    ),
    (7, "a running count of each project's concepts and files, kept by triggers", PROFILE_TALLY),
    (8, "no index on the profile's counts: writes cost more than the reads it spared", _V8_NO_TALLY_INDEX),
    (9, "the ids of forgotten records, so imports do not bring them back", _V9_FORGOTTEN_RECORDS),
    (10, "an index on observations by type, for filtered lists", _V10_OBSERVATIONS_BY_TYPE),
    (11, "the ids of folded observations, so imports do not store them again", _V11_FOLDED_OBSERVATIONS),
    (12, "an index on relations by source, for the edges of records going away", _V12_RELATIONS_BY_SOURCE),
    (
        13,
        "project names in one spelling (composed), so a decomposed name joins its project",
        _V13_COMPOSED_PROJECT_NAMES,
    ),
    (14, "what pruned outcomes scored, so score histories outlive them", _V14_PRUNED_OUTCOMES),
    (
        15,
        "an index on observations by session and time, for when each session happened",
        _V15_OBSERVATIONS_BY_SESSION_TIME,
    ),
    (16, "what pairing an error with its fix reads of each observation, worked out once", _V16_FIX_CUES),
    (
        17,
        "an index holding what ranks each lesson, so SQL ranks them without reading their text",
        _V17_LESSON_STANDINGS,
    ),
    (18, "an index on sessions by last activity, for the most recent ones first", _V18_SESSIONS_BY_ACTIVITY),
    (19, "counts that reach 0 found among the values taken away, not the whole tally", TALLY_SEEKS_SPENT_COUNTS),
    (20, "an index on latest memories by content, so the same content saved again is found", _V20_MEMORIES_BY_CONTENT),
]
