"""Which observation fixed which error: what session summaries and reflection name as an error's fix."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice

from pydantic_core import from_json

from mcp_memory.models.records import Observation
from mcp_memory.search.analyzer import ANALYZER_VERSION, Analyzer
from mcp_memory.services.compress import extract_files, extract_identifiers

_MAY_FIX = {"note", "file_change", "decision", "discovery", "tool_use"}
"""Types an agent also records a fix as, when it does not call it a fix."""
_SAYS_FIXED = re.compile(
    r"\b(?:fix(?:ed|es)?|resolv(?:ed|es)|solv(?:ed|es)|worked|works (?:now|again)|working again|"
    r"pass(?:es|ed|ing)?(?: again)?|workaround|repaired|no longer)\b"
)  # searched in lower-cased text: a case-blind pattern takes twice as long, and every search asks it
_GENERIC_WORDS = "error errors fix fixed fixes fixing fail failed failing failure bug issue problem exception resolved"
"""Words every error or fix may say: sharing only these does not make a fix the fix of an error."""
_CHANGES = {"file_change", "decision"}
"""Types that change something: one about an error's file or identifier is likely its fix."""
_WEIGHED = {"error", "fix"}
"""Types whose words pairing always weighs (and those of any `_MAY_FIX` that says it fixed something)."""
_NEVER_REPORTS = {"error", "fix"}
"""Types never read as a failure report: an error is one by its nature, and a fix is the agent's word
that it fixed something, whatever words it uses ("Broke the import cycle by ...")."""
_CLEARLY_BETTER = 2.0
"""How much better another error must match a fix to keep it from an error it also matches."""
_RECURRING = 0.5
"""Share of the smaller error's words two errors have in common when they are one error recurring."""
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
CUES_VERSION = 1
"""Bump whenever `Cues.of` would work out different cues (these patterns, `_HEAD`, `_GENERIC_WORDS`,
compress's `extract_files` or `extract_identifiers`): cues stored before are then worked out again
when read. Their words also depend on the analyzer, whose version is stored beside them."""


@dataclass(frozen=True, slots=True)
class Cues:
    """What pairing an error with its fix reads of one observation's text. It depends on that
    observation alone, so it is worked out when the observation is recorded and stored with it: a
    search then pairs the errors it finds without running these patterns and the analyzer over
    their windows again.
    """

    says_fixed: bool
    """Its opening says it fixed something ("tests pass again")."""
    reports_failure: bool
    """It says something failed (`_reports_failure`)."""
    anchors: frozenset[str] | None
    """The files and identifiers it names (`_anchors`); None where pairing never asks (an
    observation of a type that neither fails, changes something nor says it fixed something)."""
    terms: frozenset[str] | None = None
    """Its distinctive words (`_distinctive`); None where pairing never weighs them (most types,
    unless the observation says it fixed something: words take the most room of the cues) or
    another version of the analyzer made them."""

    @classmethod
    def of(
        cls, analyzer: Analyzer, type: str, title: str, content: str, concepts: Sequence[str], files: Sequence[str]
    ) -> Cues:
        """The cues of an observation of this type and text."""
        says_fixed = _says_fixed(content)
        told = says_fixed and type in _MAY_FIX
        anchors = _anchors(title, content, files) if type == "error" or type in _CHANGES or told else None
        weighed = type in _WEIGHED or told
        terms = _distinctive(analyzer, _generic(analyzer), title, concepts, files) if weighed else None
        return cls(says_fixed, _reports_failure(title, content), anchors, terms)

    def dump(self) -> str:
        """The stored form, marked with the version of the rules (and of the analyzer) that made it."""
        data: dict[str, object] = {"v": CUES_VERSION, "s": self.says_fixed, "f": self.reports_failure}
        if self.anchors is not None:
            data["a"] = sorted(self.anchors)
        if self.terms is not None:
            data["t"], data["z"] = sorted(self.terms), ANALYZER_VERSION
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def load(cls, text: str | None) -> Cues | None:
        """Stored cues, or None when there are none or other rules made them."""
        if not text:
            return None
        try:
            data = from_json(text)  # json.loads' values, faster: a recall reads the cues of its windows
            if data["v"] != CUES_VERSION:
                return None
            anchors, terms = data.get("a"), data.get("t") if data.get("z") == ANALYZER_VERSION else None
            return cls(
                bool(data["s"]),
                bool(data["f"]),
                None if anchors is None else frozenset(anchors),
                None if terms is None else frozenset(terms),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None  # a damaged cache is worked out again, not an error


class CueBook:
    """The cues of a pairing's observations: as stored when they are current, else worked out when
    first asked, and only the one asked (most observations are asked one thing or none)."""

    def __init__(self, analyzer: Analyzer, stored: Mapping[str, str | None] | None = None) -> None:
        self._analyzer = analyzer
        self._generic = _generic(analyzer)
        self._stored = stored or {}
        self._loaded: dict[str, Cues | None] = {}
        self._terms: dict[str, frozenset[str]] = {}
        self._failing: dict[str, bool] = {}
        self._fixed: dict[str, bool] = {}
        self._anchors: dict[str, frozenset[str]] = {}

    def terms(self, obs: Observation) -> frozenset[str]:
        """Its distinctive words: sharing only words every error or fix says pairs nothing."""
        if obs.id not in self._terms:
            if (cues := self._cues(obs)) is not None and cues.terms is not None:
                self._terms[obs.id] = cues.terms
            else:
                self._terms[obs.id] = _distinctive(self._analyzer, self._generic, obs.title, obs.concepts, obs.files)
        return self._terms[obs.id]

    def says_fixed(self, obs: Observation) -> bool:
        """Whether its opening says it fixed something."""
        if (cues := self._cues(obs)) is not None:
            return cues.says_fixed
        if obs.id not in self._fixed:
            self._fixed[obs.id] = _says_fixed(obs.content)
        return self._fixed[obs.id]

    def reports_failure(self, obs: Observation) -> bool:
        """Whether it says something failed."""
        if (cues := self._cues(obs)) is not None:
            return cues.reports_failure
        if obs.id not in self._failing:
            self._failing[obs.id] = _reports_failure(obs.title, obs.content)
        return self._failing[obs.id]

    def anchors(self, obs: Observation) -> frozenset[str]:
        """The files and identifiers it names."""
        if (cues := self._cues(obs)) is not None and cues.anchors is not None:
            return cues.anchors
        if obs.id not in self._anchors:
            self._anchors[obs.id] = _anchors(obs.title, obs.content, obs.files)
        return self._anchors[obs.id]

    def _cues(self, obs: Observation) -> Cues | None:
        if obs.id not in self._loaded:
            self._loaded[obs.id] = Cues.load(self._stored.get(obs.id))
        return self._loaded[obs.id]


def fixes_of(
    book: CueBook,
    errors: Sequence[Observation],
    observations: Sequence[Observation],
    usable: Callable[[Observation], bool],
) -> dict[str, Observation]:
    """The fix of each error (by error id) among a session's `observations` (in order) that are
    `usable`: the later fix that shares the most distinctive words with it (files and identifiers are
    words too), else a fix recorded right after it, else the later observation of another type that
    says it fixed something ("tests pass again") and matches it best. A fix another error matches far
    better is that error's. `usable` is asked only of the observations a pairing looks at."""
    terms = book.terms
    fixes = [(o, terms(o)) for o in observations if o.type == "fix" and usable(o)]
    told = [(o, terms(o)) for o in observations if o.type in _MAY_FIX and book.says_fixed(o) and usable(o)]
    rivals = [(o, terms(o)) for o in observations if o.type == "error" and usable(o)]
    words_of = {o.id: words for o, words in rivals}
    match = _Matcher(rivals, fixes, told)
    position = {o.id: i for i, o in enumerate(observations)}
    paired: dict[str, Observation] = {}
    for error in errors:
        words = words_of.get(error.id) or terms(error)
        fix = match.fix_of(error, words)
        at = position.get(error.id)
        after = None if at is None else next((o for o in islice(observations, at + 1, None) if usable(o)), None)
        if fix is None and after is not None and after.type == "fix":
            # recorded right after it, but what another error's fix is says nothing of this one
            fix = None if match.answers_another(error, words, after) else after
        if fix is None:
            fix = match.best(error, words, told)
        if fix is not None:
            paired[error.id] = fix
    return paired


_Candidates = Sequence[tuple[Observation, frozenset[str]]]
"""Observations with their words, as `fixes_of` weighs them."""


class _Matcher:
    """Scores how much an error and a later fix are about the same thing, and picks an error's fix.

    A word counts less the more of the session's errors and fixes say it ("app", a package every
    path names, matches everything; "FrenchRule" points at one error). A fix that another error
    matches at least `_CLEARLY_BETTER` times as well is that error's, unless the two errors are one
    error recurring (most of the words of one are in the other): those share their fix.
    """

    def __init__(self, errors: _Candidates, fixes: _Candidates, told: _Candidates) -> None:
        said = Counter(t for _, words in (*errors, *fixes, *told) for t in words)
        self.weight = {t: 1 / n for t, n in said.items()}
        self.errors = errors
        self.fixes = fixes
        self._fix_of: dict[str, Observation | None] = {}

    def score(self, words: frozenset[str], other: frozenset[str]) -> float:
        """The distinctive words two observations share, weighted."""
        return sum(self.weight.get(t, 1.0) for t in words & other)

    def fix_of(self, error: Observation, words: frozenset[str]) -> Observation | None:
        """The observation typed `fix` that matches `error` best, as `best` picks it."""
        if error.id not in self._fix_of:
            self._fix_of[error.id] = self.best(error, words, self.fixes)
        return self._fix_of[error.id]

    def best(self, error: Observation, words: frozenset[str], candidates: _Candidates) -> Observation | None:
        """The later candidate that matches `error` best and that no other error claims (the earliest
        of equals: the agent fixes what just broke)."""
        rivals = self._rivals(error, words)
        chosen, top = None, 0.0
        for fix, its in candidates:
            if fix.seq <= error.seq or (mine := self.score(words, its)) <= top:
                continue
            if not any(o.seq < fix.seq and self.score(theirs, its) >= _CLEARLY_BETTER * mine for o, theirs in rivals):
                chosen, top = fix, mine
        return chosen

    def answers_another(self, error: Observation, words: frozenset[str], fix: Observation) -> bool:
        """Whether `fix` (typed fix) is what `fix_of` pairs with an error before it other than `error`."""
        its = next(its for f, its in self.fixes if f.id == fix.id)
        return any(
            o.seq < fix.seq and theirs & its and (found := self.fix_of(o, theirs)) is not None and found.id == fix.id
            for o, theirs in self._rivals(error, words)
        )

    def _rivals(self, error: Observation, words: frozenset[str]) -> _Candidates:
        """The session's errors other than `error` and not `error` recurring."""
        return [
            (other, theirs)
            for other, theirs in self.errors
            if other.id != error.id and len(words & theirs) < _RECURRING * min(len(words), len(theirs))
        ]


def pair_fixes(
    analyzer: Analyzer,
    errors: Sequence[Observation],
    observations: Sequence[Observation],
    stored: Mapping[str, str | None] | None = None,
    *,
    book: CueBook | None = None,
) -> dict[str, Observation]:
    """The fix of each error (by id) among a session's `observations` (in order), reading their
    `stored` cues (by id) where those are current; or, from a caller pairing many times over the
    same observations, its `book` of cues, each worked out once.

    An observation that reports a failure ("X passes now; Y still fails") fixes nothing, unless the
    agent typed it `fix`: that is its word that it is one ("Broke the import cycle by ..."). Of the
    rest, one typed `fix` that `fixes_of` pairs comes first; else the earliest later change
    (file_change, decision) naming one of the error's files or identifiers, since the agent edits
    what broke, unless the note `fixes_of` found by words names one too and came first.
    """
    if not errors:
        return {}
    first = min(e.seq for e in errors)  # what came before every error fixes none: spare reading it
    book = book or CueBook(analyzer, stored)
    anchors = book.anchors

    # Asked only of the observations a pairing looks at: weighing every clause of every note in a
    # recall's windows was a third of what naming each error hit's fix cost.
    def usable(obs: Observation) -> bool:
        return obs.seq <= first or obs.type in _NEVER_REPORTS or not book.reports_failure(obs)

    by_words = fixes_of(book, errors, observations, usable)
    paired: dict[str, Observation] = {}
    for error in errors:
        told = by_words.get(error.id)
        named = anchors(error)
        later = (o for o in observations if named and o.seq > error.seq and o.type in _CHANGES)
        change = next((o for o in later if named & anchors(o) and usable(o)), None)
        if told is not None and change is not None and told.type != "fix":
            told = told if told.seq < change.seq and named & anchors(told) else change
        if (fix := told or change) is not None:
            paired[error.id] = fix
    return paired


def _generic(analyzer: Analyzer) -> frozenset[str]:
    """The terms of `_GENERIC_WORDS`."""
    return frozenset(analyzer.terms(_GENERIC_WORDS))


def _distinctive(
    analyzer: Analyzer, generic: frozenset[str], title: str, concepts: Sequence[str], files: Sequence[str]
) -> frozenset[str]:
    """An observation's distinctive words: the terms of its title, concepts and files but those
    every error or fix may say (`generic`) and numbers."""
    found = analyzer.terms("\n".join([title, *concepts, *files]))
    return frozenset(t for t in found if t not in generic and not t.isdigit())


def _says_fixed(content: str) -> bool:
    """Whether an observation's opening says it fixed something: a long note is not read to its end."""
    return _SAYS_FIXED.search(content[:_HEAD].lower()) is not None


def _reports_failure(title: str, content: str) -> bool:
    """Whether an observation says something failed (a clause such as "Y still fails with 401")."""
    text = f"{title}\n{content[:_HEAD]}".casefold()
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


def _anchors(title: str, content: str, files: Sequence[str]) -> frozenset[str]:
    """The files (and their base names) and code identifiers an observation names, case-folded."""
    text = f"{title}\n{content[:_HEAD]}"
    named = {n.casefold() for n in (*files, *extract_files(text), *extract_identifiers(text))}
    return frozenset(named | {n.rsplit("/", 1)[-1] for n in named if "/" in n})
