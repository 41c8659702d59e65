"""What kind of task an outcome was, when the caller does not say: the type of the most similar
past task, else the first family of keywords the task's words fall in, else "general"."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from mcp_memory.models.records import Outcome
from mcp_memory.services.common import jaccard

PAST_TASK_SIMILARITY = 0.6
"""A past task at least this similar (Jaccard of words) lends its given task type."""

# Checked in order; the first task type whose words appear in the task wins.
_TASK_TYPE_WORDS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        "bugfix",
        frozenset({"fix", "bug", "error", "crash", "except", "broken", "regress", "fail", "failur", "debug", "issu"}),
    ),
    ("testing", frozenset({"test", "pytest", "coverag", "unittest", "spec"})),
    ("refactor", frozenset({"refactor", "renam", "cleanup", "restructur", "simplifi", "extract"})),
    ("documentation", frozenset({"doc", "readm", "document", "docstr", "comment", "changelog"})),
    ("deployment", frozenset({"deploy", "releas", "ci", "pipelin", "docker", "kubernet", "publish"})),
    ("performance", frozenset({"perform", "slow", "speed", "optim", "latenc", "faster", "profil"})),
    ("research", frozenset({"investig", "research", "analys", "analyz", "explor", "compar", "evalu"})),
    ("configuration", frozenset({"config", "configur", "setup", "instal", "environ", "upgrad"})),
    ("feature", frozenset({"add", "implement", "build", "creat", "support", "new", "featur"})),
)

# British -ise/-isation and -yse forms, rewritten to -ize/-yze for the keyword families: the English
# stemmer maps "optimize" and "optimization" to "optim" but "optimise" to "optimis".
_BRITISH_IS = re.compile(r"(?<=\w\w\w)is(?=(?:e|es|ed|ing|er|ers|ation|ations)\b)", re.IGNORECASE)
_BRITISH_YS = re.compile(r"(?<=\w\w)ys(?=(?:e|es|ed|ing|er|ers)\b)", re.IGNORECASE)


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
    spelled = mine | words(_BRITISH_YS.sub("yz", _BRITISH_IS.sub("iz", task)))
    for name, stems in _TASK_TYPE_WORDS:
        if spelled & stems:
            return name
    return "general"
