"""When two texts are the same lesson: the fingerprint a lesson is stored under, and finding its twin.

A lesson is identified by its text normalised (Unicode, case, whitespace, the punctuation that
frames a sentence), and a derived lesson by its kind and task type as well. Rows stored under the
older rule, which hashed the text as sent and dropped every edge symbol, are recognised and
brought up to date as they are met, so no migration is needed.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

from mcp_memory.db import Tx
from mcp_memory.models.records import Lesson
from mcp_memory.repositories.lessons import LessonRepository

# Only what frames a sentence is trimmed: quotes, a list bullet, and closing punctuation. Other
# symbols at an edge carry meaning ("Prefer C++" is not "Prefer C", "Use C#" not "Use C").
_QUOTES = "\"'`“”‘’‚„«»‹›「」『』"
_LEADING = re.compile(rf"^(?:[\s{_QUOTES}¿¡]|[-*•–—](?=\s))+")
_TRAILING = re.compile(rf"[\s{_QUOTES}.,;:!?…。、]+$")
_LEGACY_EDGES = re.compile(r"^[\s\W_]+|[\s\W_]+$")


def _normalised(content: str) -> str:
    """Content as fingerprinted: NFKC, case-folded, whitespace collapsed, framing punctuation trimmed.

    NFKC (not just NFC) because it is what the search analyser uses: text that search treats as the
    same words (a composed or decomposed "é", a ligature, full-width letters) is one lesson too.
    """
    text = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", content).casefold())
    return _TRAILING.sub("", _LEADING.sub("", " ".join(text.split())))


def fingerprint(content: str, kind: str = "lesson", task_type: str | None = None) -> str:
    """SHA-256 of the normalised content (see `_normalised`).

    Lessons saved by an agent are identified by their text alone. A derived lesson (heuristic,
    anti-pattern, rule) also by its kind and task type, so the same advice learned for two task
    types, or as a rule and as a saved lesson, stays two lessons.
    """
    return _digest(_normalised(content), kind, task_type)


def _legacy_fingerprint(content: str, kind: str = "lesson", task_type: str | None = None) -> str:
    """The fingerprint stored before Unicode normalisation, when every edge symbol was dropped."""
    return _digest(_LEGACY_EDGES.sub("", " ".join(content.casefold().split())), kind, task_type)


def _digest(normal: str, kind: str, task_type: str | None) -> str:
    if kind != "lesson":
        normal = f"{kind}\x1f{task_type or ''}\x1f{normal}"
    return hashlib.sha256(normal.encode()).hexdigest()


async def find_twin(
    tx: Tx, project: str, content: str, kind: str = "lesson", task_type: str | None = None
) -> Lesson | None:
    """The stored lesson this content is the same lesson as, if any.

    Fingerprints stored before the current normalisation are brought up to date as they are met,
    so no migration is needed: a row is matched only when its own content normalises to the same
    text, and a stale row in the way of a different lesson is moved to its own fingerprint.
    """
    repo = LessonRepository(tx)
    key = fingerprint(content, kind, task_type)
    found = await repo.by_fingerprint(project, key)
    if found is not None:
        own = fingerprint(found.content, found.kind, found.task_type)
        if own == key:
            return found
        # Stored under the old rule, it took this key from a different lesson ("Prefer C++" for "Prefer C").
        taken = await repo.by_fingerprint(project, own) is not None
        await repo.set_fingerprint(found.id, own if not taken else f"stale:{found.id}")
        tx.changed("lesson", found.id, "rekey")
        return None
    # The old rule hashed the text as sent: try it composed and decomposed as well.
    for form in dict.fromkeys((content, *(unicodedata.normalize(f, content) for f in ("NFC", "NFD")))):
        legacy = _legacy_fingerprint(form, kind, task_type)
        found = None if legacy == key else await repo.by_fingerprint(project, legacy)
        if found is not None and fingerprint(found.content, found.kind, found.task_type) == key:
            await repo.set_fingerprint(found.id, key)
            tx.changed("lesson", found.id, "rekey")
            return found.model_copy(update={"fingerprint": key})
    return None
