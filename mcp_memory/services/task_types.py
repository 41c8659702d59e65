"""What kind of task an outcome was, when the caller does not say: the type of the most similar
past task, else the first family of keywords the task's words fall in, else "general"."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from mcp_memory.models.records import Outcome
from mcp_memory.services.common import jaccard

PAST_TASK_SIMILARITY = 0.6
"""A past task at least this similar (Jaccard of words) lends its given task type."""

# Checked in order; the first task type whose words appear in the task wins. Written as words, verb
# and noun alike, and analysed as the task is: the stemmer does not bring a noun to its verb's stem
# ("analysis" is "analysi", "analyse" is "analys"), so each form a task is said in is listed.
_TASK_TYPE_WORDS: tuple[tuple[str, str], ...] = (
    ("bugfix", "fix bug bugfix hotfix error crash exception broken regression fail failure debug issue"),
    ("testing", "test pytest coverage unittest spec"),
    ("refactor", "refactor rename cleanup restructure simplify simplification extract"),
    ("documentation", "doc document docstring readme comment changelog"),
    ("deployment", "deploy release ci pipeline docker kubernetes publish"),
    ("performance", "performance slow speed optimize optimization latency faster profile"),
    (
        "research",
        "investigate investigation research analysis analyse analyze explore exploration compare "
        "comparison evaluate evaluation",
    ),
    ("configuration", "config configure configuration setup install environment upgrade"),
    ("feature", "add implement build create support new feature"),
)

# British -ise/-isation and -yse forms, rewritten to -ize/-yze for the keyword families: the English
# stemmer maps "optimize" and "optimization" to "optim" but "optimise" to "optimis".
_BRITISH_IS = re.compile(r"(?<=\w\w\w)is(?=(?:e|es|ed|ing|er|ers|ation|ations)\b)", re.IGNORECASE)
_BRITISH_YS = re.compile(r"(?<=\w\w)ys(?=(?:e|es|ed|ing|er|ers)\b)", re.IGNORECASE)
# A verb and its particle, said as the one word its noun is ("clean up" as "cleanup", "set up" as "setup").
_PHRASAL = re.compile(r"\b([^\W\d_]{2,})\s+(up|out|down|back|off|over)\b", re.IGNORECASE)


def infer_task_type(words: Callable[[str], frozenset[str]], task: str, past: Iterable[Outcome]) -> str:
    """The type of the most similar of the `past` outcomes whose type was given, else the first
    keyword family that matches `task` (`words` analyses a text into the words compared).

    Keywords match in either spelling ("optimise" as "optimize"); the -ize form is only added, so
    words such as "precise" keep their own stem too.
    """
    mine = words(task)
    best, best_type = 0.0, None
    for outcome in past:
        if not outcome.task_type_inferred:
            overlap = jaccard(mine, words(outcome.task))
            if overlap > best:
                best, best_type = overlap, outcome.task_type
    if best_type is not None and best >= PAST_TASK_SIMILARITY:
        return best_type
    spelled = mine | words(_BRITISH_YS.sub("yz", _BRITISH_IS.sub("iz", task))) | _phrasal(words, task)
    for name, keywords in _TASK_TYPE_WORDS:
        if spelled & words(keywords):
            return name
    return "general"


def _phrasal(words: Callable[[str], frozenset[str]], task: str) -> frozenset[str]:
    """The words of the task's phrasal verbs said as one ("cleaned up" gives "cleanup" as well)."""
    joined: set[str] = set()
    for verb, particle in _PHRASAL.findall(task):
        particle = particle.casefold()
        joined |= words(verb + particle) | {stem + particle for stem in words(verb)}
    return frozenset(joined)
