"""Tests for the privacy filter. Every fake secret is built by concatenation so that no
complete token pattern appears in this file for secret scanners to flag."""

from __future__ import annotations

import dataclasses
import random
import string
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client

from mcp_memory.privacy import PrivacyFilter, Redaction, merge_counts
from tests.conftest import call

F = PrivacyFilter()

BEGIN = "-----BEGIN "
END = "-----END "
GITHUB = "ghp" + "_" + "A1b2" * 9
GITHUB_PAT = "github" + "_pat_" + "11ABCDEFG0" + "x" * 20 + "_" + "y9" * 29
GITLAB = "gl" + "pat-" + "Zx9" * 7
OPENAI = "sk" + "-" + "T3BlbkFJ" * 6
OPENAI_PROJ = "sk" + "-proj-" + "Ab3_" * 20
ANTHROPIC = "sk" + "-ant-api03-" + "Qw9-" * 22
SLACK = "xo" + "xb-" + "1234567890-0987654321-" + "AbCd" * 6
SLACK_HOOK = "https://hooks." + "slack.com/services/" + "T0000000/B0000000/" + "X1" * 12
STRIPE = "sk" + "_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
STRIPE_TEST = "rk" + "_test_" + "51H" * 10
AWS_ID = "AK" + "IA" + "IOSFODNN7EXAMPLE"
AWS_SESSION_ID = "AS" + "IA" + "Y34FZKBOKMUTVV7A"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
GOOGLE = "AI" + "za" + "SyD-" + "9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
JWT = "ey" + "JhbGciOiJIUzI1NiJ9.ey" + "JzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
BEARER = "mF_9.B5f-4.1JqM" + "zQk8x2"
BASIC = "dXNlcjpw" + "YXNzd29yZA=="


def check(text: str, secret: str, kind: str, n: int = 1) -> Redaction:
    """Clean `text` and assert `secret` is gone and counted exactly `n` times under `kind`."""
    result = F.clean(text)
    assert secret not in result.text
    assert dict(result.counts) == {kind: n}
    assert result.text.count(f"[REDACTED:{kind}]") == n
    return result


@pytest.mark.parametrize(
    ("kind", "secret"),
    [
        ("github_token", GITHUB),
        ("github_token", GITHUB_PAT),
        ("gitlab_token", GITLAB),
        ("openai_key", OPENAI),
        ("openai_key", OPENAI_PROJ),
        ("anthropic_key", ANTHROPIC),
        ("slack_token", SLACK),
        ("slack_token", SLACK_HOOK),
        ("stripe_key", STRIPE),
        ("stripe_key", STRIPE_TEST),
        ("aws_access_key", AWS_ID),
        ("aws_access_key", AWS_SESSION_ID),
        ("google_api_key", GOOGLE),
        ("jwt", JWT),
    ],
)
def test_provider_token_is_redacted_and_surrounding_text_kept(kind: str, secret: str) -> None:
    result = check(f"deploy used {secret} yesterday.", secret, kind)
    assert result.text == f"deploy used [REDACTED:{kind}] yesterday."


def test_anthropic_key_is_counted_as_anthropic_not_openai() -> None:
    check("ANTHROPIC_API_KEY=" + ANTHROPIC, ANTHROPIC, "anthropic_key")


def test_token_inside_assignment_is_counted_once_under_its_specific_kind() -> None:
    result = check(f'GITHUB_TOKEN="{GITHUB}"', GITHUB, "github_token")
    assert result.text == 'GITHUB_TOKEN="[REDACTED:github_token]"'


def test_several_tokens_of_one_kind_are_all_counted() -> None:
    check(f"{GITHUB} and {GITHUB[:-1]}Z", GITHUB[:10], "github_token", n=2)


@pytest.mark.parametrize("algo", ["RSA ", "EC ", "OPENSSH ", "ENCRYPTED ", "", "DSA "])
def test_pem_private_key_block_is_redacted(algo: str) -> None:
    body = "MIIEowIBAAKCAQEA7x9" + "q" * 64 + "\nZm9vYmFy" + "r" * 60
    pem = f"{BEGIN}{algo}PRIVATE KEY-----\n{body}\n{END}{algo}PRIVATE KEY-----"
    result = check(f"key file:\n{pem}\nthat was it", "MIIEowIBAAKCAQEA", "private_key")
    assert result.text == "key file:\n[REDACTED:private_key]\nthat was it"


def test_unterminated_pem_block_is_redacted_to_the_end() -> None:
    text = "before\n" + BEGIN + "RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nmore key material"
    result = check(text, "more key material", "private_key")
    assert result.text == "before\n[REDACTED:private_key]"


def test_aws_secret_key_in_assignment_keeps_the_key_name() -> None:
    result = check(f"aws_secret_access_key = {AWS_SECRET}\nregion = eu-west-1", AWS_SECRET, "aws_secret_key")
    assert result.text == "aws_secret_access_key = [REDACTED:aws_secret_key]\nregion = eu-west-1"


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Bearer " + BEARER,
        'curl -H "authorization: bearer ' + BEARER + '" https://x',
        "Bearer " + BEARER,
    ],
)
def test_bearer_token_is_redacted(text: str) -> None:
    result = check(text, BEARER, "bearer_token")
    assert "earer [REDACTED:bearer_token]" in result.text


def test_short_bearer_value_is_redacted_only_after_an_authorization_header() -> None:
    check("Authorization: Bearer abc123", "abc123", "bearer_token")
    assert F.clean("use Bearer abc123 here").counts == {}


def test_basic_auth_header_is_redacted() -> None:
    result = check("Authorization: Basic " + BASIC, BASIC, "basic_auth")
    assert result.text == "Authorization: Basic [REDACTED:basic_auth]"


def test_url_password_keeps_scheme_user_and_host() -> None:
    result = check("db at postgres://app:" + "s3cr3t-pw" + "@db.internal:5432/main ok", "s3cr3t-pw", "url_password")
    assert result.text == "db at postgres://app:[REDACTED:url_password]@db.internal:5432/main ok"


def test_url_without_password_or_with_placeholder_is_untouched() -> None:
    for text in [
        "https://user@example.com/x",
        "redis://default:${REDIS_PASSWORD}@cache:6379",
        "http://a:8080/b",
    ]:
        assert F.clean(text) == Redaction(text, {})


@pytest.mark.parametrize(
    ("text", "secret", "expected"),
    [
        ("DB_PASSWORD=hunter", "hunter", "DB_PASSWORD=[REDACTED:password_assignment]"),
        ('{"password": "hunter2"}', "hunter2", '{"password": "[REDACTED:password_assignment]"}'),
        ("password: hunter2", "hunter2", "password: [REDACTED:password_assignment]"),
        (
            "  client_secret: abcdefgh1234\n",
            "abcdefgh1234",
            "  client_secret: [REDACTED:password_assignment]\n",
        ),
        (
            "connect(passwd='pa55', host=h)",
            "pa55",
            "connect(passwd='[REDACTED:password_assignment]', host=h)",
        ),
        (":api_key => 'k3y-value'", "k3y-value", ":api_key => '[REDACTED:password_assignment]'"),
        (
            "mysql --password s3cret --user root",
            "s3cret",
            "mysql --password [REDACTED:password_assignment] --user root",
        ),
        ("app --password foo", "foo", "app --password [REDACTED:password_assignment]"),
        ("app --api-key=abc", "abc", "app --api-key=[REDACTED:password_assignment]"),
        ('password: str = "hunter2"', "hunter2", 'password: str = "[REDACTED:password_assignment]"'),
        ("apiKey: 'xyz'", "xyz", "apiKey: '[REDACTED:password_assignment]'"),
        ("GET /v1?access_token=abc&x=1", "abc", "GET /v1?access_token=[REDACTED:password_assignment]&x=1"),
        ("token: correcthorsebattery.", "correcthorse", "token: [REDACTED:password_assignment]."),
    ],
)
def test_password_assignment_keeps_key_and_redacts_value(text: str, secret: str, expected: str) -> None:
    result = check(text, secret, "password_assignment")
    assert result.text == expected


@pytest.mark.parametrize(
    "text",
    [
        "the password is stored in vault",
        "token: see docs",
        "secret: the usual one",
        "password=None",
        "password: null",
        "api_key = ''",
        'password: ""',
        "secret: true",
        "password: ***",
        "api_key: <your-token>",
        "token: ${GITHUB_TOKEN}",
        "PGPASSWORD=$PW psql",
        "password: {{ vault_db_password }}",
        "api_key = YOUR_API_KEY",
        "password = os.environ['DB_PASSWORD']",
        "token = self.token",
        "token = get_token()",
        "token: Optional[str] = None",
        "def login(user: str, password: str) -> None:",
        "max_tokens=4096",
        "password_hash: argon2",
        "if password == expected:",
        "the bearer of this letter",
        "Bearer authentication is used",
        "scikit uses sk-learn-is-a-python-library-name as a joke",
        "--password --user admin",
        "[REDACTED:jwt] and [private] stay as they are",
        "",
    ],
)
def test_non_secret_values_and_prose_are_untouched(text: str) -> None:
    assert F.clean(text) == Redaction(text, {})


def test_private_block_is_replaced_by_marker_and_counted() -> None:
    result = F.clean("keep <private>my home address</private> this")
    assert result == Redaction("keep [private] this", {"private": 1})


def test_private_blocks_span_lines_match_case_insensitively_and_are_all_removed() -> None:
    text = "a <private>line1\nline2</private> b <PRIVATE>x</Private> c < private >y</ private > d"
    result = F.clean(text)
    assert result.text == "a [private] b [private] c [private] d"
    assert result.counts == {"private": 3}


def test_unclosed_private_tag_removes_everything_after_it() -> None:
    assert F.clean("ok <private>secret stuff\nmore secret") == Redaction("ok [private]", {"private": 1})


def test_stray_closing_private_tag_is_dropped() -> None:
    assert F.clean("visible </private> text") == Redaction("visible  text", {})


def test_nested_private_blocks_are_removed_as_one() -> None:
    result = F.clean("a <private>x <private>y</private> z</private> b")
    assert result == Redaction("a [private] b", {"private": 1})


def test_nested_private_block_left_open_fails_closed() -> None:
    assert F.clean("a <private>x <private>y</private> z") == Redaction("a [private]", {"private": 1})


def test_private_tag_spliced_together_by_a_stray_closer_is_still_honoured() -> None:
    result = F.clean("a <priv</private>ate>hidden</private> b")
    assert "hidden" not in result.text
    assert result.counts == {"private": 1}


def test_private_runs_before_secret_rules() -> None:
    result = F.clean(f"<private>{GITHUB}</private> and {GITLAB}")
    assert result == Redaction("[private] and [REDACTED:gitlab_token]", {"private": 1, "gitlab_token": 1})


def test_clean_is_idempotent_on_a_mixed_document() -> None:
    doc = "\n".join(
        [
            "<private>notes</private>",
            f"export GITHUB_TOKEN={GITHUB}",
            "password: hunter2",
            "Authorization: Bearer " + BEARER,
            "postgres://u:pw12345@h/db",
            BEGIN + "EC PRIVATE KEY-----\nabc\n" + END + "EC PRIVATE KEY-----",
            f"api_key = '{OPENAI}'",
        ]
    )
    first = F.clean(doc)
    assert set(first.counts) == {
        "private",
        "github_token",
        "password_assignment",
        "bearer_token",
        "url_password",
        "private_key",
        "openai_key",
    }
    second = F.clean(first.text)
    assert second == Redaction(first.text, {})


def test_clean_all_returns_texts_in_order_and_sums_counts() -> None:
    texts, counts = F.clean_all([f"a {GITHUB}", "plain", f"<private>x</private> {GITHUB} {GITLAB}"])
    assert texts == [
        "a [REDACTED:github_token]",
        "plain",
        "[private] [REDACTED:github_token] [REDACTED:gitlab_token]",
    ]
    assert counts == {"github_token": 2, "private": 1, "gitlab_token": 1}


def test_clean_all_of_nothing_is_empty() -> None:
    assert F.clean_all([]) == ([], {})


def test_merge_counts_sums_and_drops_zeros() -> None:
    assert merge_counts({"a": 1, "b": 0}, {"a": 2, "c": 1}, {}) == {"a": 3, "c": 1}
    assert merge_counts() == {}


def test_extra_patterns_are_redacted_under_their_kind() -> None:
    f = PrivacyFilter(extra_patterns=[("acme_ticket_key", r"ACME-[0-9]{6}"), ("codename", r"(?i)project\s+nimbus")])
    result = f.clean("use ACME-123456 for Project Nimbus, not ACME-12")
    assert result.text == "use [REDACTED:acme_ticket_key] for [REDACTED:codename], not ACME-12"
    assert result.counts == {"acme_ticket_key": 1, "codename": 1}
    assert f.clean(result.text).counts == {}


def test_extra_pattern_that_matches_marker_text_does_not_break_idempotence() -> None:
    f = PrivacyFilter(extra_patterns=[("caps", r"[A-Z]{5,}")])
    first = f.clean("HELLO " + GITHUB)
    assert first.text == "[REDACTED:caps] [REDACTED:github_token]"
    assert f.clean(first.text) == Redaction(first.text, {})


def test_extra_pattern_with_invalid_kind_is_rejected() -> None:
    with pytest.raises(ValueError, match="invalid redaction kind"):
        PrivacyFilter(extra_patterns=[("bad kind]", "x")])


def test_text_without_secrets_is_returned_unchanged_with_empty_counts() -> None:
    text = "Refactored the indexer; 42 tests pass. See https://example.com/docs?page=2 — ünïcödé ✓"
    assert F.clean(text) == Redaction(text, {})


def test_odd_inputs_do_not_raise() -> None:
    for text in ["\x00\x01\xff" * 100, "\ud800 lone surrogate", "😀" * 1000, "<" * 5000, "-----BEGIN" * 999]:
        assert isinstance(F.clean(text).text, str)


def test_one_megabyte_of_random_text_cleans_quickly() -> None:
    rnd = random.Random(7)
    text = "".join(rnd.choices(string.printable, k=1_000_000))
    start = time.perf_counter()
    F.clean(text)
    assert time.perf_counter() - start < 1.0


def test_adversarial_repetition_cleans_in_linear_time() -> None:
    # CPU time, not wall time, so a busy machine cannot fail it; a backtracking pattern on inputs
    # this long would cost minutes, linear cleaning well under a second.
    start = time.process_time()
    for text in ["Bearer " * 100_000, "password: " * 100_000, '"' * 300_000, "<private " * 100_000]:
        F.clean(text)
    assert time.process_time() - start < 10.0


# fmt: off
FRAGMENTS = [
    "password", "token", "secret", "api_key", ":", "=", "=>", "--", ".", "@", "://", "u:", "'", '"', " ",
    "\n", "hunter2", "None", "${X}", "<tok>", "<priv", "ate>", "<private>", "</private>", "[REDACTED:x]",
    "[private]", "Bearer ", "Authorization: ", "Basic ", BEGIN + "RSA PRIVATE KEY-----",
    END + "RSA PRIVATE KEY-----", "sk-", "ant-", "ey" + "J", "AK" + "IA", "gh" + "p_", "a" * 20, "Ab1" * 7,
    GITHUB, JWT,
]
# fmt: on


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_clean_never_raises_and_is_idempotent_on_arbitrary_text(text: str) -> None:
    first = F.clean(text)
    assert F.clean(first.text) == Redaction(first.text, {})


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=5), max_size=30).map("".join))
def test_clean_is_idempotent_on_secret_like_fragments(text: str) -> None:
    first = F.clean(text)
    assert all(n > 0 for n in first.counts.values())
    assert F.clean(first.text) == Redaction(first.text, {})


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("the wifi password is 'hunter2-s3cr3t'", "hunter2-s3cr3t"),
        ("Password was " + "Tr0ub4dor&3.", "Tr0ub4dor&3"),
        ("the api_key is now " + "abc123XYZ789", "abc123XYZ789"),
    ],
)
def test_secret_stated_in_prose_is_redacted(text: str, secret: str) -> None:
    result = PrivacyFilter().clean(text)
    assert secret not in result.text
    assert result.counts == {"password_assignment": 1}


@pytest.mark.parametrize("text", ["the password is stored in the vault", "the token is expired", "pin is unknown"])
def test_prose_about_secrets_is_kept(text: str) -> None:
    assert PrivacyFilter().clean(text) == Redaction(text=text, counts={})


def _every_rule_runs(monkeypatch: pytest.MonkeyPatch) -> PrivacyFilter:
    """A filter whose rules all run on every text (the needle skip switched off)."""
    from mcp_memory import privacy

    plain = PrivacyFilter()
    monkeypatch.setattr(plain, "_rules", tuple(dataclasses.replace(r, needles=()) for r in plain._rules))
    assert all(isinstance(r, privacy._Rule) for r in plain._rules)
    return plain


@pytest.mark.parametrize(
    "text",
    [
        "PASSWORD=" + "Hunter2hunter2",
        "Api-Key: " + "k3yk3yk3yk3y",
        "ſecret = '" + "s3cr3t-value'",  # long s: matched as "s" case-insensitively
        "api_\u212aey=" + "abc123def456",  # Kelvin sign: matched as "k" case-insensitively
        "BEARER " + BEARER,
        "AUTHORIZATION: Basic " + BASIC,
        "aws_SECRET_access_KEY = " + AWS_SECRET,
        "export TOKEN=" + "t0k3nt0k3n",
        "--PassPhrase " + "correct-h0rse",
    ],
)
def test_skipping_rules_by_their_needles_changes_no_result(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _every_rule_runs(monkeypatch).clean(text)
    assert expected.counts  # each example really holds a secret
    assert F.clean(text) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=5), max_size=30).map("".join))
def test_needle_skip_agrees_with_running_every_rule(text: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        assert F.clean(text) == _every_rule_runs(patch).clean(text)


# A secret may hold any punctuation: the whole value is redacted, never just its first run of letters.
WHOLE_SECRETS = [
    ("DB password=" + "Xk9;vT2&qL7,mZ4" + " for prod", "Xk9;vT2&qL7,mZ4"),
    ("The wifi password is " + "Tr0ub4dor&3" + ".", "Tr0ub4dor&3"),
    ("api_key=" + "Zx81,Lm20", "Zx81,Lm20"),
    ("password=" + "Sup3rS3cret!", "Sup3rS3cret!"),
    ("PASSWORD=" + "abc123!!", "abc123!!"),
    ("the root password is " + "8Gh)k2]pQ}z", "8Gh)k2]pQ}z"),
]


def _fragments(secret: str) -> list[str]:
    """Every run of letters or digits in `secret`, and each of its symbols."""
    words = "".join(c if c.isalnum() else " " for c in secret).split()
    return words + [c for c in secret if not c.isalnum()]


@pytest.mark.parametrize(("text", "secret"), WHOLE_SECRETS)
def test_no_fragment_of_a_punctuated_secret_survives(text: str, secret: str) -> None:
    result = F.clean(text)
    leftover = result.text.replace("[REDACTED:password_assignment]", "")
    assert result.counts == {"password_assignment": 1}
    assert [f for f in _fragments(secret) if f in leftover] == []
    assert leftover == text.replace(secret, "")  # and nothing but the secret went


@pytest.mark.parametrize(("text", "secret"), WHOLE_SECRETS)
async def test_no_fragment_of_a_punctuated_secret_is_stored_or_found(client: Client, text: str, secret: str) -> None:
    observed = await call(client, "memory_observe", content=text)

    stored = (await call(client, "memory_smart_search", ids=[observed["id"]]))["observations"][0]
    leftover = stored["content"].replace("[REDACTED:password_assignment]", "")
    assert [f for f in _fragments(secret) if f in leftover] == []
    words = [f for f in _fragments(secret) if f.isalnum()]
    for query in (" ".join(words), *words):
        hits = (await call(client, "memory_recall", query=query))["hits"]
        assert [h["id"] for h in hits if any(w in h["snippet"] + h["title"] for w in words)] == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # `,` `;` `&` starting another key=value pair end the value: the other pairs are kept.
        ("Server=db;Password=P@ss9;Database=app", "Server=db;Password=[REDACTED:password_assignment];Database=app"),
        ("GET /x?token=abc&scope=read#top", "GET /x?token=[REDACTED:password_assignment]&scope=read#top"),
        # Closing punctuation goes with the value, except a full stop ending a sentence.
        ("connect(password=pa55, host=h)", "connect(password=[REDACTED:password_assignment] host=h)"),
        ("password: `hunter2`", "password: [REDACTED:password_assignment]"),
        ("the password is: Hunter2!x", "the password is: [REDACTED:password_assignment]"),
        ("the pin password is 1234.", "the pin password is [REDACTED:password_assignment]."),
    ],
)
def test_unquoted_value_is_redacted_to_its_natural_end(text: str, expected: str) -> None:
    assert F.clean(text).text == expected


@pytest.mark.parametrize(
    "text",
    [
        "the password is stored in vault, ask ops",
        "the password is 12 characters long",
        "the password is (see vault)",
        "the token is expired.",
        "f(token=self.token, x)",
    ],
)
def test_prose_and_code_around_a_secret_keyword_stay_whole(text: str) -> None:
    assert F.clean(text) == Redaction(text, {})
