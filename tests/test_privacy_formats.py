"""Secret formats the privacy filter once let through, and the look-alikes it must still leave alone.

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

HUGGINGFACE = "hf" + "_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"
NPM = "npm" + "_" + "a1B2c3D4e5F6g7H8i9J0" + "k1L2m3N4o5P6q7R8"
PYPI = "pypi" + "-AgEIcHlwaS5vcmc" + "CJGE4ZjY3ZmI2LTVkNTgtNDg0Ni1hMWQ3LTk1NjE2YTZlNTk0ZQACKlszLCJmZjQ4"
PYPI_TEST = "pypi" + "-AgENdGVzdC5weXBpLm9yZw" + "IkNmMxYjA2ZjUtNjg0Ny00ZWQ3LWE3ZmEtNjk0ZDRhMTEwYzQ5"
SENDGRID = "SG" + "." + "aBcDeFgHiJkLmNoPqRsTuV" + "." + "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789_-abcde"
GOOGLE_OAUTH = "ya29" + "." + "a0AfH6SMBxyz123"
GOOGLE_OAUTH_LONG = "ya29" + "." + "a0AfB_byC" + "Xk9-Lm2Qp7Rt" * 12
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    ("text", "expected", "kind"),
    [
        # A Redis URL carries its password with an empty user name.
        (
            "redis://:" + "S3cr3tpassW0rd" + "@localhost:6379",
            "redis://:[REDACTED:url_password]@localhost:6379",
            "url_password",
        ),
        (
            "REDIS_URL=rediss://:" + "p4ss-w0rd" + "@cache:6380/0",
            "REDIS_URL=rediss://:[REDACTED:url_password]@cache:6380/0",
            "url_password",
        ),
        # `…_PASS` names a password as surely as `…_PASSWORD`.
        ("DB_PASS=" + "S3cret99x", "DB_PASS=[REDACTED:password_assignment]", "password_assignment"),
        ("SMTP_PASS=" + "S3cret99x", "SMTP_PASS=[REDACTED:password_assignment]", "password_assignment"),
        ("MYSQL_PASS=" + "S3cret99x", "MYSQL_PASS=[REDACTED:password_assignment]", "password_assignment"),
        ("DB_PASS=" + "hunter", "DB_PASS=[REDACTED:password_assignment]", "password_assignment"),
        ("smtp_pass: " + "S3cret99x", "smtp_pass: [REDACTED:password_assignment]", "password_assignment"),
        ('{"db_pass": "' + "hunter" + '"}', '{"db_pass": "[REDACTED:password_assignment]"}', "password_assignment"),
        ("app --db-pass " + "hunter", "app --db-pass [REDACTED:password_assignment]", "password_assignment"),
        ("app --pass " + "S3cretPw", "app --pass [REDACTED:password_assignment]", "password_assignment"),
        ("the DB_PASS is " + "S3cret99x", "the DB_PASS is [REDACTED:password_assignment]", "password_assignment"),
        # "API key" written as two words, in prose or as a label.
        (
            "The API key is " + "AbCdEf123456",
            "The API key is [REDACTED:password_assignment]",
            "password_assignment",
        ),
        ("API key: " + "12345678", "API key: [REDACTED:password_assignment]", "password_assignment"),
        ("secret key = '" + "hunter" + "'", "secret key = '[REDACTED:password_assignment]'", "password_assignment"),
        (
            "Access key: " + "Zx81-Lm20-Qp99",
            "Access key: [REDACTED:password_assignment]",
            "password_assignment",
        ),
        # Rails' SECRET_KEY_BASE.
        (
            "SECRET_KEY_BASE=" + "9f8e7d6c5b4a3928" * 8,
            "SECRET_KEY_BASE=[REDACTED:password_assignment]",
            "password_assignment",
        ),
        (
            "secret_key_base: " + "9f8e7d6c5b4a3928" * 8,
            "secret_key_base: [REDACTED:password_assignment]",
            "password_assignment",
        ),
        # curl's user:password (basic auth); the user is kept, as in a URL.
        (
            "curl -u admin:" + "hunter2" + " https://api.example.com/x",
            "curl -u admin:[REDACTED:basic_auth] https://api.example.com/x",
            "basic_auth",
        ),
        ("curl -uadmin:" + "hunter2", "curl -uadmin:[REDACTED:basic_auth]", "basic_auth"),
        ("curl -sSu admin:" + "admin" + " https://x", "curl -sSu admin:[REDACTED:basic_auth] https://x", "basic_auth"),
        (
            "curl --user 'admin:" + "p@ss w0rd" + "' https://x",
            "curl --user 'admin:[REDACTED:basic_auth]' https://x",
            "basic_auth",
        ),
        (
            'curl -X POST -U "proxy:' + "Pr0xyPw" + '" https://x',
            'curl -X POST -U "proxy:[REDACTED:basic_auth]" https://x',
            "basic_auth",
        ),
        (
            "curl 'https://x/api?a=1&b=2' \\\n  -H 'Accept: text/plain' \\\n  -u bob:" + "Zz9zz",
            "curl 'https://x/api?a=1&b=2' \\\n  -H 'Accept: text/plain' \\\n  -u bob:[REDACTED:basic_auth]",
            "basic_auth",
        ),
        (
            '/usr/bin/curl -H "User-Agent: libcurl" -u bob:' + "Zz9zz" + " https://y",
            '/usr/bin/curl -H "User-Agent: libcurl" -u bob:[REDACTED:basic_auth] https://y',
            "basic_auth",
        ),
        # MySQL and MariaDB clients take the password glued to -p; sshpass and redis-cli after a space.
        ("mysql -p" + "S3cretPass", "mysql -p[REDACTED:password_assignment]", "password_assignment"),
        (
            "mysqldump -uroot -p" + "S3cret" + " app > app.sql",
            "mysqldump -uroot -p[REDACTED:password_assignment] app > app.sql",
            "password_assignment",
        ),
        (
            "mariadb -h db -u app -p'" + "S3c ret" + "' app",
            "mariadb -h db -u app -p'[REDACTED:password_assignment]' app",
            "password_assignment",
        ),
        (
            "sshpass -p " + "S3cret" + " ssh root@host",
            "sshpass -p [REDACTED:password_assignment] ssh root@host",
            "password_assignment",
        ),
        (
            "redis-cli -h cache -a " + "S3cretPw" + " --no-auth-warning ping",
            "redis-cli -h cache -a [REDACTED:password_assignment] --no-auth-warning ping",
            "password_assignment",
        ),
        # Samba's clients take `user%password` after -U or --user.
        (
            "smbclient //files/share -U alice%" + "S3cretPw" + " -c ls",
            "smbclient //files/share -U alice%[REDACTED:password_assignment] -c ls",
            "password_assignment",
        ),
        (
            "smbclient //files/share --user='CORP\\alice%" + "S3c ret" + "'",
            "smbclient //files/share --user='CORP\\alice%[REDACTED:password_assignment]'",
            "password_assignment",
        ),
        (
            "net rpc shutdown -U admin%" + "Adm1nPw" + " -I 10.0.0.2",
            "net rpc shutdown -U admin%[REDACTED:password_assignment] -I 10.0.0.2",
            "password_assignment",
        ),
        # Apache's htpasswd takes the password last with -b: after the file and user, or the user alone with -n.
        (
            "htpasswd -bc /etc/nginx/.htpasswd admin " + "S3cretPw",
            "htpasswd -bc /etc/nginx/.htpasswd admin [REDACTED:password_assignment]",
            "password_assignment",
        ),
        (
            "htpasswd -nb admin '" + "S3c ret" + "' > users",
            "htpasswd -nb admin '[REDACTED:password_assignment]' > users",
            "password_assignment",
        ),
        (
            "htpasswd -B -C 12 -b users bob " + "Hunter22" + " && echo ok",
            "htpasswd -B -C 12 -b users bob [REDACTED:password_assignment] && echo ok",
            "password_assignment",
        ),
        # Windows' net use: the password after the share, or after /user:NAME.
        (
            "net use Z: \\\\files\\share " + "S3cretPw" + " /user:CORP\\alice",
            "net use Z: \\\\files\\share [REDACTED:password_assignment] /user:CORP\\alice",
            "password_assignment",
        ),
        (
            "NET USE \\\\files\\share /user:alice " + "S3cretPw" + " /persistent:no",
            "NET USE \\\\files\\share /user:alice [REDACTED:password_assignment] /persistent:no",
            "password_assignment",
        ),
        # A map under a secret-named key: its values are the secrets (JSON, YAML flow, HCL), the keys stay.
        (
            '{"api_key": {\n  "value": "' + "Zx9kLm2PwQ77" + '",\n  "kind": "bearer"\n}}',
            '{"api_key": {\n  "value": "[REDACTED:password_assignment]",\n  "kind": "bearer"\n}}',
            "password_assignment",
        ),
        (
            "password: {value: " + "Zx9kLm2PwQ77" + ", rotate: 30}",
            "password: {value: [REDACTED:password_assignment], rotate: 30}",
            "password_assignment",
        ),
        (
            'api_key = { value = "' + "Zx9kLm2PwQ77" + '" }',
            'api_key = { value = "[REDACTED:password_assignment]" }',
            "password_assignment",
        ),
        ("DB_PASS={" + "Xk9vT2pLq" + "}", "DB_PASS=[REDACTED:password_assignment]", "password_assignment"),
        # The AWS CLI sets a secret key with a space between name and value.
        (
            "aws configure set aws_secret_access_key " + AWS_SECRET,
            "aws configure set aws_secret_access_key [REDACTED:aws_secret_key]",
            "aws_secret_key",
        ),
        # Session cookies a header or curl sends or sets; attributes stay.
        (
            "< set-cookie: sessionid=" + "Xk9vT2qL7mZ4pR8" + "; expires=Thu, 01 Jan 2026; HttpOnly; Path=/",
            "< set-cookie: sessionid=[REDACTED:session_cookie]; expires=Thu, 01 Jan 2026; HttpOnly; Path=/",
            "session_cookie",
        ),
        (
            "curl -b 'JSESSIONID=" + "Xk9vT2qL7mZ4pR8" + "' https://x",
            "curl -b 'JSESSIONID=[REDACTED:session_cookie]' https://x",
            "session_cookie",
        ),
        # A secret assigned to a subscript: environment variables and config dicts set in code.
        (
            'os.environ["OPENAI_API_KEY"] = "' + "Zx9kLm2PwQ77abc" + '"',
            'os.environ["OPENAI_API_KEY"] = "[REDACTED:password_assignment]"',
            "password_assignment",
        ),
        (
            "settings['SECRET_KEY'] = '" + "Zx9kLm2PwQ77abc" + "'",
            "settings['SECRET_KEY'] = '[REDACTED:password_assignment]'",
            "password_assignment",
        ),
        # A Google OAuth access token is not a dotted code reference.
        ("access token: " + GOOGLE_OAUTH, "access token: [REDACTED:google_oauth_token]", "google_oauth_token"),
        # …and neither is any other dotted value with a random-looking part.
        ("token: " + "Ab3x.Zq9kLm2PwQ", "token: [REDACTED:password_assignment]", "password_assignment"),
        # An Azure connection string's key, and a Service Bus one's.
        (
            "AccountName=acct;AccountKey=" + "Zm9vYmFyYmF6cXV4MTIz" + "NDU2Nzg5MA==;EndpointSuffix=core.windows.net",
            "AccountName=acct;AccountKey=[REDACTED:password_assignment];EndpointSuffix=core.windows.net",
            "password_assignment",
        ),
        (
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKey=" + "q9Xw2LmPz" + "7Kd4Rt8Vb=",
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKey=[REDACTED:password_assignment]",
            "password_assignment",
        ),
        # A token under another scheme than Bearer, and a Stripe webhook signing secret.
        (
            "Authorization: Token " + "9f8e7d6c5b4a" + "392817069f8e",
            "Authorization: Token [REDACTED:bearer_token]",
            "bearer_token",
        ),
        (
            "authorization: Bot " + "MTk4NjIyNDgzNDcxOTI1MjQ4" + ".Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
            "authorization: Bot [REDACTED:bearer_token]",
            "bearer_token",
        ),
        (
            "STRIPE_WEBHOOK_SECRET " + "whsec" + "_MfKQ9r8GKYqrTwjUPD8ILPZIo2La",
            "STRIPE_WEBHOOK_SECRET [REDACTED:stripe_key]",
            "stripe_key",
        ),
    ],
)
def test_secret_once_missed_is_redacted_under_its_kind(text: str, expected: str, kind: str) -> None:
    result = F.clean(text)
    assert result == Redaction(expected, {kind: 1})
    assert F.clean(result.text) == Redaction(result.text, {})


@pytest.mark.parametrize(
    ("kind", "secret"),
    [
        ("huggingface_token", HUGGINGFACE),
        ("npm_token", NPM),
        ("pypi_token", PYPI),
        ("pypi_token", PYPI_TEST),
        ("sendgrid_key", SENDGRID),
        ("google_oauth_token", GOOGLE_OAUTH),
        ("google_oauth_token", GOOGLE_OAUTH_LONG),
    ],
)
def test_provider_token_is_redacted_whole_in_any_context(kind: str, secret: str) -> None:
    for text in (
        f"deploy used {secret} yesterday.",
        f'export TOKEN="{secret}"',
        f"password: {secret}",
        f"Authorization: Bearer {secret}",
        f"//registry.example.org/:_authToken={secret}",
    ):
        result = F.clean(text)
        assert result.text == text.replace(secret, f"[REDACTED:{kind}]")
        assert result.counts == {kind: 1}


@pytest.mark.parametrize(
    "text",
    [
        # Words and code around the new keywords.
        "password_hash",
        "pass the test",
        "all tests pass: 42 of 42",
        "first_pass = 1",
        "max_pass: 3",
        "two_pass=true",
        "bypass = 12",
        "compass: north",
        "DB_PASSPORT=123456789",
        "--pass-through --verbose",
        "--password-file /run/secrets/db",
        "--pass-file=/run/secrets/db",
        "DB_PASS=${DB_PASS}",
        "api key rotation policy",
        "API key: required for every call",
        "API key: 32 bytes",
        "the api key is stored in vault",
        "the secret key is 64 characters long",
        "Private key: ~/.ssh/id_ed25519",
        "token: see vault",
        "SECRET_KEY_BASE",
        "SECRET_KEY_BASE=",
        "secret_key_base = Rails.application.credentials.secret_key_base",
        "SECRET_KEY_BASE: ${SECRET_KEY_BASE}",
        # Dotted code references stay code references.
        "token = os.environ.get",
        "token: os.environ.get",
        "token = self.x509Cert",
        "access_token = creds.token",
        "api_key: settings.OPENAI_API_KEY",
        "token = aiplatform.v1beta1",
        # Command lines without a literal password.
        "mysql -p",
        "mysql -u root -p app",
        "mysql -u root -p$MYSQL_PWD app",
        'mysql -uroot -p"$MYSQL_ROOT_PASSWORD"',
        "mysql --port 3306 -h db",
        "mysql_config --cflags -pthread",
        'curl -u "$USER" https://x',
        'curl -u "$USER:$TOKEN" https://x',
        "curl -u ${USER}:${PASS} https://x",
        "curl -u admin https://x",
        "curl -u admin: https://x",
        "curl --negotiate -u : https://x",
        "curl --user-agent 'Mozilla/5.0 (X11: Linux)' https://x",
        "curl https://x | sudo -u www-data:www-data tee out",
        "curl https://x && docker run -u 1000:1000 img",
        "docker run -u 1000:1000 img",
        "sudo -u postgres psql -p 5432",
        "sshpass -f ~/.pw ssh host",
        'sshpass -p "$SSHPASS" ssh host',
        "redis-cli -a $REDIS_PASSWORD ping",
        "smbclient //files/share -U alice",
        "smbclient -L files -U guest%",
        "smbclient //files/share -U alice%$SMB_PASSWORD",
        "the net effect: 50% done with -U set",
        # Near misses of the provider formats.
        "hf_hub_download(repo_id='x', filename='config.json')",
        "hf_" + "abcdefghijklmnopqrstuvwxyzabcdefgh",
        "npm_config_registry=https://registry.npmjs.org",
        "npm_" + "package_version",
        "pypi-simple-index",
        "pip install --index-url https://pypi.org/simple x",
        "SG.send(message)",
        "msg.SG.abc",
        "ya29.short",
        "sqlite://:memory:",
        "tcp://:8080",
        "the account key rotation runbook",
        "accountKey: see vault",
        "Authorization: Token required",
        "whsec_ prefix marks a webhook secret",
        "[REDACTED:url_password] [REDACTED:basic_auth] stay as they are",
        # htpasswd without -b prompts: the last word is the user; net use with * prompts too.
        "htpasswd -c .htpasswd admin",
        "htpasswd -n bob",
        "htpasswd -D users bob",
        "net use Z: \\\\files\\share * /user:alice",
        "net use Z: \\\\files\\share /user:alice /persistent:yes",
        "net use Z: /delete",
        # A map of counts or words under a token-ish key holds no secret.
        '"token": {"input": 120, "output": 45}',
        "secret: {}",
        "api_key = {{ .Values.key }}",
        # Token ids, log probabilities and counts of an LLM's output; format strings naming the variable.
        'data: {"token": {"id": 1917, "text": " the", "logprob": -0.3, "special": false}}',
        '"tokens": [101, 7592, 2088, 102]',
        'print(f"password: {password}")',
        'f"token={self.token!r}"',
        # Cookies that identify no one, and a cookie jar's file.
        "Cookie: lang=en; theme=dark",
        "curl -b cookies.txt https://x",
        "the cookie: it was stale",
        # Subscripts read or compared, not assigned.
        'key = os.environ["API_KEY"]',
        'if cfg["token"] == "abc":',
        'os.environ["API_KEY"] = os.environ["FALLBACK_KEY"]',
    ],
)
def test_look_alikes_are_left_exactly_as_they_are(text: str) -> None:
    assert F.clean(text) == Redaction(text, {})


def test_a_document_of_new_formats_is_cleaned_once_and_stays_clean() -> None:
    doc = "\n".join(
        [
            "REDIS_URL=redis://:" + "S3cr3tpassW0rd" + "@localhost:6379",
            "SMTP_PASS=" + "S3cret99x",
            "The API key is " + "AbCdEf123456",
            "SECRET_KEY_BASE=" + "9f8e7d6c5b4a3928" * 8,
            "curl -u admin:" + "hunter2" + " https://x && mysql -p" + "S3cretPass",
            f"HF_TOKEN={HUGGINGFACE} NPM_TOKEN={NPM}",
            f"TWINE_PASSWORD={PYPI}",
            f"SENDGRID_API_KEY={SENDGRID}",
            f"access token: {GOOGLE_OAUTH}",
        ]
    )
    first = F.clean(doc)
    assert first.counts == {
        "url_password": 1,
        "password_assignment": 4,
        "basic_auth": 1,
        "huggingface_token": 1,
        "npm_token": 1,
        "pypi_token": 1,
        "sendgrid_key": 1,
        "google_oauth_token": 1,
    }
    for secret in ("S3cr3t", "S3cret99x", "AbCdEf", "9f8e7d", "hunter2", "S3cretPass", HUGGINGFACE, NPM, PYPI):
        assert secret not in first.text
    assert F.clean(first.text) == Redaction(first.text, {})


def _every_rule_runs(monkeypatch: pytest.MonkeyPatch) -> PrivacyFilter:
    """A filter whose rules all run on every text (the needle skip switched off)."""
    plain = PrivacyFilter()
    monkeypatch.setattr(plain, "_rules", tuple(dataclasses.replace(r, needles=()) for r in plain._rules))
    return plain


@pytest.mark.parametrize(
    "text",
    [
        "Curl -u a:b CURL -u c:d curl -u admin:" + "hunter2",
        "MySQL -pX mysql -p" + "S3cretPass",
        "REDIS-CLI -a x redis-cli -a " + "S3cretPw",
        "SSHPASS -p x sshpass -p " + "S3cret",
        "HF_TOKEN=" + HUGGINGFACE,
        "NPM " + NPM,
        "PYPI " + PYPI,
        "sg. " + SENDGRID,
        "YA29. " + GOOGLE_OAUTH,
        "Db_Pass=" + "S3cret99x",
        "Api Key: " + "12345678",
        "secret_KEY_base=" + "9f8e7d6c5b4a3928",
        "Net Use \\\\a\\b x NET USE \\\\files\\share " + "S3cretPw",
    ],
)
def test_skipping_rules_by_their_needles_changes_no_result(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _every_rule_runs(monkeypatch).clean(text)
    assert expected.counts  # each example really holds a secret
    assert F.clean(text) == expected


def test_adversarial_command_lines_clean_in_linear_time() -> None:
    # A command-line rule that rescanned the rest of the line from every command name would be
    # quadratic on these; linear cleaning takes well under a second for each.
    start = time.process_time()
    units = ["curl ", "curl -u ", "curl " + "x" * 60 + " ", "mysql -p", "curl \\\n", "curl &", "a_pass ", "api key "]
    units += ["htpasswd -b -c ", "net use \\\\a\\b /user:x "]
    for unit in units:
        F.clean(unit * (300_000 // len(unit)))
    F.clean(("api_key={k=v " + "y" * 3980 + "}\n") * 75)  # maps as long as a map is read, none a pair
    F.clean(("Cookie: " + "a" * 3990 + "\n") * 75)  # cookie headers as long as one is read, no pair in them
    assert time.process_time() - start < 10.0


# fmt: off
FRAGMENTS = [
    "curl", "mysql", "redis-cli", "sshpass", " ", " -u ", "-u", " -p", "-p", " -a ", "--user ", "\\\n", "\n", "|",
    "&&", "&", ";", ":", "=", "'", '"', "$USER", "admin", "hunter2", "://", "://:", "@", "_PASS", "_pass", "--pass",
    "DB", "API key", " is ", "SECRET_KEY_BASE", "ya29.", "a0AfH6SMBxyz123", "hf_", "npm_", "pypi-AgE", "SG.",
    "Ab1" * 12, "[REDACTED:basic_auth]", "[REDACTED:x]", HUGGINGFACE, SENDGRID, "htpasswd", " -nb ", " -b ", "net use",
    "NET USE", " \\\\srv\\share ", "/user:x ", " * ", "{", "}", '"value": ', " = ", '"]', "['", "token", "[",
    "Cookie: ", "curl -b ", "sid=",
]
# fmt: on


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=4), max_size=30).map("".join))
def test_clean_is_idempotent_and_needle_skip_agrees_on_command_like_fragments(text: str) -> None:
    first = F.clean(text)
    assert F.clean(first.text) == Redaction(first.text, {})
    with pytest.MonkeyPatch.context() as patch:
        assert _every_rule_runs(patch).clean(text) == first
