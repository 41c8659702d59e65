"""Whether a matched value is a secret: the pickers of key/value assignments, prose, CLI flags,
YAML lists and blocks, and HTML inputs, which tell a secret from a placeholder, code or prose."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from itertools import takewhile

_Span = tuple[int, int] | None
_Pick = Callable[[re.Match[str]], _Span]
_Picks = Callable[[re.Match[str]], Sequence[_Span]]

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
    r"""|(?P<uq>[^\s"',;&)\]}{][^\s,;&]{0,511}(?:[,;&](?![A-Za-z_][\w.-]{0,40}=[^\s=])[^\s,;&]{0,511}){0,63}))"""
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


def _htpasswd(printed: bool) -> _Pick:
    """The password `htpasswd -b` takes last: after the file and the user, or (`printed`, with `-n`)
    after the user alone. Without -b htpasswd prompts, and the last word is the user."""

    def pick(m: re.Match[str]) -> _Span:
        letters = m.group("flags")
        return _cli_value(m) if "b" in letters and ("n" in letters) == printed else None

    return pick


# A cookie's `name=value` in a Cookie or Set-Cookie header, or curl's -b/--cookie.
_COOKIE_PAIR = re.compile(r"(?<![^;,\s\"'])(?P<name>[^=;,\s\"']{1,200})=(?P<value>[^;\s\"']{1,4096})")
_COOKIE_ATTRIBUTES = frozenset({"path", "domain", "expires", "max-age", "samesite", "priority", "version"})


def _cookie_values(m: re.Match[str]) -> list[_Span]:
    """The values of the cookies a header or flag sets or sends: a session id is a bearer credential.
    Attributes (Path, Expires, …) and short or plain values (`lang=en`, `theme=dark`) stay."""
    name = next(n for n in ("pairs", "dq", "sq", "uq") if n in m.re.groupindex and m.group(n) is not None)
    spans: list[_Span] = []
    for pair in _COOKIE_PAIR.finditer(m.string, *m.span(name)):
        value = pair.group("value")
        if pair.group("name").casefold() in _COOKIE_ATTRIBUTES or len(value) < 12 or not _random_looking(value):
            continue
        spans.append(pair.span("value"))
    return spans


def _user_password(m: re.Match[str]) -> _Span:
    """The password of a `user:password` pair (`curl -u`), the user kept; none when only a user is given."""
    return _after_user(m, ":")


def _user_percent_password(m: re.Match[str]) -> _Span:
    """The password of a `user%password` pair (Samba's `-U`), the user kept; none when only a user is given."""
    return _after_user(m, "%")


def _after_user(m: re.Match[str], separator: str) -> _Span:
    name = next(n for n in ("dq", "sq", "uq") if m.group(n) is not None)
    user, _, password = m.group(name).partition(separator)
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


_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
# A format string's replacement field: a name or expression, a conversion, a format spec.
_FORMAT_FIELD = re.compile(r"[A-Za-z_][\w.]*(?:\[[^\]]{0,100}\])?(?:\(\))?(?:![rsa])?(?::[^{}]{0,50})?")


def _listed_secret(value: str) -> bool:
    """Whether one item of a list under a secret-named key is a secret.

    Judged like an unquoted `key: value`, and quoted items alike: a list under `tokens:` holds words
    as often as keys, so a word, a small count or a phrase with spaces is not taken for a secret.
    """
    v = value.strip()
    if not v or any(c.isspace() for c in v) or _prose_word(v) or _NUMBER.fullmatch(v):
        return False  # a number under `tokens:` is a token id or a count (`[101, 7592]`), not a key
    return _is_secret(v, quoted=False)


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


# One `key: value` / `key = value` pair of a `{…}` map (JSON, YAML flow, HCL, TOML inline table).
_MAP_ITEM = re.compile(
    r"""\s*(?:"[^"\n]{0,200}"|'[^'\n]{0,200}'|[\w.-]{1,200})[ \t]*(?:=>|:|=)[ \t]*"""
    r"""(?:"(?P<dq>(?:[^"\\\n]|\\.){0,1000})"|'(?P<sq>[^'\n]{0,1000})'|(?P<uq>[^\s,"'][^,\n]{0,1000}?))"""
    r"""[ \t]*(?:[,;]|\r?\n|\Z)"""
)


def _map_values(m: re.Match[str]) -> list[_Span]:
    """The secrets among the values of a `{…}` map under a secret-named key (`"api_key": {"value": "…"}`),
    each judged like an item of a list; a `{…}` that holds no pairs is a value of its own (`pwd={Xk9…}`)."""
    spans: list[_Span] = []
    pos, stop = m.span("map")
    while pos < stop:
        item = _MAP_ITEM.match(m.string, pos, stop)
        if item is None:  # not a pair: on to the next separator, so no stretch of the map is read twice
            pos = min((i for i in (m.string.find(c, pos, stop) for c in ",;\n") if i >= 0), default=stop) + 1
            continue
        name = next(n for n in ("dq", "sq", "uq") if item.group(n) is not None)
        start, end = item.span(name)
        end -= len(item.group(name)) - len(item.group(name).rstrip())
        spans.append((start, end) if _listed_secret(m.string[start:end]) else None)
        pos = max(item.end(), pos + 1)
    if spans:
        return spans
    start, end = m.span("map")
    whole = m.string[start:end].strip()
    if _FORMAT_FIELD.fullmatch(whole) and not _RANDOM_RUN.search(whole):
        return []  # `f"password: {password}"` names the variable that holds it
    return [(start - 1, end + 1)] if whole and _is_secret(whole, quoted=False) else []


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
