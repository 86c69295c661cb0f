"""Each redaction pattern on its own: for every detector, a secret that it catches and no other
detector does, replaced by exactly its ``[REDACTED:<kind>]`` marker; with that one detector
left out, the secret stays. Likewise for the variants a pattern names besides its first
sample (GitHub's user-to-server and refresh tokens, ``passphrase`` keys, a password holding
``&`` or ``;``). Through the public ``redact``/``Redactor`` and through ``mem ingest``, after
which the store holds no trace of any of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from poimen_memory.ingest.redact import Redactor, find_secrets, redact
from poimen_memory.ingest.secret_rules import DETECTORS, Detector

from .gitrepo import CAROL, FixtureRepo

# kind -> (text around the secret, with {} where it goes; the secret). The secrets are put
# together from pieces so that no scanner mistakes this file for a leak.
_PEM = "\n".join(
    [
        "-----BEGIN OPENSSH " + "PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
        "QyNTUxOQAAACDm2hVqTq2sN0w8Y9rX1dJ5cLk7fE3aB6gH4iK0mP9qRw",
        "-----END OPENSSH " + "PRIVATE KEY-----",
    ]
)
_JWT = (
    "eyJ" + "hbGciOiJIUzI1NiJ9"
    ".eyJ" + "zdWIiOiJhbGljZSIsImV4cCI6MTc4NjAwMDAwMH0"
    ".dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"
)
_GOOGLE = "AIza" + "SyD3x7Kd9Qw2Lm4Np6Rs8Tv0Yb3Zc5Fg1Hj"
_PYPI = (
    "pypi-" + "AgEIcHlwaS5vcmc"
    "CJDk3ZTFhYjYyLWE0NWQtNGQ0Ni05ZmI2LTMwYmY3YjNlYjcxZAACKlszLCJkNGQxZjQ0Ny1mZjU0LTQ2"
    "MmYtYWI5Zi1kNzk1MTA0OTM1MWYiXQAABiDx7Kd9Qw2Lm4Np6Rs8Tv0Yb3Zc5Fg1Hj7Mk9W_Xy7Kd9Qw2L"
)
SAMPLES: dict[str, tuple[str, str]] = {
    "private-key": ("deploy key:\n{}\nkeep it safe", _PEM),
    "aws-access-key": ("the access key {} was rotated", "AKIA" + "Z7QK4M2XW9RT5HPL"),
    "github-token": ("cloned with {} yesterday", "ghp_" + "x7Kd9Qw2Lm4Np6Rs8Tv0Yb3Zc5Fg1Hj7Mk9W"),
    "gitlab-token": ("the runner used {} to push", "glpat-" + "Xy7Kd9Qw2Lm4Np6Rs8Tv"),
    "npm-token": ("published with {} from CI", "npm_" + "Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr9St1Uv3Wx5"),
    "pypi-token": ("uploaded the wheel with {} as the password", _PYPI),
    "dockerhub-token": ("docker login -u kong --password-stdin <<< {}",
                        "dckr_pat_" + "Xy7Kd9Qw2Lm4Np6Rs8Tv0Yb3Zc5"),
    "sendgrid-key": ("the mailer sends with {} in prod",
                     "SG." + "Xy7Kd9Qw2Lm4Np6Rs8Tv0Y" + ".Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr9St1Uv3Wx5Yz7Ab3C"),
    "huggingface-token": ("pulled the model with {} today", "hf_" + "Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr9St1Uv3W"),
    "anthropic-key": ("the agent ran with {} set", "sk-ant-" + "api03-Xy7Kd9Qw2Lm4Np6Rs8Tv0Yb3Zc"),
    # The marker replaces what follows "sk-": the prefix alone says nothing.
    "openai-key": ("the script ran with sk-{} set", "proj-" + "Xy7Kd9Qw2Lm4Np6Rs8Tv0Yb3Zc"),
    "stripe-key": ("charged the card with {} in staging", "sk_" + "test_4eC39HqLyjWDarjtT1zdp7dc"),
    "slack-token": ("the bot posts with {} to #ops", "xoxb-" + "2048123456-4096123456-Ab3Cd5Ef7Gh9"),
    "google-api-key": ("the maps widget loads with {} now", _GOOGLE),
    "azure-storage-key": (
        "DefaultEndpointsProtocol=https;AccountName=kongdata;AccountKey={};"
        "EndpointSuffix=core.windows.net",
        "Zm9vYmFyYmF6cXV4" * 5 + "dGVzdA==",
    ),
    "jwt": ("the session was {} until it expired", _JWT),
    "basic-auth": ("Authorization: Basic {}", "YWxpY2U6czNjcjN0LXBhc3M="),
    "bearer-token": (
        "curl -H 'Authorization: Bearer {}' https://api.example.test/v1",
        "tk4Rq9Zx2Lm7Np3Ws8Vb",
    ),
    "curl-password": ("curl -u deploy:{} https://ci.example.test/api", "hunter2hunter2"),
    "url-password": ("psql postgres://app:{}@db.internal:5432/app", "Zx9pQ2wLv7"),
    "assigned-password": ('db_password = "{}"', "Tr0ub4dor&3horse"),
    "assigned-secret": ('client_secret = "{}"', "9f8e7d6c5b4a3210fedcba98"),
}  # fmt: skip
KINDS = [d.kind for d in DETECTORS]
# More of what a pattern covers, each caught by its own detector alone: name -> (kind, text
# around the secret, the secret). Random and fake, put together from pieces as above.
VARIANTS: dict[str, tuple[str, str, str]] = {
    "github-user-to-server-token": ("github-token", "the app acted for the user with {} until noon",
                                    "ghu_" + "E6CQCoYi791M3DZD10MFZlVpGOOhjasnr2FC"),
    "github-refresh-token": ("github-token", "the app renewed its grant with {} at 14:00",
                             "ghr_" + "ZgqiJrbMKqGgXG4LsM5jb4KMP33O3iPMPmTS"),
    "passphrase-quoted": ("assigned-password", 'gpg_passphrase = "{}"', "Vq8!mZ2r k7Lp"),
    # The whole value, "&" and what follows it included (it once kept "&3").
    "passphrase-env-ampersand": ("assigned-password", "SSH_PASSPHRASE={}", "Tr0ub4dor&3"),
    "passphrase-yaml-ampersand-semicolon": ("assigned-password", "ssh_passphrase: {}", "Wq7&zT3;kP9"),
}  # fmt: skip
# Every case: (kind, text around the secret, the secret), by name.
CASES: dict[str, tuple[str, str, str]] = {
    **{kind: (kind, *SAMPLES[kind]) for kind in KINDS},
    **VARIANTS,
}


def sample(name: str) -> tuple[str, str, str]:
    """(text, secret, the text as redacted) of the case ``name`` (a kind: its sample)."""
    kind, around, secret = CASES[name]
    return around.format(secret), secret, around.format(f"[REDACTED:{kind}]")


def detector(kind: str) -> Detector:
    return next(d for d in DETECTORS if d.kind == kind)


def all_but(kind: str) -> tuple[Detector, ...]:
    return tuple(d for d in DETECTORS if d.kind != kind)


def test_every_detector_has_a_sample() -> None:
    assert sorted(SAMPLES) == sorted(KINDS)
    assert len(KINDS) == len(set(KINDS))
    assert {kind for kind, _, _ in VARIANTS.values()} <= set(KINDS)


@pytest.mark.parametrize("name", CASES)
def test_each_sample_is_replaced_by_its_own_marker(name: str) -> None:
    kind = CASES[name][0]
    text, secret, expected = sample(name)
    assert redact(text) == expected
    assert secret not in redact(text)
    redactor = Redactor()
    assert redactor(text) == expected
    assert redactor.counts == {kind: 1}


@pytest.mark.parametrize("name", CASES)
def test_each_sample_is_found_by_its_detector_and_by_no_other(name: str) -> None:
    kind = CASES[name][0]
    text, secret, _ = sample(name)
    [found] = find_secrets(text, (detector(kind),))
    assert (found.kind, text[found.start : found.end]) == (kind, secret)
    others = {d.kind: find_secrets(text, (d,)) for d in all_but(kind)}
    assert {k: f for k, f in others.items() if f} == {}


@pytest.mark.parametrize("name", CASES)
def test_the_one_pass_finds_a_candidate_wherever_a_detector_does(name: str) -> None:
    """Text the combined pattern finds nothing in is not given to the detectors: it must
    find something in every sample, escaped too, and where a detector's pattern does."""
    from poimen_memory.ingest.secret_rules import ANY_CANDIDATE

    assert ANY_CANDIDATE is not None, "the detectors' patterns no longer combine"
    text, _, _ = sample(name)
    for form in (text, json.dumps(text)[1:-1], json.dumps(json.dumps(text))[1:-1]):
        data = form.encode("latin-1", "replace")
        if any(d.pattern.search(data) for d in DETECTORS):
            assert ANY_CANDIDATE.search(data) is not None, (name, form)
    assert ANY_CANDIDATE.search(text.encode("latin-1", "replace")) is not None
    assert ANY_CANDIDATE.search(b"an ordinary sentence about buffers, 16 MB of them") is None


@pytest.mark.parametrize("name", CASES)
def test_leaving_out_one_detector_leaves_its_sample_unredacted(name: str) -> None:
    text, _, _ = sample(name)
    redactor = Redactor(detectors=all_but(CASES[name][0]))
    assert redactor(text) == text
    assert redactor.counts == {}


@pytest.mark.parametrize(
    "around",
    [
        "https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key={}",
        '<script src="https://maps.googleapis.com/maps/api/js?key={}&callback=init"></script>',
        "export MAPS={}",
        "the key {} leaked",
    ],
)
def test_a_google_api_key_is_redacted_wherever_it_appears(around: str) -> None:
    text = around.format(_GOOGLE)
    assert redact(text) == around.format("[REDACTED:google-api-key]")
    # Only the Google pattern knows it: without that pattern, it stays.
    assert _GOOGLE in Redactor(detectors=all_but("google-api-key"))(text)


@pytest.mark.parametrize(
    "around",
    [
        "Cookie: session={}; Path=/; HttpOnly",
        '{{"session": "{}", "user": "alice"}}',
        "decoded {} fine",
        "{}",
    ],
)
def test_a_bare_jwt_is_redacted_wherever_it_appears(around: str) -> None:
    text = around.format(_JWT)
    assert redact(text) == around.format("[REDACTED:jwt]")
    assert _JWT in Redactor(detectors=all_but("jwt"))(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('the secret: client_secret = "9f8e7d6c5b4a3210fedcba98"',
         'the secret: client_secret = "[REDACTED:assigned-secret]"'),
        ("secret: $deploy_token = ab12cd34ef56gh78",
         "secret: $deploy_token = [REDACTED:assigned-secret]"),
        ("MY_SECRET=$API_TOKEN=ab12cd34ef56gh78", "MY_SECRET=$API_TOKEN=[REDACTED:assigned-secret]"),
        ("password: $db_password=hunter2x9", "password: $db_password=[REDACTED:assigned-password]"),
    ],
)  # fmt: skip
def test_a_key_read_as_another_keys_value_is_still_a_key(text: str, expected: str) -> None:
    # The first key's candidate takes the second key as its value and is turned down (a
    # name or a placeholder is no secret); the second assignment is found all the same.
    assert redact(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("SSH_PASSPHRASE=Tr0ub4dor&3", "SSH_PASSPHRASE=[REDACTED:assigned-password]"),
        ("SSH_PASSPHRASE=Tr0ub4dor&3 ssh-add key", "SSH_PASSPHRASE=[REDACTED:assigned-password] ssh-add key"),
        ("DB_PASSWORD=c0rrect;h0rse&x", "DB_PASSWORD=[REDACTED:assigned-password]"),
        ("spring.datasource.password=ldv&39;DTV", "spring.datasource.password=[REDACTED:assigned-password]"),
        # A quote ends the value, as it ends an unquoted one in a shell; a quoted value is whole.
        ('SSH_PASSPHRASE="Tr0ub4dor&3 x;y"', 'SSH_PASSPHRASE="[REDACTED:assigned-password]"'),
        ("echo 'PGPASSWORD=Tr0ub4dor&3' >> .env", "echo 'PGPASSWORD=[REDACTED:assigned-password]' >> .env"),
        # The "&" or ";" that ends a statement is not the value's, nor the key that follows it.
        ("export DB_PASSWORD=s3cr3t&9; make", "export DB_PASSWORD=[REDACTED:assigned-password]; make"),
        ("/login?password=s3cr3t9&user=bob", "/login?password=[REDACTED:assigned-password]&user=bob"),
        ("Server=db;Password=Xy9pQ2wL&7;Database=app",
         "Server=db;Password=[REDACTED:assigned-password];Database=app"),
        ("?password=s3cr3t1&password=0th&r2",
         "?password=[REDACTED:assigned-password]&password=[REDACTED:assigned-password]"),
        ("?access_token=ab12cd34ef56&state=xyz",
         "?access_token=[REDACTED:assigned-secret]&state=xyz"),
        # Code stays code.
        ("password = pw;", "password = pw;"),
        ("token = self.token;", "token = self.token;"),
        ("url = f'?password={pw}&user={user}'", "url = f'?password={pw}&user={user}'"),
    ],
)  # fmt: skip
def test_a_password_holding_ampersand_or_semicolon_is_redacted_whole(
    text: str, expected: str
) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected  # and redacting again changes nothing


@pytest.mark.parametrize(
    "unit", ["pass=a1&", "PASSWORD=x9&", "token=abc;", "password=&", "pass=a;DB_PASS=", ";&"]
)
def test_values_with_ampersands_and_semicolons_are_read_in_linear_time(unit: str) -> None:
    text = (unit * (400_000 // len(unit) + 1))[:400_000]

    def cpu(sample: str) -> float:
        best = float("inf")
        for _ in range(2):
            start = time.process_time()
            Redactor()(sample)
            best = min(best, time.process_time() - start)
        return best

    whole, eighth = cpu(text), cpu(text[: len(text) // 8])
    # 8 times the input, about 8 times the time (quadratic would be 64); tiny times are noise.
    assert whole < 0.1 or whole < 20 * eighth, f"{unit}: {whole:.2f} s vs {eighth:.2f} s"
    assert whole < 3.0, f"{unit}: {whole:.2f} s for 400 kB"


# -- mem ingest: never stored ------------------------------------------------------------------


def test_mem_ingest_stores_every_sample_redacted(tmp_path: Path, store_dsn: str) -> None:
    repo = FixtureRepo.create(tmp_path / "repo")
    repo.write("README.md", "secrets\n")
    repo.commit("initial", "Initial commit", CAROL)
    project = f"redact-{uuid.uuid4().hex[:8]}"
    rows = [
        {"type": "node", "id": name, "level": "L0", "query_id": f"q-{name}",
         "text": f"Evidence {n}: {sample(name)[0]}", "created_at": "2026-08-20T07:00:00Z"}
        for n, name in enumerate(CASES)
    ]  # fmt: skip
    source = tmp_path / "secrets.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "POIMEN_CONFIG": str(tmp_path / "no-config.toml")}
    for name in ("POIMEN_DSN", "POIMEN_PROJECT"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "poimen_memory.cli", "--dsn", store_dsn, "ingest", str(source),
         "--repo", str(repo.root), "--project", project, "--json"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["redacted"] == Counter(kind for kind, _, _ in CASES.values())
    with psycopg.connect(store_dsn) as conn:
        stored = [
            text
            for (text,) in conn.execute(
                "SELECT text FROM memory_node WHERE project = %s", (project,)
            ).fetchall()
        ]
    assert sorted(stored) == sorted(f"Evidence {n}: {sample(k)[2]}" for n, k in enumerate(CASES))
    everything = "\n".join(stored)
    for name, (_, _, secret) in CASES.items():
        assert secret not in everything, name
    # Nothing of a password after its "&" or ";" either.
    for piece in ("&3", "Tr0ub4dor", "&zT3", ";kP9", "Wq7"):
        assert piece not in everything, piece
