"""Privacy filter applied to every piece of text before it is stored or indexed.

``<private>…</private>`` blocks are replaced by the marker ``[private]`` and secrets by
``[REDACTED:<kind>]``. Callers only ever see per-kind counts, never the redacted text.
Every pattern is compiled once and uses bounded quantifiers, so cleaning is roughly
linear in the input size and cannot backtrack catastrophically.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "PrivacyFilter",
    "Redaction",
    "merge_counts",
    "name_problem",
    "redacted",
    "says_something",
    "without_markers",
]

_PRIVATE_MARKER = "[private]"

_Span = tuple[int, int] | None
_Pick = Callable[[re.Match[str]], _Span]

# Text we emitted ourselves; a match starting inside one is skipped so clean() is idempotent.
_MARKER = re.compile(r"\[(?:REDACTED:[A-Za-z0-9_.-]{1,64}|private)\]")
_KIND = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_TAG = re.compile(r"<\s{0,5}(/?)\s{0,5}private(?:\s[^<>]{0,200})?>", re.IGNORECASE)
# `loose` keywords also name other things: `pass` ends `DB_PASS` but also `first_pass`, a count, and
# "API key: …" heads prose too, so their unquoted values must look less like words or counts.
_KEYWORDS = (
    r"(?:passw(?:or)?d|passphrase|pwd|secret|(?:api|access|secret|private|account)[_-]?key|secret[_-]?key[_-]?base|apikey"
    r"|shared[_-]?access[_-]?key"
    r"|token|(?P<loose>(?<=[A-Za-z0-9][_-]|--)pass|(?:api|access|secret) key))"
)
_KEYWORD_NEEDLES = ("pass", "pwd", "secret", "key", "token")
# An unquoted value runs to the next whitespace, since a secret may hold any punctuation
# ("Xk9;vT2&qL7,mZ4"); only a `,` `;` or `&` that starts another `key=value` pair (a query
# string, a connection string) ends it early.
_VALUE = (
    r"""(?:"(?P<dq>(?:[^"\\\n]|\\.){0,1000})"?|'(?P<sq>(?:[^'\\\n]|\\.){0,1000})'?"""
    r"""|(?P<uq>[^\s"',;&)\]}][^\s,;&]{0,511}(?:[,;&](?![A-Za-z_][\w.-]{0,40}=[^\s=])[^\s,;&]{0,511}){0,63}))"""
)
# Punctuation that may close a word of prose or code (`f(password: str)`, "…is Tr0ub4dor&3.").
_TRAILING = ".,;:!?)]}"
_NON_SECRET_WORDS = frozenset({"none", "null", "nil", "true", "false", "undefined", "n/a", "redacted"})
# References to a secret (templating, env vars, masks, "your-…" stand-ins) are not the secret.
_PLACEHOLDER = re.compile(r"<[^<>]*>|\$[{(].*|\$[A-Za-z_]\w*|\{\{.*|%\(?\w*\)?s|[*x•.…]{3,}|your[_-].*", re.IGNORECASE)
# Unquoted code such as `os.environ["X"]`, `get_pw()` or `self.token` names a secret, it isn't one.
_CODE_REF = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*[(\[].*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
# …unless a run of its letters and digits mixes both cases with digits in two places, as random
# tokens do (`ya29.a0AfH6SMBxyz123`) and names rarely do (`os.environ`, `x509Cert`, `v1beta1`).
_RANDOM_RUN = re.compile(r"(?<![A-Za-z0-9])(?=[A-Za-z0-9]*[a-z])(?=[A-Za-z0-9]*[A-Z])[A-Za-z]*[0-9]+[A-Za-z]+[0-9]")
_AUTH = r"(?i)authorization[\"']?[ \t]{0,5}[:=][ \t]{0,5}[\"']?"
_AUTH_HEADER = re.compile(_AUTH + r"\Z")


@dataclass(frozen=True, slots=True)
class Redaction:
    """Result of cleaning one text: the safe text plus how many things of each kind were removed."""

    text: str
    counts: Mapping[str, int]


def _is_secret(value: str, *, quoted: bool, strict: bool = False) -> bool:
    """Decide whether an assigned value is a real secret rather than a placeholder or prose."""
    v = value.strip()
    if not v or v.lower() in _NON_SECRET_WORDS or _PLACEHOLDER.fullmatch(v):
        return False
    if quoted:
        return True
    if _CODE_REF.fullmatch(v) and not _RANDOM_RUN.search(v):
        return False
    # Short plain words after "key: " are usually prose ("token: see docs"); `KEY=value` is not.
    return strict or len(v) >= 8 or not v.isalpha()


def _whole(m: re.Match[str]) -> _Span:
    return m.span()


def _group(m: re.Match[str]) -> _Span:
    return m.span("s") if _is_secret(m.group("s"), quoted=True) else None


def _with_digit(m: re.Match[str]) -> _Span:
    # Real keys are random; requiring a digit spares prose like "sk-learn-is-a-library".
    return m.span() if any(c.isdigit() for c in m.group()) else None


def _random_looking(token: str) -> bool:
    return any(c.isdigit() for c in token) or (token.lower() != token != token.upper())


def _mixed(m: re.Match[str]) -> _Span:
    # A random token has a digit or both cases; a long snake_case name (`hf_…`, `npm_…`) has neither.
    return m.span() if _random_looking(m.group()) else None


def _bearer(m: re.Match[str]) -> _Span:
    token = m.group("s")
    if _AUTH_HEADER.search(m.string, max(0, m.start() - 40), m.start()):
        return m.span("s")
    return m.span("s") if len(token) >= 16 and _random_looking(token) else None


def _scheme_token(m: re.Match[str]) -> _Span:
    """A token after an `Authorization:` scheme other than Bearer: random-looking, not a word ("Token required")."""
    return m.span("s") if _random_looking(m.group("s")) else None


def _prose_word(value: str, *, words: bool = True) -> bool:
    """Whether an unquoted value reads as prose: a plain word ("is stored") or a small count ("is 12")."""
    word = value.strip("([{" + _TRAILING)
    return (words and word.isalpha()) or (word.isdigit() and len(word) < 4)


def _assigned_value(m: re.Match[str]) -> _Span:
    for name in ("dq", "sq"):
        if m.group(name) is not None:
            return m.span(name) if _is_secret(m.group(name), quoted=True) else None
    cli_flag = "dash" in m.re.groupindex
    if cli_flag and m.group("uq").startswith("-"):
        return None  # `--password --next-flag`: the flag has no value here
    strict = cli_flag or (m.group("sep") == "=" and not m.group("pre") and not m.group("post"))
    # `first_pass = 2` is a count and "API key: required" prose; `DB_PASS=hunter` is still a password.
    if m.group("loose") is not None and _prose_word(m.group("uq"), words=not strict):
        return None
    return _unquoted(m, strict=strict)


def _prose_value(m: re.Match[str]) -> _Span:
    # "the wifi password is 'x'" / "password was hunter2": quoted, or a word with digits or symbols.
    for name in ("dq", "sq"):
        if m.group(name) is not None:
            return m.span(name) if _is_secret(m.group(name), quoted=True) else None
    # A plain word ("is stored", "is expired") or a small count ("is 12 characters") is prose.
    if _prose_word(m.group("uq")):
        return None
    return _unquoted(m, strict=False)


def _cli_value(m: re.Match[str]) -> _Span:
    """A password given to a command-line flag (`mysql -pX`): quoted, or up to the next whitespace."""
    for name in ("dq", "sq"):
        if m.group(name) is not None:
            return m.span(name) if _is_secret(m.group(name), quoted=True) else None
    if m.group("uq").startswith("-"):
        return None  # `sshpass -p -f`: another flag, not a value
    return _unquoted(m, strict=True)


def _user_password(m: re.Match[str]) -> _Span:
    """The password of a `user:password` pair (`curl -u`), the user kept; none when only a user is given."""
    name = next(n for n in ("dq", "sq", "uq") if m.group(n) is not None)
    user, _, password = m.group(name).partition(":")
    quoted = name != "uq"
    if not _is_secret(password if quoted else password.rstrip(_TRAILING), quoted=quoted, strict=True):
        return None
    return m.start(name) + len(user) + 1, m.end(name)


def _unquoted(m: re.Match[str], *, strict: bool) -> _Span:
    """The span of an unquoted value to redact: all of it, up to whitespace, or None when no secret.

    Punctuation closing the value is left out only to decide whether it is a secret (`str)` is a
    type, `hunter2!` a password): the whole value is redacted, since a password may end in any
    symbol. A single full stop after a letter or digit is the one exception kept, as the end of a
    sentence ("the password is Tr0ub4dor&3.").
    """
    value = m.group("uq")
    if not _is_secret(value.rstrip(_TRAILING), quoted=False, strict=strict):
        return None
    start, end = m.span("uq")
    if len(value) > 1 and value[-1] == "." and value[-2].isalnum():
        end -= 1
    return start, end


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    pick: _Pick = _whole
    # Substrings of which every match contains one, in `str.casefold()` form (each letter of them
    # is matched case-insensitively only by characters that casefold to it): a text holding none
    # is skipped without running the pattern, which is what keeps cleaning cheap.
    needles: tuple[str, ...] = ()


def _rule(kind: str, regex: str, pick: _Pick = _whole, needles: tuple[str, ...] = ()) -> _Rule:
    return _Rule(kind, re.compile(regex), pick, needles)


def _prefixes(head: str, letters: str, tail: str) -> tuple[str, ...]:
    """The literal prefixes `head[letters]tail` spells out, as needles."""
    return tuple(head + letter + tail for letter in letters)


def _token(prefix: str, width: int, body: str, edge: str = "A-Za-z0-9_-") -> str:
    # The literal prefix comes first so the engine can scan for it fast; then check it starts a word.
    return rf"{prefix}(?<![{edge}]{'.' * width}){body}"


def _command(names: tuple[str, ...], flag: str, value: str) -> str:
    """`flag` then `value` on the command line of one of the programs `names` (`curl … -u user:pw`).

    The command line runs on over `\\`-continued lines and ends at a new line, `|`, `&&`, `&` or
    `; ` (a `&` or `;` inside a URL does not end it). It also ends where one of `names` starts another
    command, so every character is scanned for at most one command: cleaning stays linear.
    """
    name = "|".join(_token(n, len(n), "", r"\w.-") for n in names)
    gap = rf"(?:(?!{name})[^\n|&;\\]|\\\r?\n|\\|&(?![&\s])|;(?!\s)){{0,2000}}?"
    return rf"(?:{name})(?=[ \t]){gap}(?<=\s){flag}{value}"


_MYSQL_CLIENTS = (
    *("mysql" + tool for tool in ("dump", "admin", "import", "check", "show", "slap", "")),
    *("mariadb" + tool for tool in ("-dump", "-admin", "-import", "-check", "-show", "-slap", "")),
)
# A flag's value: quoted, or a word up to the next whitespace.
_CLI_VALUE = r"""(?:"(?P<dq>[^"\n]{1,1000})"|'(?P<sq>[^'\n]{1,1000})'|(?P<uq>[^\s"'][^\s]{0,1000}))"""
# `user:password`, quoted or not; a user alone (curl then prompts for the password) is no match.
_USER_PASSWORD = (
    r"""(?:"(?P<dq>[^"\n:]{0,256}:[^"\n]{0,1000})"|'(?P<sq>[^'\n:]{0,256}:[^'\n]{0,1000})'"""
    r"""|(?P<uq>[^\s"':]{0,256}:[^\s]{0,1000}))"""
)


_B64 = "[A-Za-z0-9_-]"
# Before an unmistakable prefix (`ghp_`, `glpat-`, `xoxb-`, …) only a letter or digit means "not a
# token": one may follow `-`, `_` or `.` in a name built around it (`conv-ghp_…`). Short prefixes
# that also end words (`sk-`, `hf_`, `npm_`) must start a word, or kebab-case names would match.
_DISTINCT = "A-Za-z0-9"
# Most specific first: a token is counted once, under the first rule that claims it.
_SPECIFIC = (
    _rule(
        "private_key",
        r"(?s)-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|.*)",  # unterminated: to the end
        needles=("-----begin",),
    ),
    _rule("anthropic_key", _token("sk-ant-", 7, _B64 + "{16,300}", _DISTINCT), needles=("sk-ant-",)),
    _rule("openai_key", _token("sk-", 3, f"(?:proj-|svcacct-|admin-)?{_B64}{{20,300}}"), _with_digit, ("sk-",)),
    _rule("stripe_key", _token("[sr]k_", 3, "(?:live|test)_[A-Za-z0-9]{20,250}", _DISTINCT), needles=("sk_", "rk_")),
    _rule("stripe_key", _token("whsec_", 6, "[A-Za-z0-9+/]{24,250}", _DISTINCT), needles=("whsec_",)),
    _rule(
        "github_token", _token("gh[pousr]_", 4, "[A-Za-z0-9]{36,255}", _DISTINCT), needles=_prefixes("gh", "pousr", "_")
    ),
    _rule("github_token", _token("github_pat_", 11, r"\w{22,255}", _DISTINCT), needles=("github_pat_",)),
    _rule("gitlab_token", _token("glpat-", 6, _B64 + "{20,100}", _DISTINCT), needles=("glpat-",)),
    _rule(
        "slack_token",
        _token("xox[abprs]-", 5, "[A-Za-z0-9-]{10,250}", _DISTINCT),
        needles=_prefixes("xox", "abprs", "-"),
    ),
    _rule(
        "slack_token",
        r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/[\w/-]{8,300}",
        needles=("hooks.slack.com/",),
    ),
    _rule("aws_access_key", _token("A[KS]IA", 4, "[A-Z0-9]{16}(?![A-Za-z0-9])", "A-Za-z0-9"), needles=("akia", "asia")),
    _rule(
        "aws_secret_key",
        r"(?i:aws_?secret(?:_?access)?_?key)[\"']?[ \t]{0,5}(?:=>|:=|=|:)[ \t]{0,5}[\"']?"
        r"(?P<s>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
        _group,
        ("secret",),
    ),
    _rule("google_api_key", _token("AIza", 4, _B64 + "{35}", _DISTINCT), needles=("aiza",)),
    # OAuth access tokens: long in practice, but even a cut-off one is unmistakable by its prefix.
    _rule(
        "google_oauth_token",
        _token(r"ya29\.", 5, f"{_B64}{{10,4096}}(?:\\.{_B64}{{1,4096}}){{0,3}}", _DISTINCT),
        needles=("ya29.",),
    ),
    _rule("huggingface_token", _token("hf_", 3, "[A-Za-z0-9]{34,64}(?![A-Za-z0-9_])"), _mixed, ("hf_",)),
    _rule("npm_token", _token("npm_", 4, "[A-Za-z0-9]{36}(?![A-Za-z0-9_])"), _mixed, ("npm_",)),
    # A PyPI token is a base64url macaroon whose first bytes always encode to `AgE`.
    _rule("pypi_token", _token("pypi-AgE", 8, _B64 + "{50,4096}", _DISTINCT), needles=("pypi-age",)),
    _rule("sendgrid_key", _token(r"SG\.", 3, rf"{_B64}{{22}}\.{_B64}{{43}}(?!{_B64})", _DISTINCT), needles=("sg.",)),
    _rule(
        "jwt", _token("eyJ", 3, rf"{_B64}{{8,4096}}\.{_B64}{{8,8192}}\.{_B64}{{8,4096}}", _DISTINCT), needles=("eyj",)
    ),
)

_GENERIC = (
    # The user may be empty (`redis://:password@host`, how Redis URLs carry a password alone) or an
    # email address. The password may hold any punctuation, `@` and `/` too (`p@ss@host`, `Xk9/vT@host`):
    # it runs to the last `@` of the first `/`-separated part that has one, so an `@` later in the path
    # (`…@host/@scope/pkg`) is not taken for the host's. `host:8080/…@x` has a port there, not a password.
    _rule(
        "url_password",
        r"://[^\s:/?#\[\]]{0,256}:(?!\d{0,5}[/?#])(?P<s>(?:[^\s/@]{0,256}/){0,16}?[^\s/]{0,256})@",
        _group,
        ("://",),
    ),
    _rule(
        "basic_auth",
        _command(("curl",), r"(?:-[A-Za-z]{0,5}[uU][ \t]*|--(?:proxy-)?user[ \t]+)", _USER_PASSWORD),
        _user_password,
        ("curl",),
    ),
    _rule("basic_auth", _AUTH + r"basic[ \t]{1,5}(?P<s>[A-Za-z0-9+/]{1,4096}={0,2})", _group, ("author",)),
    _rule("bearer_token", r"(?i)(?=b)\bbearer[ \t]{1,5}(?P<s>[A-Za-z0-9._~+/-]{1,4096}=*)", _bearer, ("bearer",)),
    # Other schemes that carry a bare token in the header (Django REST's `Token`, Discord's `Bot`).
    _rule(
        "bearer_token", _AUTH + r"(?:token|bot)[ \t]{1,5}(?P<s>[A-Za-z0-9._~+/-]{8,4096}=*)", _scheme_token, ("author",)
    ),
    _rule(
        "password_assignment",
        r"(?i)(?=[psta])" + _KEYWORDS + r"[\"']?"
        # A type annotation (`password: str = "x"`) sits between the key and the real value.
        r"(?:[ \t]{0,5}:[ \t]{0,5}[A-Za-z_][\w.\[\]|, ]{0,60}?(?=[ \t]{1,5}=[^=]))?"
        r"(?P<pre>[ \t]{0,5})(?P<sep>=>|:=|=(?!=)|:)(?P<post>[ \t]{0,5})" + _VALUE,
        _assigned_value,
        _KEYWORD_NEEDLES,
    ),
    _rule(
        "password_assignment",
        r"(?i)(?=[psta])" + _KEYWORDS + r"[ \t]{1,5}(?:is|was):?[ \t]{1,5}(?:now[ \t]{1,5})?" + _VALUE,
        _prose_value,
        _KEYWORD_NEEDLES,
    ),
    _rule(
        "password_assignment",
        rf"(?i)(?P<dash>--)(?<![\w-]--)[\w-]{{0,30}}?{_KEYWORDS}(?P<pre>)(?P<sep>[ \t]{{1,5}})(?P<post>)" + _VALUE,
        _assigned_value,
        _KEYWORD_NEEDLES,
    ),
    # Passwords that command-line clients take after a short flag: `mysql -pX` (attached: `-p` alone
    # prompts), `sshpass -p X`, `redis-cli -a X`.
    _rule(
        "password_assignment",
        _command(_MYSQL_CLIENTS, "-p", _CLI_VALUE),
        _cli_value,
        ("mysql", "mariadb"),
    ),
    _rule("password_assignment", _command(("sshpass",), "-p[ \t]*", _CLI_VALUE), _cli_value, ("sshpass",)),
    _rule("password_assignment", _command(("redis-cli",), "-a[ \t]+", _CLI_VALUE), _cli_value, ("redis-cli",)),
)


def _apply(rule: _Rule, text: str, counts: dict[str, int]) -> str:
    """Replace every match of one rule, skipping matches that begin inside an existing marker."""
    markers: list[tuple[int, int]] | None = None  # found on the first match: most rules match nothing
    starts: list[int] = []
    out: list[str] = []
    pos = found = 0
    for m in rule.pattern.finditer(text):
        span = rule.pick(m)
        if span is None or span[1] <= span[0] or span[0] < pos:
            continue
        if markers is None:
            markers = [m.span() for m in _MARKER.finditer(text)]
            starts = [s for s, _ in markers]
        i = bisect_right(starts, span[0]) - 1
        if i >= 0 and markers[i][1] > span[0]:
            continue
        out += (text[pos : span[0]], f"[REDACTED:{rule.kind}]")
        pos, found = span[1], found + 1
    if not found:
        return text
    counts[rule.kind] = counts.get(rule.kind, 0) + found
    out.append(text[pos:])
    return "".join(out)


def _strip_private_once(text: str) -> tuple[str, int]:
    out: list[str] = []
    pos = depth = removed = 0
    for m in _TAG.finditer(text):
        if not m.group(1):
            if depth == 0:
                out.append(text[pos : m.start()])
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                out.append(_PRIVATE_MARKER)
                pos, removed = m.end(), removed + 1
        else:  # stray closing tag: dropped
            out.append(text[pos : m.start()])
            pos = m.end()
    if depth:  # unclosed block: fail closed and drop everything after it
        return "".join([*out, _PRIVATE_MARKER]), removed + 1
    out.append(text[pos:])
    return "".join(out), removed


def _strip_private(text: str, counts: dict[str, int]) -> str:
    removed = 0
    # Dropping a stray closing tag can splice a new tag together ("<priv</private>ate>"), so repeat;
    # pathological inputs that keep doing so are cut at the first remaining tag.
    for _ in range(3):
        if _TAG.search(text) is None:
            break
        text, n = _strip_private_once(text)
        removed += n
    else:
        leftover = _TAG.search(text)
        if leftover is not None:
            text, removed = text[: leftover.start()] + _PRIVATE_MARKER, removed + 1
    if removed:
        counts["private"] = removed
    return text


def without_markers(text: str) -> str:
    """`text` with our own `[private]` / `[REDACTED:…]` markers taken out (to see what is left)."""
    return _MARKER.sub(" ", text)


def says_something(text: str) -> bool:
    """Whether cleaned `text` holds a letter or digit outside the markers of what was removed."""
    return any(ch.isalnum() for ch in without_markers(text))


class PrivacyFilter:
    """Removes <private> blocks and redacts secrets before text is stored or indexed.

    A removed block becomes ``[private]`` (an unclosed one takes the rest of the text with it) and
    each secret becomes ``[REDACTED:<kind>]``; cleaning already-cleaned text changes nothing.
    """

    def __init__(self, *, extra_patterns: Sequence[tuple[str, str]] = ()) -> None:
        """Build the filter; `extra_patterns` are configured (kind, regex) pairs, whole match redacted.

        Raises ValueError for a kind that is not a short identifier and re.error for a bad regex.
        """
        extras = []
        for kind, regex in extra_patterns:
            if not _KIND.fullmatch(kind):
                raise ValueError(f"invalid redaction kind {kind!r}")
            extras.append(_Rule(kind, re.compile(regex)))
        # Configured patterns are assumed more specific than the generic key/value heuristics.
        self._rules: tuple[_Rule, ...] = (*_SPECIFIC, *extras, *_GENERIC)
        self._needles = frozenset(n for r in self._rules for n in r.needles)

    def clean(self, text: str) -> Redaction:
        """Return `text` with private blocks and secrets removed, plus per-kind redaction counts."""
        counts: dict[str, int] = {}
        text = _strip_private(text, counts)
        # Redactions only add markers, inside which no match counts, so one folding serves every pass.
        folded = text.casefold()
        present = {n for n in self._needles if n in folded}  # substring tests are far cheaper than patterns
        rules = [r for r in self._rules if not r.needles or not present.isdisjoint(r.needles)]
        # A replacement can change the context an earlier rule saw (a word edge, say): repeat until stable.
        for _ in range(3):
            before = sum(counts.values())
            for rule in rules:
                text = _apply(rule, text, counts)
            if sum(counts.values()) == before:
                break
        return Redaction(text=text, counts=counts)

    def clean_all(self, texts: Iterable[str]) -> tuple[list[str], dict[str, int]]:
        """Clean several texts (e.g. the fields of one record) and sum their counts."""
        results = [self.clean(t) for t in texts]
        return [r.text for r in results], merge_counts(*(r.counts for r in results))


_BUILT_IN = PrivacyFilter()


def redacted(text: str) -> str:
    """`text` with the secrets the built-in rules find redacted: for quoting what a caller gave in an
    error (which is logged, too) where no configured filter is at hand."""
    return _BUILT_IN.clean(text).text


def name_problem(name: str) -> str | None:
    """Why `name` (a session id, a project) may not be stored, when it holds a secret or a private part; else None.

    Such a name is refused, not cleaned: a name with `[REDACTED:…]` in it would name another record.
    Only the built-in rules apply, since names are checked where no configured filter is at hand.
    The rule names what was found, never the text.
    """
    found = _BUILT_IN.clean(name).counts
    secrets = sorted(kind for kind in found if kind != "private")
    if secrets:
        return (
            f"looks like it contains a secret ({', '.join(secrets)}), which is never stored; choose a name without it"
        )
    if found:
        return "must not contain a <private> tag (private text is never stored); choose a name without it"
    return None


def merge_counts(*counts: Mapping[str, int]) -> dict[str, int]:
    """Sum several kind -> count mappings into one, e.g. for a tool result's `redacted` field."""
    total: dict[str, int] = {}
    for mapping in counts:
        for kind, n in mapping.items():
            total[kind] = total.get(kind, 0) + n
    return {kind: n for kind, n in total.items() if n}
