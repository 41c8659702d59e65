"""Privacy filter applied to every piece of text before it is stored or indexed.

``<private>…</private>`` blocks are replaced by the marker ``[private]`` and secrets by
``[REDACTED:<kind>]``. Callers only ever see per-kind counts, never the redacted text.
Every pattern is compiled once and uses bounded quantifiers, so cleaning is roughly
linear in the input size and cannot backtrack catastrophically.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right, insort
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import takewhile

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
_Picks = Callable[[re.Match[str]], Sequence[_Span]]

# Text we emitted ourselves; a match starting inside one is skipped so clean() is idempotent.
_MARKER = re.compile(r"\[(?:REDACTED:[A-Za-z0-9_.-]{1,64}|private)\]")
_KIND = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_TAG = re.compile(r"<\s{0,5}(/?)\s{0,5}private(?:\s[^<>]{0,200})?>", re.IGNORECASE)
# `$PWD` is the shell's working directory (`-v $PWD:/app`), not a password.
# `loose` keywords also name other things: `pass` ends `DB_PASS` but also `first_pass`, a count, and
# "API key: …" heads prose too, so their unquoted values must look less like words or counts.
_KEYWORDS = (
    r"(?:passw(?:or)?d|passphrase|(?<![${])pwd|secret"
    r"|(?:api|access|secret|private|account)[_-]?key|secret[_-]?key[_-]?base|apikey"
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
# A YAML block scalar's header (`password: |`, `key: >-`): the value is on the lines below it.
_BLOCK_HEADER = re.compile(r"[|>][1-9+-]{0,2}(?:[ \t]+#.*)?")
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
    if value.startswith("[") and "[REDACTED:" in value:
        return None  # `api_key: [a, b]`: a list whose items the list rule has already judged
    if _BLOCK_HEADER.fullmatch(value) or not _is_secret(value.rstrip(_TRAILING), quoted=False, strict=strict):
        return None
    start, end = m.span("uq")
    if len(value) > 1 and value[-1] == "." and value[-2].isalnum():
        end -= 1
    return start, end


# A YAML key naming a secret (`  db_passwords`, `- "api_key"`) as the first thing on its line, up to its `:`.
_YAML_KEY = re.compile(
    r"(?i)[ \t]{0,40}(?:-[ \t]{1,5})?[\"']?(?P<name>[\w.-]{0,60}?" + _KEYWORDS + r"s?)[\"']?[ \t]{0,5}"
)
_FLOW_KEY = re.compile(
    r"(?i)(?<![\w.-])[\"']?(?P<name>[\w.-]{0,60}?" + _KEYWORDS.replace("?P<loose>", "?:") + r"s?)[\"']?[ \t]{0,5}\Z"
)
_YAML_ITEM = re.compile(r"-(?:[ \t]+|\Z)")
_YAML_MAPPING = re.compile(r"""(?:[\w.-]+|"[^"\n]*"|'[^'\n]*')[ \t]*:(?:[ \t]|\Z)""")
_YAML_COMMENT = re.compile(r"[ \t]+#")
_FLOW_ITEM = re.compile(
    r"""\s*(?:"(?P<dq>(?:[^"\\\n]|\\.){0,1000})"|'(?P<sq>[^'\n]{0,1000})'|(?P<uq>[^\s,"'][^,\n]{0,1000}?))\s*(?:,|\Z)"""
)


def _listed_secret(value: str) -> bool:
    """Whether one item of a list under a secret-named key is a secret.

    Judged like an unquoted `key: value`, and quoted items alike: a list under `tokens:` holds words
    as often as keys, so a word, a small count or a phrase with spaces is not taken for a secret.
    """
    v = value.strip()
    return bool(v) and not any(c.isspace() for c in v) and not _prose_word(v) and _is_secret(v, quoted=False)


def _item_span(text: str, start: int, end: int) -> _Span:
    """The span of the secret in one YAML list item's value `text[start:end]`, or None."""
    value = text[start:end]
    close = value.find(value[0], 1) if value[:1] in "\"'" else -1
    if close > 0:  # quoted: what follows the closing quote is a comment at most
        start, end = start + 1, start + close
    else:
        if _YAML_MAPPING.match(value) or value[:1] in "[{&*!|>":
            return None  # a nested mapping, collection, anchor, tag or block: not one plain value
        comment = _YAML_COMMENT.search(value)
        end = start + comment.start() if comment else end
    return (start, end) if _listed_secret(text[start:end]) else None


def _flow_items(m: re.Match[str]) -> list[_Span]:
    """The secrets among the items of a `[…]` list under a secret-named key (YAML flow or JSON)."""
    spans: list[_Span] = []
    for item in _FLOW_ITEM.finditer(m.string, m.start("flow"), m.end("flow")):
        name = next(n for n in ("dq", "sq", "uq") if item.group(n) is not None)
        start, end = item.span(name)
        end -= len(item.group(name)) - len(item.group(name).rstrip())
        spans.append((start, end) if _listed_secret(m.string[start:end]) else None)
    return spans


def _yaml_rows(text: str, pos: int, indent: int) -> list[tuple[int, int, int]]:
    """The (start, end, indent) of each non-blank line from `pos` on that belongs to a YAML key
    indented by `indent`: those indented deeper, and `- ` items at its own indent (at most 1000)."""
    rows: list[tuple[int, int, int]] = []
    while pos < len(text) and len(rows) < 1000:
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        line = text[pos:end]
        content = line.lstrip(" \t")
        if content.strip():
            lead = len(line) - len(content)
            if lead < indent or (lead == indent and not _YAML_ITEM.match(content)):
                break  # a sibling or parent key: the value has ended
            rows.append((pos + lead, pos + len(line.rstrip()), lead))
        pos = end + 1
    return rows


def _yaml_values(m: re.Match[str]) -> Sequence[_Span]:
    """The secrets a secret-named YAML key (whose `:` ends `m`'s header) holds below its line or in a `[…]` list.

    Below the key: the items of a `- …` list (each its own secret), or a block scalar (`password: |`)
    or plain scalar continued on indented lines, redacted whole. A nested mapping is left to the
    `key: value` rule for its own keys, and docker-compose's `secrets:` list names secrets, it holds none.
    """
    text = m.string
    if m.group("flow") is not None:  # in JSON too, where the key need not start its line
        key = _FLOW_KEY.search(text, max(0, m.start() - 80), m.start())
        return _flow_items(m) if key is not None and key.group("name").casefold() != "secrets" else ()
    line = text.rfind("\n", 0, m.start()) + 1
    key = _YAML_KEY.fullmatch(text, line, m.start())
    if key is None or key.group("name").casefold() == "secrets":
        return ()
    # The key's column, after any `- ` before it: its value is indented deeper, or is a list at that
    # column. The body is read only below a secret-named key and only as far as it goes, so the many
    # other `key:` lines of a document cost nothing beyond their header, and no line is read twice.
    indent = key.start("name") - line - (text[key.start("name") - 1] in "\"'")
    rows = _yaml_rows(text, m.end(), indent)
    if not rows:
        return ()
    first = rows[0]
    if m.group("block") is None and _YAML_ITEM.match(text, first[0], first[1]):
        spans: list[_Span] = []
        for start, end, lead in rows:
            if lead < first[2] or (lead == first[2] and not _YAML_ITEM.match(text, start, end)):
                break  # the list has ended
            dash = _YAML_ITEM.match(text, start, end) if lead == first[2] else None
            if dash is not None and dash.end() < end:  # deeper lines continue an item that is a mapping
                spans.append(_item_span(text, dash.end(), end))
        return spans
    block = list(takewhile(lambda row: row[2] > indent, rows))  # a scalar's lines are indented deeper
    if not block:
        return ()
    value = text[first[0] : block[-1][1]]
    if m.group("block") is None and (_YAML_MAPPING.match(value) or value.startswith(("#", "[", "{"))):
        return ()  # a nested mapping, comment or collection, not a scalar
    quoted = m.group("block") is not None  # a block scalar is a string whatever it holds
    return [(first[0], block[-1][1])] if _is_secret(value, quoted=quoted, strict=True) else ()


_INPUT_ATTR = re.compile(r"""([\w:.-]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?""")
_SECRET_NAME = re.compile(r"(?i)" + _KEYWORDS.replace("?P<loose>", "?:"))
_LABELLED_INPUTS = frozenset({"checkbox", "radio", "submit", "button", "reset", "image"})


def _input_value(m: re.Match[str]) -> _Span:
    """The `value` of an HTML `<input>` that holds a password (`type="password"`) or a key (`name="api_key"`)."""
    attrs: dict[str, tuple[str, int, bool]] = {}  # name -> (value, start, quoted)
    for attr in _INPUT_ATTR.finditer(m.string, m.start() + 6, m.end() - 1):
        for group, quoted in ((2, True), (3, True), (4, False)):
            if attr.group(group) is not None:
                attrs.setdefault(attr.group(1).lower(), (attr.group(group), attr.start(group), quoted))
    if "value" not in attrs:
        return None
    value, start, quoted = attrs["value"]
    if not quoted and value.startswith("{"):
        return None  # JSX: `value={password}` names the variable that holds it
    kind = attrs.get("type", ("text", 0, True))[0].strip().lower()
    if kind == "password":
        secret = _is_secret(value, quoted=True)
    elif kind in _LABELLED_INPUTS:
        return None  # the value is the button's label or the box's ticked value, not typed input
    else:
        names = (attrs.get(a, ("", 0, True))[0] for a in ("name", "id", "autocomplete"))
        secret = any(_SECRET_NAME.search(n) for n in names) and _listed_secret(value)
    return (start, start + len(value)) if secret else None


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    pick: _Pick = _whole
    # Substrings of which every match contains one, in `str.casefold()` form (each letter of them
    # is matched case-insensitively only by characters that casefold to it): a text holding none
    # is skipped without running the pattern, which is what keeps cleaning cheap.
    needles: tuple[str, ...] = ()
    # For a match that holds several secrets (the items of a list): their spans, in order, instead of `pick`.
    picks: _Picks | None = None


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
_LOGINS = (
    *(tool + " login" for tool in ("docker", "podman", "buildah", "nerdctl", "skopeo", "oras", "az", "oc", "cf")),
    "helm registry login",
    "az acr login",
)
_LDAP_CLIENTS = tuple("ldap" + tool for tool in ("search", "modify", "add", "delete", "whoami", "passwd", "compare"))
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
    # Personal, pipeline-trigger, runner and deploy tokens.
    *(
        _rule("gitlab_token", _token(prefix, len(prefix), _B64 + "{20,100}", _DISTINCT), needles=(prefix,))
        for prefix in ("glpat-", "glptt-", "glrt-", "gldt-")
    ),
    _rule(
        "slack_token",
        _token("xox[abeprs]-", 5, "[A-Za-z0-9-]{10,250}", _DISTINCT),
        needles=_prefixes("xox", "abeprs", "-"),
    ),
    _rule("slack_token", _token("xapp-", 5, r"\d-[A-Za-z0-9-]{20,250}", _DISTINCT), _with_digit, ("xapp-",)),
    _rule(
        "slack_token",
        r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/[\w/-]{8,300}",
        needles=("hooks.slack.com/",),
    ),
    _rule(
        "discord_webhook",
        r"https?://(?:\w+\.)?discord(?:app)?\.com/api/webhooks/\d{5,30}/[\w-]{20,200}",
        needles=("/api/webhooks/",),
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
    _rule("digitalocean_token", _token("do[opr]_v1_", 7, "[a-f0-9]{64}(?![A-Za-z0-9])", _DISTINCT), needles=("_v1_",)),
    _rule("groq_key", _token("gsk_", 4, "[A-Za-z0-9]{48,64}(?![A-Za-z0-9])"), _mixed, ("gsk_",)),
    _rule("vault_token", _token(r"hv[sb]\.", 4, _B64 + "{24,512}", _DISTINCT), _with_digit, ("hvs.", "hvb.")),
    # age's secret keys are Bech32, in upper case; their needle is one already looked for.
    _rule("age_secret_key", _token("AGE-SECRET-KEY-1", 16, "[02-9AC-HJ-NP-Z]{58}", _DISTINCT), needles=("secret",)),
    _rule(
        "jwt", _token("eyJ", 3, rf"{_B64}{{8,4096}}\.{_B64}{{8,8192}}\.{_B64}{{8,4096}}", _DISTINCT), needles=("eyj",)
    ),
)

_SPECIFIC_NEEDLES = frozenset(n for r in _SPECIFIC for n in r.needles)

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
    # Before the `key: value` rule, which would otherwise take a block header (`|`) or a `[` for the value.
    _Rule(
        "password_assignment",
        # Found by its `:` (ending a line, opening a block or a `[…]` list), a far rarer start than a keyword.
        re.compile(
            r":[ \t]{0,5}(?:\[(?!REDACTED:|private\])(?P<flow>[^\[\]]{0,4000})\]"
            r"|(?P<block>[|>][1-9+-]{0,2})?[ \t]{0,5}(?:#[^\n]{0,500})?(?=\r?\n))"
        ),
        needles=_KEYWORD_NEEDLES,
        picks=_yaml_values,
    ),
    _rule("password_assignment", r"(?i)<input\b[^<>]{0,2000}>", _input_value, ("<input",)),
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
    # `docker login -p X` (`docker run -p 8080:80` is a port, so only after `login`); `mongosh -p X`.
    _rule("password_assignment", _command(_LOGINS, "-p[ \t]*", _CLI_VALUE), _cli_value, ("login",)),
    _rule("password_assignment", _command(("mongo", "mongosh"), "-p[ \t]+", _CLI_VALUE), _cli_value, ("mongo",)),
    # OpenLDAP's clients take the bind password after `-w` (`-W` prompts for it).
    _rule("password_assignment", _command(_LDAP_CLIENTS, "-w[ \t]*", _CLI_VALUE), _cli_value, ("ldap",)),
    # OpenSSL's `-passin pass:X` and Java keytool's `-storepass X` (`-storepass:env VAR` names a variable).
    _rule(
        "password_assignment", r"-pass(?<![\w-]-pass)(?:in|out)?[ \t]{1,5}pass:" + _CLI_VALUE, _cli_value, ("-pass",)
    ),
    _rule(
        "password_assignment",
        r"(?<![\w-])-(?:src|dest|new)?(?:store|key)pass[ \t]{1,5}" + _CLI_VALUE,
        _cli_value,
        ("storepass", "keypass"),
    ),
)


def _apply(rule: _Rule, text: str, counts: dict[str, int]) -> str:
    """Replace every match of one rule, skipping matches that begin inside an existing marker."""
    markers: list[tuple[int, int]] | None = None  # found on the first match: most rules match nothing
    starts: list[int] = []
    out: list[str] = []
    pos = found = 0
    for m in rule.pattern.finditer(text):
        for span in (rule.pick(m),) if rule.picks is None else rule.picks(m):
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


# Characters that render as nothing: a token split by them looks whole to a reader (and one copied
# from a web page or a chat often carries them), so the folded view drops them.
_INVISIBLE = "\u00ad\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff"
# What the folded view folds: the invisible characters, and the look-alikes of ASCII that NFKC folds
# one for one into what tokens are made of: fullwidth letters, digits and `+-./=_~` (which an East
# Asian input method types) and mathematical letters and digits. Fullwidth punctuation such as
# `：，（）` is left out, since no token holds it and Chinese or Japanese prose is full of it; looking
# for these characters alone keeps the check cheap on the many texts with other non-ASCII.
_FOLDS = f"{_INVISIBLE}\uff0b\uff0d-\uff19\uff1d\uff21-\uff3a\uff3f\uff41-\uff5a\uff5e\U0001d400-\U0001d7ff"
_FOLDABLE = re.compile(f"[{_FOLDS}]")
# A run of what tokens are made of with a foldable character in it, from its start (so that each
# character is scanned once): the only place a disguised token can be. It leaves out the few token
# rules whose matches hold spaces (a PEM block, `aws_secret_access_key = …`), whose disguise is unlikely.
_TOKEN_CHARS = r"\-A-Za-z0-9_.+/=~:"
_DISGUISED = re.compile(f"(?<![{_TOKEN_CHARS}{_FOLDS}])[{_TOKEN_CHARS}]*+[{_FOLDS}][{_TOKEN_CHARS}{_FOLDS}]*+")


@lru_cache(maxsize=2048)
def _fold_char(ch: str) -> str:
    if ch in _INVISIBLE:
        return ""
    folded = unicodedata.normalize("NFKC", ch)
    return folded if len(folded) == 1 else ch


def _fold_match(m: re.Match[str]) -> str:
    return _fold_char(m.group())


def _unfold_tokens(rules: Sequence[_Rule], needles: frozenset[str], text: str, counts: dict[str, int]) -> str:
    """Redact the provider tokens `text` holds in disguise: in fullwidth or mathematical letters, or
    split by invisible characters. They are matched on a folded view of `text` and each is redacted
    in `text` whole, invisible characters included; text without such characters is returned as it is.
    `needles` are those of `rules`.
    """
    if text.isascii() or _FOLDABLE.search(text) is None:
        return text
    # The shortest token any rule matches is longer than 10 characters.
    runs = [
        _FOLDABLE.sub(_fold_match, m.group()).casefold() for m in _DISGUISED.finditer(text) if m.end() - m.start() > 10
    ]
    if not runs:
        return text
    present = {n for n in needles if any(n in run for run in runs)}
    rules = [r for r in rules if not present.isdisjoint(r.needles)]
    if not rules:
        return text
    view = _FOLDABLE.sub(_fold_match, text)
    # Folding keeps every character but the invisible ones, so the view's index `v` is the text's
    # `v` plus the number of characters dropped before it; `dropped[j]` is where the j-th one would be.
    dropped = [m.start() - j for j, m in enumerate(_FOLDABLE.finditer(text)) if not _fold_char(m.group())]
    # Spans taken in `view`, kept sorted and disjoint: our markers first (no match may start inside
    # one), then each token found, which a later rule's match may not overlap (the first rule wins).
    taken = [m.span() for m in _MARKER.finditer(view)]
    found: list[tuple[int, int, str]] = []  # (start, end, kind) in `view`
    for rule in rules:
        for m in rule.pattern.finditer(view):
            span = rule.pick(m)
            if span is None or span[1] <= span[0]:
                continue
            i = bisect_right(taken, (span[0], len(view) + 1))
            if (i > 0 and taken[i - 1][1] > span[0]) or (i < len(taken) and taken[i][0] < span[1]):
                continue
            insort(taken, span)
            found.append((span[0], span[1], rule.kind))
    if not found:
        return text
    out: list[str] = []
    pos = 0
    for start, end, kind in sorted(found):
        out += (text[pos : start + bisect_right(dropped, start)], f"[REDACTED:{kind}]")
        pos = end + bisect_right(dropped, end - 1)
        counts[kind] = counts.get(kind, 0) + 1
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


class _RulePlan:
    """Which of a sequence of rules can match a text, from the needles found in it."""

    def __init__(self, rules: tuple[_Rule, ...]) -> None:
        self.rules = rules
        self._always = frozenset(i for i, r in enumerate(rules) if not r.needles)
        by_needle: dict[str, set[int]] = {}
        for i, rule in enumerate(rules):
            for needle in rule.needles:
                by_needle.setdefault(needle, set()).add(i)
        self._by_needle = {n: frozenset(ids) for n, ids in by_needle.items()}

    def select(self, present: Iterable[str]) -> list[_Rule]:
        """The rules, in their order, that have no needles or one of `present`."""
        chosen = self._always.union(*(self._by_needle.get(n, ()) for n in present))
        return [self.rules[i] for i in sorted(chosen)]


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
        self._plan = _RulePlan(self._rules)

    def clean(self, text: str) -> Redaction:
        """Return `text` with private blocks and secrets removed, plus per-kind redaction counts."""
        counts: dict[str, int] = {}
        text = _strip_private(text, counts)
        text = _unfold_tokens(_SPECIFIC, _SPECIFIC_NEEDLES, text, counts)
        # Redactions only add markers, inside which no match counts, so one folding serves every pass.
        folded = text.casefold()
        present = {n for n in self._needles if n in folded}  # substring tests are far cheaper than patterns
        if self._plan.rules is not self._rules:  # replaced after construction (as tests do)
            self._plan = _RulePlan(self._rules)
        rules = self._plan.select(present)
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
