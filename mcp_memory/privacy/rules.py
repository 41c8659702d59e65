"""The redaction rules: provider-specific token patterns first, then the generic ones (URLs, auth
headers, `key: value` assignments, command-line passwords), each with the needles that gate it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mcp_memory.privacy.values import (
    _AUTH,
    _KEYWORD_NEEDLES,
    _KEYWORDS,
    _VALUE,
    _assigned_value,
    _bearer,
    _cli_value,
    _cookie_values,
    _group,
    _htpasswd,
    _input_value,
    _map_values,
    _mixed,
    _Pick,
    _Picks,
    _prose_value,
    _scheme_token,
    _user_password,
    _user_percent_password,
    _whole,
    _with_digit,
    _yaml_values,
)


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
# The same with Samba's `%` between them (`smbclient -U 'DOMAIN\\alice%pw'`).
_USER_PERCENT_PASSWORD = (
    r"""(?:"(?P<dq>[^"\n%]{0,256}%[^"\n]{0,1000})"|'(?P<sq>[^'\n%]{0,256}%[^'\n]{0,1000})'"""
    r"""|(?P<uq>[^\s"'%]{0,256}%[^\s]{0,1000}))"""
)
_HTPASSWD_FLAGS = r"(?P<flags>(?:-[A-Za-z]{1,8}(?:(?<=[Cr])[ \t]+\d{1,3})?[ \t]+){1,4})"
# A `net use` password: not a `/switch`, a `*` (which prompts) or another `\\server` path.
_NET_USE_VALUE = r"""(?:"(?P<dq>[^"\n]{1,1000})"|'(?P<sq>[^'\n]{1,1000})'|(?P<uq>[^\s"'/*\\][^\s]{0,1000}))"""
_SAMBA_CLIENTS = ("smbclient", "rpcclient", "smbcacls", "smbget", "smbtree", "net rpc", "net ads")


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
        # `aws configure set aws_secret_access_key X` puts only a space between them
        r"(?i:aws_?secret(?:_?access)?_?key)[\"']?(?:[ \t]{0,5}(?:=>|:=|=|:)[ \t]{0,5}|[ \t]{1,5})[\"']?"
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
    # Twilio API key secrets' ids (SK + 32 hex) and Mailgun's older private keys (key- + 32 hex).
    _rule("twilio_key", _token("SK", 2, "[0-9a-f]{32}(?![A-Za-z0-9])", _DISTINCT), _with_digit, ("sk",)),
    _rule("mailgun_key", _token("key-", 4, "[0-9a-f]{32}(?![A-Za-z0-9])", _DISTINCT), _with_digit, ("key-",)),
    # Atlassian (Jira, Confluence, Bitbucket) API tokens.
    _rule("atlassian_token", _token("ATATT3", 6, "[A-Za-z0-9_=-]{100,400}", _DISTINCT), needles=("atatt3",)),
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
    # A `{…}` map as the value (before the `key = value` rule, which leaves a value starting with `{`).
    _Rule(
        "password_assignment",
        re.compile(
            r"(?i)(?=[psta])" + _KEYWORDS + r"[\"']?[ \t]{0,5}(?:=>|:=|=|:)[ \t]{0,5}\{(?P<map>[^{}]{0,4000})\}"
        ),
        needles=_KEYWORD_NEEDLES,
        picks=_map_values,
    ),
    _rule(
        "password_assignment",
        # The key may close a subscript: `os.environ["OPENAI_API_KEY"] = "…"`, `config['api_key'] = …`.
        r"(?i)(?=[psta])" + _KEYWORDS + r"(?:[\"']\]?)?"  # the `]` after a quote only: a marker ends in `token]`
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
    _rule(
        "password_assignment",
        _command(_SAMBA_CLIENTS, r"(?:-U[ \t]*|--user(?:=|[ \t]+))", _USER_PERCENT_PASSWORD),
        _user_percent_password,
        ("smb", "rpcclient", "net "),
    ),
    # Session cookies: a Cookie or Set-Cookie header (curl -v prints them after `<` / `>`), curl -b / --cookie.
    _Rule(
        "session_cookie",
        re.compile(r"(?i)(?<![\w-])(?:set-)?cookie[ \t]*:[ \t]*(?P<pairs>[^\r\n]{1,4000})"),
        needles=("cookie",),
        picks=_cookie_values,
    ),
    _Rule(
        "session_cookie",
        re.compile(_command(("curl",), r"(?:-b[ \t]*|--cookie[ \t]+)", _CLI_VALUE)),
        needles=("curl",),
        picks=_cookie_values,
    ),
    # Apache's `htpasswd -b FILE USER PASSWORD` (`-nb USER PASSWORD` prints instead); -C and -r take a number.
    *(
        _rule(
            "password_assignment",
            _command(
                ("htpasswd",), _HTPASSWD_FLAGS + rf"(?:[^\s-]\S{{0,1000}}[ \t]+){{{1 if printed else 2}}}", _CLI_VALUE
            ),
            _htpasswd(printed),
            ("htpasswd",),
        )
        for printed in (True, False)
    ),
    # Windows' `net use \\server\share PASSWORD /user:NAME`, or the password after `/user:NAME`.
    _rule(
        "password_assignment",
        _command(("net use", "NET USE"), r"(?:\\\\[^\s\\]{1,255}\\\S{1,1000}|/user:\S{1,300})[ \t]+", _NET_USE_VALUE),
        _cli_value,
        ("net use",),
    ),
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
