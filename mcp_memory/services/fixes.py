"""Which observation fixed which error: what session summaries and reflection name as an error's fix."""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

from mcp_memory.models.records import Observation
from mcp_memory.search.analyzer import Analyzer
from mcp_memory.services.compress import extract_files, extract_identifiers

_MAY_FIX = {"note", "file_change", "decision", "discovery", "tool_use"}
"""Types an agent also records a fix as, when it does not call it a fix."""
_SAYS_FIXED = re.compile(
    r"\b(?:fix(?:ed|es)?|resolv(?:ed|es)|solv(?:ed|es)|worked|works (?:now|again)|working again|"
    r"pass(?:es|ed|ing)?(?: again)?|workaround|repaired|no longer)\b",
    re.IGNORECASE,
)
_GENERIC_WORDS = "error errors fix fixed fixes fixing fail failed failing failure bug issue problem exception resolved"
"""Words every error or fix may say: sharing only these does not make a fix the fix of an error."""
_CHANGES = {"file_change", "decision"}
"""Types that change something: one about an error's file or identifier is likely its fix."""
_NEVER_REPORTS = {"error", "fix"}
"""Types never read as a failure report: an error is one by its nature, and a fix is the agent's word
that it fixed something, whatever words it uses ("Broke the import cycle by ...")."""
_HEAD = 2_000  # the opening of a long note or tool output is what is read of it
_CLAUSE = re.compile(r"[.!?](?=\s|$)|[;\n]|,?\s+(?:but|though|although|yet|while)\s")
_FIXED = re.compile(r"\b(?:fix(?:ed|es)?|resolv(?:ed|es)|solved|repaired)\b")
_NEGATED_SUCCESS = re.compile(
    r"(?:\b(?:does|did|do|is|are|was|were|has|have)(?:n't| not)|\bnot|\bno longer|\bnever)\s+(?:\w+\s+)?"
    r"(?:work|pass|help|build|fix|resolv|solv)\w*"
)  # "doesn't work", "not yet fixed", "no longer builds"
_FAILURE = re.compile(
    r"\b(?:fail(?:s|ed|ing)?|crash(?:es|ed|ing)?|errored|errors out|broken|broke|hangs|hung|timed out|"
    r"times out|refused|denied|still red)\b"
)
_NOT_A_REPORT = re.compile(
    r"(?:\b(?:no longer|not|never|without|no|zero|0|the|an?|this|that|these|those|any)|n't)\s+$"
    r"|\b(?:when|whenever|if|unless|which|where|once|until|because|since|in case)\b"
)
"""Before a failure word, what makes it no report of one: a negation ("no longer fails"), a
determiner ("the failing test") or a condition or reason ("a guard for when parsing fails")."""


def fixes_of(
    analyzer: Analyzer, errors: Sequence[Observation], observations: Sequence[Observation]
) -> dict[str, Observation]:
    """The fix of each error (by error id) among a session's `observations` (in order): the first
    later fix sharing a file, concept or word with it, else a fix recorded right after it, else the
    first later observation of another type that says it fixed something ("tests pass again") and
    shares a file, concept or word with it."""
    generic = set(analyzer.terms(_GENERIC_WORDS))

    def terms(obs: Observation) -> set[str]:
        found = analyzer.terms("\n".join([obs.title, *obs.concepts, *obs.files]))
        return {t for t in found if t not in generic and not t.isdigit()}

    fixes = [(o, terms(o)) for o in observations if o.type == "fix"]
    # the opening of a note says what it did; a long one is not read to its end for every summary
    told = [(o, terms(o)) for o in observations if o.type in _MAY_FIX and _SAYS_FIXED.search(o.content, 0, _HEAD)]
    following = {a.id: b for a, b in pairwise(observations)}
    paired: dict[str, Observation] = {}
    for error in errors:
        words = terms(error)
        fix = next((f for f, its in fixes if f.seq > error.seq and words & its), None)
        if fix is None and (after := following.get(error.id)) is not None and after.type == "fix":
            fix = after
        if fix is None:
            fix = next((f for f, its in told if f.seq > error.seq and words & its), None)
        if fix is not None:
            paired[error.id] = fix
    return paired


def pair_fixes(
    analyzer: Analyzer, errors: Sequence[Observation], observations: Sequence[Observation]
) -> dict[str, Observation]:
    """The fix of each error (by id) among a session's `observations` (in order).

    An observation that reports a failure ("X passes now; Y still fails") fixes nothing, unless the
    agent typed it `fix`: that is its word that it is one ("Broke the import cycle by ..."). Of the
    rest, one typed `fix` that `fixes_of` pairs comes first; else the earliest later change
    (file_change, decision) naming one of the error's files or identifiers, since the agent edits
    what broke, unless the note `fixes_of` found by words names one too and came first.
    """
    if not errors:
        return {}
    first = min(e.seq for e in errors)  # what came before every error fixes none: spare reading it
    usable = [o for o in observations if o.seq <= first or o.type in _NEVER_REPORTS or not _reports_failure(o)]
    by_words = fixes_of(analyzer, errors, usable)
    changes = [(o, _anchors(o)) for o in usable if o.type in _CHANGES]
    paired: dict[str, Observation] = {}
    for error in errors:
        told = by_words.get(error.id)
        named = _anchors(error)
        change = next((o for o, its in changes if o.seq > error.seq and named & its), None)
        if told is not None and change is not None and told.type != "fix":
            told = told if told.seq < change.seq and named & _anchors(told) else change
        if (fix := told or change) is not None:
            paired[error.id] = fix
    return paired


def _reports_failure(obs: Observation) -> bool:
    """Whether an observation says something failed (a clause such as "Y still fails with 401")."""
    text = f"{obs.title}\n{obs.content[:_HEAD]}".casefold()
    if not _FAILURE.search(text) and not _NEGATED_SUCCESS.search(text):
        return False  # most observations: no clause to weigh
    return any(_says_failure(c) for c in _CLAUSE.split(text) if c.strip())


def _says_failure(clause: str) -> bool:
    """Whether a clause reports a failure: something did not work, or a failure word that nothing
    before it turns into something else ("no longer fails", "fixed the failing test")."""
    if _NEGATED_SUCCESS.search(clause):
        return True
    if _FIXED.search(clause):
        return False  # "fixed the test that fails": the failure is what was fixed
    return any(not _NOT_A_REPORT.search(clause, 0, m.start()) for m in _FAILURE.finditer(clause))


def _anchors(obs: Observation) -> set[str]:
    """The files (and their base names) and code identifiers an observation names, case-folded."""
    text = f"{obs.title}\n{obs.content[:_HEAD]}"
    named = {n.casefold() for n in (*obs.files, *extract_files(text), *extract_identifiers(text))}
    return named | {n.rsplit("/", 1)[-1] for n in named if "/" in n}
