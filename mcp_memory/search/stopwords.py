"""English stop words: the Snowball list plus apostrophe-less contractions.

rank-bm25's Okapi idf floors very common terms at a share of the mean idf instead of near zero, so
words like "the" would otherwise weigh as much as rare ones. Contractions that are also ordinary
words in code and prose (id, shell, well, ill, won, don, …) are left out on purpose.
"""

from __future__ import annotations

STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are aren arent as at be because been before
    being below between both but by can cannot cant could couldn couldnt did didn didnt do does doesn
    doesnt doing dont down during each few for from further had hadn hadnt has hasn hasnt have
    haven havent having he hed hes her here heres hers herself him himself his how hows i im ive if
    in into is isn isnt it its itself lets me more most mustn mustnt my myself no nor not of off on
    once only or other ought our ours ourselves out over own same shan shant she shes should shouldn
    shouldnt so some such than that thats the their theirs them themselves then there theres these
    they theyd theyll theyre theyve this those through to too under until up very was wasn wasnt we
    were weren werent weve what whats when whens where wheres which while who whos whom why whys with
    wont would wouldn wouldnt you youd youll youre youve your yours yourself yourselves also just
    will yet s t d ll m re ve
    """.split()  # noqa: SIM905 - a word list reads best as text
)
