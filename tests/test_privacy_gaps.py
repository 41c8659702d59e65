"""Secret shapes the privacy filter once missed: command-line passwords, YAML lists and blocks, HTML
inputs, tokens disguised in fullwidth or split by invisible characters, and more provider formats;
with the look-alikes that must stay exactly as they are.

As in test_privacy.py, every fake secret is built by concatenation so that no complete token
pattern appears in this file for secret scanners to flag.
"""

from __future__ import annotations

import dataclasses
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_memory.privacy import PrivacyFilter, Redaction

F = PrivacyFilter()
PW = "password_assignment"

OPENAI = "sk" + "-" + "T3BlbkFJ" * 6
GITHUB = "ghp" + "_" + "A1b2" * 9
ZWSP, ZWNJ, ZWJ, WJ, BOM = "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"


def fullwidth(text: str) -> str:
    """`text` typed with an East Asian input method: each printable ASCII character in its fullwidth form."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def stays_clean(result: Redaction) -> None:
    assert F.clean(result.text) == Redaction(result.text, {})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("docker login -p " + "S3cretPw" + " reg.io", "docker login -p [REDACTED:password_assignment] reg.io"),
        (
            "docker login -u bob -p '" + "S3c ret" + "' reg.io",
            "docker login -u bob -p '[REDACTED:password_assignment]' reg.io",
        ),
        ("podman login -p" + "S3cretPw" + " quay.io", "podman login -p[REDACTED:password_assignment] quay.io"),
        ("helm registry login -p " + "S3cretPw" + " x", "helm registry login -p [REDACTED:password_assignment] x"),
        ("az login -u bob -p " + "S3cretPw", "az login -u bob -p [REDACTED:password_assignment]"),
        ("mongosh -u admin -p " + "S3cretPw" + " db", "mongosh -u admin -p [REDACTED:password_assignment] db"),
        ("ldapsearch -x -D cn=a -w " + "S3cretPw", "ldapsearch -x -D cn=a -w [REDACTED:password_assignment]"),
        (
            "openssl pkcs12 -passout pass:" + "S3cretPw" + " -out a.p12",
            "openssl pkcs12 -passout pass:[REDACTED:password_assignment] -out a.p12",
        ),
        ("keytool -list -storepass " + "S3cretPw", "keytool -list -storepass [REDACTED:password_assignment]"),
    ],
)
def test_a_password_given_to_a_command_line_flag_is_redacted(text: str, expected: str) -> None:
    result = F.clean(text)
    assert result == Redaction(expected, {PW: 1})
    stays_clean(result)


def test_the_cli_forms_handled_before_still_are() -> None:
    text = "docker login --password=" + "S3cretPw" + " && mysql -p" + "S3cretPw" + " && curl -u a:" + "b4dPw"
    assert F.clean(text) == Redaction(
        "docker login --password=[REDACTED:password_assignment] && mysql -p[REDACTED:password_assignment]"
        " && curl -u a:[REDACTED:basic_auth]",
        {PW: 2, "basic_auth": 1},
    )


@pytest.mark.parametrize(
    "text",
    [
        "docker run -p 8080:80 img",
        "docker login reg.io",
        "docker login -u bob --password-stdin < pw.txt",
        'docker login -u bob -p "$REGISTRY_PASSWORD" reg.io',
        "docker login -p $CI_JOB_TOKEN reg.io",
        "podman run -p 5432:5432 postgres",
        "mongosh --port 27017",
        "ldapsearch -x -W -D cn=admin",
        "openssl enc -aes256 -pass env:PASSWORD -in x",
        "keytool -list -storepass:env STOREPASS",
        "git log --oneline -p",
        # `$PWD` is the working directory: this mount was once redacted as a password.
        "docker run -v $PWD:/app -w ${PWD} img",
    ],
)
def test_command_lines_without_a_literal_password_are_left_alone(text: str) -> None:
    assert F.clean(text) == Redaction(text, {})


def test_each_item_of_a_yaml_list_under_a_secret_named_key_is_redacted() -> None:
    text = "api_keys:\n  - " + OPENAI + "\n  - another-secret-value\n  - 'Xk9vT2qL7'  # staging\nname: app\n"
    result = F.clean(text)
    assert result == Redaction(
        "api_keys:\n  - [REDACTED:openai_key]\n  - [REDACTED:password_assignment]\n"
        "  - '[REDACTED:password_assignment]'  # staging\nname: app\n",
        {"openai_key": 1, PW: 2},
    )
    stays_clean(result)


def test_a_yaml_list_at_the_keys_own_indent_is_redacted_and_ends_at_the_next_key() -> None:
    text = "db:\n  passwords:\n  - " + "hunter2" + "\n  - " + "Zx81Lm20" + "\n  host: db.internal\n"
    assert F.clean(text) == Redaction(
        "db:\n  passwords:\n  - [REDACTED:password_assignment]\n  - [REDACTED:password_assignment]\n"
        "  host: db.internal\n",
        {PW: 2},
    )


@pytest.mark.parametrize("indicator", ["|", "|-", ">", ">+", "|2"])
def test_a_yaml_block_scalar_under_a_secret_named_key_is_redacted_whole(indicator: str) -> None:
    text = f"db:\n  password: {indicator}\n    " + "c0rrect h0rse" + "\n    " + "battery st4ple" + "\n  user: app\n"
    result = F.clean(text)
    assert result == Redaction(
        f"db:\n  password: {indicator}\n    [REDACTED:password_assignment]\n  user: app\n", {PW: 1}
    )
    stays_clean(result)


def test_a_yaml_plain_scalar_on_the_next_line_is_redacted() -> None:
    text = "secret_key:\n  " + "9f8e7d6c5b4a3928" + "\nport: 80\n"
    assert F.clean(text) == Redaction("secret_key:\n  [REDACTED:password_assignment]\nport: 80\n", {PW: 1})


def test_a_yaml_block_header_alone_is_no_longer_taken_for_the_password() -> None:
    # The filter once redacted the `|` and kept the password on the next line.
    assert F.clean("password: |\n") == Redaction("password: |\n", {})


def test_a_list_of_keys_in_json_or_flow_yaml_is_redacted_item_by_item() -> None:
    text = '{"api_keys": ["' + "abc123def456" + '", "' + "Zx81-Lm20-Qp99" + '"], "tokens": ["<pad>", "<eos>"]}'
    result = F.clean(text)
    assert result == Redaction(
        '{"api_keys": ["[REDACTED:password_assignment]", "[REDACTED:password_assignment]"],'
        ' "tokens": ["<pad>", "<eos>"]}',
        {PW: 2},
    )
    stays_clean(result)
    assert F.clean("api_key: [" + "abc123" + ", " + "def456" + "]") == Redaction(
        "api_key: [[REDACTED:password_assignment], [REDACTED:password_assignment]]", {PW: 2}
    )


@pytest.mark.parametrize(
    "text",
    [
        # docker-compose's `secrets:` names secrets kept elsewhere.
        "services:\n  web:\n    secrets:\n      - db_password\n      - api_token\n",
        "secrets:\n  db_password:\n    file: ./db_password.txt\n",
        # Nested mappings, placeholders, words and counts under secret-named keys.
        "passwords:\n  min_length: 12\n  require_digit: true\n",
        "api_keys:\n  - ${OPENAI_API_KEY}\n  - <your-key>\n",
        "tokens:\n  - IDENT\n  - NUMBER\n  - 42\n",
        "special_tokens:\n  - '<pad>'\n  - '<eos>'\n",
        "api_keys:\n  - name: openai\n    env: OPENAI_API_KEY\n",
        "password:\n  # set in vault\n",
        "token:\n  [a, b]\n",
        # Block scalars and lists under other keys.
        "script: |\n  export TOKEN=$(cat /run/token)\n  make deploy\n",
        "steps:\n  - run: make test\n  - name: token check\n",
        "def check(password: str) -> bool:\n    return len(password) > 8\n",
        "Key points:\n- tokens expire after 1 hour\n- passwords are hashed\n",
    ],
)
def test_yaml_and_code_look_alikes_are_left_exactly_as_they_are(text: str) -> None:
    assert F.clean(text) == Redaction(text, {})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '<input type="password" value="' + "hunter2" + '">',
            '<input type="password" value="[REDACTED:password_assignment]">',
        ),
        (
            "<INPUT value='" + "hunter2" + "' name=pw TYPE=Password>",
            "<INPUT value='[REDACTED:password_assignment]' name=pw TYPE=Password>",
        ),
        (
            '<input name="api_key" value="' + "abc123def456" + '" />',
            '<input name="api_key" value="[REDACTED:password_assignment]" />',
        ),
        (
            '<input type="hidden" name="csrf_token" value=' + "Zx81Lm20Qp99" + ">",
            '<input type="hidden" name="csrf_token" value=[REDACTED:password_assignment]>',
        ),
        (
            '<input autocomplete="current-password" value="' + "S3cretPw" + '">',
            '<input autocomplete="current-password" value="[REDACTED:password_assignment]">',
        ),
    ],
)
def test_the_value_of_a_password_or_key_input_is_redacted(text: str, expected: str) -> None:
    result = F.clean(text)
    assert result == Redaction(expected, {PW: 1})
    stays_clean(result)


@pytest.mark.parametrize(
    "text",
    [
        '<input type="text" name="q" value="search terms">',
        '<input name="username" value="bob">',
        '<input type="password" name="pw" placeholder="Password">',
        '<input type="password" value="">',
        '<input type="password" value="{{ form.password }}">',
        "<input type='password' value={password} onChange={setPassword} />",
        '<input type="checkbox" name="remember_password" value="1">',
        '<input type="submit" name="reset_password" value="Reset password">',
        '<input name="token_count" value="5">',
    ],
)
def test_other_inputs_are_left_exactly_as_they_are(text: str) -> None:
    assert F.clean(text) == Redaction(text, {})


@pytest.mark.parametrize(
    ("disguised", "kind"),
    [
        (fullwidth(OPENAI), "openai_key"),
        (fullwidth("ghp_") + "A1b2" * 9, "github_token"),
        ("ghp_" + fullwidth("A1b2" * 9), "github_token"),
        ("ghp_" + ZWSP + "A1b2" * 9, "github_token"),
        ("gh" + ZWNJ + "p_" + "A1b2" * 9, "github_token"),
        ("ghp_" + ZWJ.join(["A1b2"] * 9), "github_token"),
        (WJ.join(OPENAI[i : i + 6] for i in range(0, len(OPENAI), 6)), "openai_key"),
        ("xo" + BOM + "xb-" + fullwidth("1234567890") + "-" + "AbCd" * 6, "slack_token"),
        ("".join(chr(0x1D5EE + ord(c) - ord("a")) if c.islower() else c for c in GITHUB), "github_token"),
    ],
)
def test_a_token_in_fullwidth_or_split_by_invisible_characters_is_redacted_whole(disguised: str, kind: str) -> None:
    text = f"メモ：本番の鍵は {disguised} です。"
    result = F.clean(text)
    assert result == Redaction(f"メモ：本番の鍵は [REDACTED:{kind}] です。", {kind: 1})
    stays_clean(result)


def test_invisible_characters_outside_a_token_are_kept() -> None:
    text = "a" + ZWSP + "b " + "ghp_" + ZWSP + "A1b2" * 9 + " c" + ZWJ + "d"
    assert F.clean(text) == Redaction("a" + ZWSP + "b [REDACTED:github_token] c" + ZWJ + "d", {"github_token": 1})


@pytest.mark.parametrize(
    "text",
    [
        "こんにちは、世界。ＡＢＣ１２３の件は来週。",
        "全角のＳＫ－ＬＥＡＲＮはライブラリです",
        fullwidth("sk-learn-is-a-library") + " と " + fullwidth("ghp_short"),
        "価格：１，２００円（税込）",
        "emoji 👨" + ZWJ + "👩" + ZWJ + "👧 family",
        "Ｐａｓｓｗｏｒｄ ｒｅｓｅｔ ｆｌｏｗ",
        "𝐁𝐨𝐥𝐝 𝐦𝐚𝐭𝐡 𝐭𝐞𝐱𝐭 𝟏𝟐𝟑",
        "soft" + "\u00ad" + "hyphen and zero" + ZWSP + "width in prose",
    ],
)
def test_ordinary_fullwidth_cjk_and_invisible_characters_are_left_alone(text: str) -> None:
    assert F.clean(text) == Redaction(text, {})


@pytest.mark.parametrize(
    ("kind", "secret"),
    [
        ("gitlab_token", "glp" + "tt-" + "0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b"),
        ("gitlab_token", "gl" + "rt-" + "Zx9Yw8" * 4),
        ("gitlab_token", "gl" + "dt-" + "Zx9Yw8" * 4),
        ("slack_token", "xo" + "xe-1-" + "My0xLTEtMTIz" * 4),
        ("slack_token", "xa" + "pp-1-A0123456789-" + "1234567890123-" + "a1b2c3" * 8),
        ("discord_webhook", "https://discord.com/api/" + "webhooks/123456789012345678/" + "Ab3_-x" * 11),
        ("digitalocean_token", "do" + "p_v1_" + "0a1b2c3d" * 8),
        ("groq_key", "gs" + "k_" + "A1b2C3d4" * 7),
        ("vault_token", "hv" + "s." + "CAESIJ3kd9x" * 4),
        ("age_secret_key", "AGE-SECRET-" + "KEY-1" + "QYZ2" * 14 + "QQ"),
        ("twilio_key", "S" + "K" + "0a1b2c3d" * 4),
        ("mailgun_key", "ke" + "y-" + "3f9a1c2e" * 4),
        ("atlassian_token", "ATA" + "TT3x" + "FfGF0" * 36 + "=A1B2C3D4"),
    ],
)
def test_more_provider_formats_are_redacted_under_their_kind(kind: str, secret: str) -> None:
    for text in (f"deploy used {secret} yesterday.", f'export X="{secret}"', f"key: {secret}"):
        result = F.clean(text)
        assert result == Redaction(text.replace(secret, f"[REDACTED:{kind}]"), {kind: 1})


@pytest.mark.parametrize(
    "text",
    [
        "gl" + "rt-short",
        "glptt-" + "x",
        "the xoxe- prefix marks a refresh token",
        "https://discord.com/api/webhooks/ is the endpoint",
        "dop_v1_ tokens are 64 hex digits",
        "gsk_" + "all_lower_case_snake_name_that_is_long_enough_here_x",
        "hvs.short",
        "use age-keygen to make an AGE-SECRET-KEY-1 line",
        "commit 3f9a1c2e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 fixes the pager",
        "TASK" + "0a1b2c3d" * 4,
        "SKU" + "0a1b2c3d" * 4,
        "monkey-" + "3f9a1c2e" * 4,
        "ATATT3 is how Atlassian tokens start",
    ],
)
def test_provider_look_alikes_are_left_exactly_as_they_are(text: str) -> None:
    assert F.clean(text) == Redaction(text, {})


def _every_rule_runs(monkeypatch: pytest.MonkeyPatch) -> PrivacyFilter:
    """A filter whose rules all run on every text (the needle skip switched off)."""
    plain = PrivacyFilter()
    monkeypatch.setattr(plain, "_rules", tuple(dataclasses.replace(r, needles=()) for r in plain._rules))
    return plain


def test_adversarial_yaml_and_disguises_clean_in_linear_time() -> None:
    # Reading the body of every nested key, or a run of token characters from each of its positions,
    # would be quadratic on these; linear cleaning takes well under a second for each.
    start = time.process_time()
    units = [
        "password:\n ",
        " password:\n",
        "api_keys:\n  - x",
        "password: |\n  a\n",
        "<input type=password value=x ",
        "ghp_" + ZWSP,
        "A" * 50 + ZWSP,
        "Ａ１",
        "x: [" + "a," * 20,
    ]
    for unit in units:
        F.clean(unit * (300_000 // len(unit)))
    assert time.process_time() - start < 15.0


# fmt: off
FRAGMENTS = [
    "password", "api_keys", "tokens", "secrets", ":", ": |", ": >-", "\n", "\n  ", "\n  - ", "- ", "  ", "#", "[", "]",
    ",", '"', "'", "<input ", 'type="password" ', "name=api_key ", "value=", ">", "docker login ", "-p ", "S3cretPw",
    "hunter2", ZWSP, ZWJ, BOM, "ｓｋ－", "Ｔ３Ｂｌ", "ghp_", "A1b2" * 9, OPENAI, "[REDACTED:x]", "こんにちは",
]
# fmt: on


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=4), max_size=30).map("".join))
def test_clean_is_idempotent_and_needle_skip_agrees_on_yaml_html_and_disguised_fragments(text: str) -> None:
    first = F.clean(text)
    assert F.clean(first.text) == Redaction(first.text, {})
    with pytest.MonkeyPatch.context() as patch:
        assert _every_rule_runs(patch).clean(text) == first
