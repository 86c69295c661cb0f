"""The loopback HTTP server against web pages and hostile clients: DNS rebinding (foreign
``Host``), cross-site requests (``Origin``, ``Sec-Fetch-Site``, non-JSON bodies), the token on
every route but ``/health`` and limited to projects, bodies streamed and capped, half-sent
requests dropped. A real ``mem http`` on loopback, spoken to with httpx and raw sockets."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ..serving import free_port, mem_http
from .conftest import PROJECT, Faults

TOKEN = "t0ken-for-tests"
BY_GIT = {"file": "src/kong/buffer.rs", "line": 42}


def serving(faults: Faults, *args: str, host: str = "127.0.0.1") -> Any:
    """``mem http`` on a free loopback port with ``args``; yields its base URL."""
    args = ("--repo", str(faults.kong.root), "--project", PROJECT, *args)
    return mem_http(args, faults.env, faults.root / f"http-{uuid.uuid4().hex[:8]}.log", host)


@pytest.fixture(scope="module")
def base(faults: Faults) -> Iterator[str]:
    with serving(faults) as url:
        yield url


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _refused(response: httpx.Response, status: int, field: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["field"] == field, response.text
    assert response.json()["error"].startswith(f"{field}:"), response.text


# 6. DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends Host: evil.example.
def test_http_refuses_a_foreign_host_header(base: str) -> None:
    port = _port(base)
    for host in ("evil.example", f"evil.example:{port}", f"localhost:{port + 1}", "127.0.0.1"):
        _refused(httpx.get(f"{base}/health", headers={"Host": host}, timeout=10), 400, "host")
        r = httpx.post(f"{base}/memory/nodes/by-git", json=BY_GIT, headers={"Host": host})
        _refused(r, 400, "host")
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
        r = httpx.post(f"{base}/memory/nodes/by-git", json=BY_GIT, headers={"Host": host})
        assert r.status_code == 200, (host, r.text)


def test_http_on_ipv6_loopback_answers_to_its_own_name(faults: Faults) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        free_port("::1")
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    with serving(faults, host="::1") as url:
        port = _port(url)
        assert httpx.post(f"{url}/memory/nodes/by-git", json=BY_GIT).status_code == 200
        r = httpx.get(f"{url}/health", headers={"Host": f"rebound.example:{port}"})
        _refused(r, 400, "host")


# 6. CSRF: a form or fetch() with text/plain is a "simple" request: no preflight.
def test_http_refuses_post_bodies_that_are_not_json(base: str) -> None:
    url = f"{base}/memory/nodes/by-git"
    body = b'{"file": "src/kong/buffer.rs", "line": 42}'
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        r = httpx.post(url, content=body, headers={"Content-Type": content_type})
        _refused(r, 422, "body")
        assert "application/json" in r.json()["error"], r.text  # says what to send
    # fetch() with a Blob sends no Content-Type: still a request without a preflight.
    r = httpx.post(url, content=body)
    _refused(r, 422, "body")
    assert "application/json" in r.json()["error"], r.text
    for content_type in ("application/json", "application/json; charset=utf-8", "Application/JSON"):
        r = httpx.post(url, content=body, headers={"Content-Type": content_type})
        assert r.status_code == 200, (content_type, r.text)


def test_http_refuses_browser_origins_unless_allowed(faults: Faults, base: str) -> None:
    url = f"{base}/memory/nodes/by-git"
    for headers in (
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Origin": base},  # even a page served from this very address and port
        {"Sec-Fetch-Site": "cross-site"},  # a no-cors request: browsers omit Origin on GETs
    ):
        _refused(httpx.post(url, json=BY_GIT, headers=headers), 403, "origin")
        _refused(httpx.get(f"{base}/memory/query?query=buffer", headers=headers), 403, "origin")
    # A browser's own address bar (Sec-Fetch-Site: none) is the user, not a page.
    r = httpx.get(f"{base}/memory/query?query=buffer", headers={"Sec-Fetch-Site": "none"})
    assert r.status_code == 200, r.text

    app = "http://localhost:3000"
    with serving(faults, "--allow-origin", app) as allowed:
        url = f"{allowed}/memory/nodes/by-git"
        r = httpx.post(url, json=BY_GIT, headers={"Origin": app, "Sec-Fetch-Site": "same-site"})
        assert r.status_code == 200, r.text
        assert r.headers["access-control-allow-origin"] == app
        preflight = httpx.options(
            url,
            headers={
                "Origin": app,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type, authorization",
            },
        )
        assert preflight.status_code == 200, preflight.text
        assert preflight.headers["access-control-allow-origin"] == app
        _refused(
            httpx.post(url, json=BY_GIT, headers={"Origin": "https://evil.example"}), 403, "origin"
        )
    env = {**faults.env, "POIMEN_HTTP_ALLOW_ORIGINS": f"{app}, https://tools.example"}
    with serving(Faults(faults.root, faults.kong, faults.dsn, env)) as allowed:
        r = httpx.post(
            f"{allowed}/memory/nodes/by-git",
            json=BY_GIT,
            headers={"Origin": "https://tools.example"},
        )
        assert r.status_code == 200, r.text
    bad = faults.mem("http", "--allow-origin", "evil.example/path", "--port", str(free_port()))
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.count("\n") == 1
    assert "--allow-origin" in bad.stderr


# 6. The token: every route but /health; the scheme in any case; limited to projects.
def test_http_token_guards_every_route_but_health(faults: Faults) -> None:
    with serving(faults, "--token", TOKEN) as url:
        assert httpx.get(f"{url}/health").status_code == 200
        for path in ("/openapi.json", "/memory/query?query=buffer", "/nope", "/docs"):
            r = httpx.get(f"{url}{path}")
            _refused(r, 401, "authorization")
            assert r.headers["www-authenticate"].startswith("Bearer")
            r = httpx.get(f"{url}{path}", headers={"Authorization": "Bearer wrong"})
            _refused(r, 401, "authorization")
        for scheme in ("Bearer", "bearer", "BEARER", "BeArEr"):
            headers = {"Authorization": f"{scheme} {TOKEN}"}
            assert httpx.get(f"{url}/openapi.json", headers=headers).status_code == 200, scheme
            r = httpx.post(f"{url}/memory/nodes/by-git", json=BY_GIT, headers=headers)
            assert r.status_code == 200, (scheme, r.text)
        r = httpx.post(
            f"{url}/memory/nodes/by-git", json=BY_GIT, headers={"Authorization": f"Basic {TOKEN}"}
        )
        _refused(r, 401, "authorization")


def test_a_token_limited_to_projects_answers_403_for_others(faults: Faults) -> None:
    other = "other-project"
    with serving(
        faults, "--token", TOKEN, "--token-project", PROJECT, "--token-project", "spare"
    ) as url:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        r = httpx.post(
            f"{url}/memory/nodes/by-git", json={**BY_GIT, "project": other}, headers=auth
        )
        _refused(r, 403, "project")
        r = httpx.get(
            f"{url}/memory/query", params={"query": "buffer", "project": other}, headers=auth
        )
        _refused(r, 403, "project")
        r = httpx.post(
            f"{url}/memory/nodes/by-author",
            json={"author": "alice@org.test", "project": other},
            headers=auth,
        )
        _refused(r, 403, "project")
        # Its own project, named or the server's default, is served.
        r = httpx.post(
            f"{url}/memory/nodes/by-git", json={**BY_GIT, "project": PROJECT}, headers=auth
        )
        assert r.status_code == 200, r.text
        assert r.json()["nodes"]
        assert (
            httpx.post(f"{url}/memory/nodes/by-git", json=BY_GIT, headers=auth).status_code == 200
        )
    alone = faults.mem("http", "--token-project", PROJECT, "--port", str(free_port()))
    assert alone.returncode == 2, alone.stderr
    assert alone.stderr.count("\n") == 1
    assert "--token-project" in alone.stderr


@pytest.mark.parametrize(
    ("args", "env"),
    [(["--token", " "], {}), (["--token", ""], {}), ([], {"POIMEN_HTTP_TOKEN": " \t"}),
     (["--token", "two words"], {})],
)  # fmt: skip
def test_a_blank_token_is_refused(faults: Faults, args: list[str], env: dict[str, str]) -> None:
    try:
        done = faults.mem("http", "--port", str(free_port()), *args, env=env, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("mem http started with a blank token")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "token" in done.stderr.lower()


# Low: the body is streamed and capped; a half-sent request is dropped.
def _raw(url: str, head: str, timeout: float = 15) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", _port(url)), timeout=timeout)
    sock.sendall(head.encode())
    return sock


def _status(sock: socket.socket) -> tuple[int, bytes]:
    """The status of the answer and all that came before the server closed."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    assert received.startswith(b"HTTP/1.1 "), received[:200]
    return int(received.split()[1]), received


def _post_head(url: str, framing: str) -> str:
    return (
        f"POST /memory/nodes/by-git HTTP/1.1\r\nHost: 127.0.0.1:{_port(url)}\r\n"
        f"Content-Type: application/json\r\n{framing}\r\n\r\n"
    )


def test_http_refuses_a_huge_body_before_reading_it(base: str) -> None:
    started = time.monotonic()
    with _raw(base, _post_head(base, "Content-Length: 400000000")) as sock:
        status, answer = _status(sock)  # nothing of the body was sent
    assert status == 413, answer
    assert b'"field":"body"' in answer
    assert time.monotonic() - started < 5


def test_http_stops_reading_a_streamed_body_past_the_cap(base: str) -> None:
    started = time.monotonic()
    sent = 0
    with _raw(base, _post_head(base, "Transfer-Encoding: chunked")) as sock:
        chunk = b"x" * 16384
        try:
            while sent < 4 * 1024 * 1024:  # 4 MB offered; the cap is far below
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
                if sent >= 128 * 1024:
                    sock.settimeout(0.05)
                    try:
                        if sock.recv(1, socket.MSG_PEEK):
                            break  # the server answered
                    except TimeoutError:
                        pass
                    sock.settimeout(15)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed while we were still sending: what we want
        sock.settimeout(15)
        try:
            status, answer = _status(sock)
        except (AssertionError, ConnectionResetError):
            status, answer = 0, b""  # reset before its answer could be read
    assert sent < 4 * 1024 * 1024, "the server read 4 MB without answering"
    assert status in (0, 413), answer
    assert time.monotonic() - started < 10


def test_http_drops_a_half_sent_request(base: str) -> None:
    body = b'{"file": "src/kong/buffer.rs", "line": 42}'
    started = time.monotonic()
    with _raw(base, _post_head(base, f"Content-Length: {len(body)}")) as sock:
        sock.sendall(body[: len(body) // 2])
        status, answer = _status(sock)
    waited = time.monotonic() - started
    assert status == 408, answer
    assert waited < 10, waited
    # ...and it still serves.
    assert httpx.get(f"{base}/health").status_code == 200


def test_http_limit_must_be_ascii_digits(base: str) -> None:
    for limit in ("\u00b9", "\u0661", "1.0", "0", "101"):  # superscript one, Arabic-Indic one
        r = httpx.get(f"{base}/memory/query", params={"query": "buffer", "limit": limit})
        _refused(r, 422, "limit")
    assert (
        httpx.get(f"{base}/memory/query", params={"query": "buffer", "limit": "1"}).status_code
        == 200
    )


def test_openapi_documents_the_refusals(faults: Faults) -> None:
    with serving(faults) as url:
        spec = httpx.get(f"{url}/openapi.json").json()
    post = spec["paths"]["/memory/nodes/by-git"]["post"]["responses"]
    assert {"400", "401", "403", "408", "413", "422", "503"} <= set(post)
    get = spec["paths"]["/memory/query"]["get"]["responses"]
    assert {"400", "401", "403", "422"} <= set(get)


# 7. The language server over TCP: no authentication, so loopback only.
@pytest.mark.parametrize("host", ["0.0.0.0", "[::]", "::", "192.0.2.1", "example.invalid"])
def test_lsp_refuses_to_listen_beyond_loopback(faults: Faults, host: str) -> None:
    try:
        done = faults.mem("lsp", "--tcp", f"{host}:{free_port()}", timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"mem lsp served on {host}")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "--tcp" in done.stderr
    assert "reachable from other machines" in done.stderr


def test_lsp_listens_on_loopback(faults: Faults) -> None:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "poimen_memory.cli", "lsp", "--tcp", f"127.0.0.1:{port}"],
        env=faults.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        with sock:
            body = b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}'
            sock.sendall(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            received = b""
            while b'"id":1' not in received.replace(b" ", b""):
                chunk = sock.recv(65536)
                assert chunk, received
                received += chunk
        assert b"capabilities" in received
    finally:
        server.terminate()
        server.wait(10)
