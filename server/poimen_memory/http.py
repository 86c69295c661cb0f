"""The HTTP API (the seed's M3.5.9, and every other operation): a thin FastAPI adapter
generated from the operations table (``poimen_memory.operations``): a route per operation,
its request model as the body (GET: the query string), its response model as the answer;
OpenAPI is generated from them.

    POST /memory/nodes/by-git      ByGitRequest        (and by-commit, by-author)
    GET  /memory/query?query=...&project=...&git_repo=...&limit=...
    POST /memory/why, /memory/remember, /memory/blame, /memory/resolve-pending
    GET  /memory/status
    GET  /openapi.json             this API, described
    GET  /health                   {"status": "ok", "store": "ok"}

A failure answers its kind's status (``STATUS``: bad input 422, not found 404, store
unavailable 503, refused 403, internal 500) with ``{"error": "field: ...", "field": "..."}``.
Before a request reaches a route, ``Guard`` checks it, in this order: the ``Host`` header is
one the server answers to (400,
against DNS rebinding), no web page sent it (``Origin``, ``Sec-Fetch-Site``: 403 unless the
origin is allowed), the bearer token on every route but ``/health`` (401), a POST body is
``application/json`` (422 naming ``body``), and the body arrives whole, within the size cap
(413) and the time limit (408). A token limited to projects answers 403 naming ``project``
for any other.

A store that does not answer, or answers without the schema this version uses, is 503 (the
server keeps running and answers again once the store does). ``/health`` answers 200 while
the server runs, and says in ``store`` whether the store is usable: ``ok``, ``unreachable``
or ``schema missing`` (missing, older or newer: see the 503's message).
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import ipaddress
import json
import logging
import resource
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Annotated, Any, Literal

from fastapi import Body, FastAPI, Query
from fastapi import Request as HttpRequest
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn import Config
from uvicorn.protocols.http.h11_impl import H11Protocol

from poimen_memory import __version__
from poimen_memory.errors import ErrorKind, Refused, SchemaMissing
from poimen_memory.lookup import LookupRequest, Request, input_error
from poimen_memory.operations import OPERATIONS, Operation, Services, classify
from poimen_memory.settings import is_loopback

__all__ = [
    "MAX_BODY",
    "READ_TIMEOUT_S",
    "STATUS",
    "Guard",
    "create_app",
    "is_loopback",
    "served_hosts",
    "server_config",
]

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024
READ_TIMEOUT_S = 5.0
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
# Sec-Fetch-Site values a browser sends for a request a page made (not the user, "none").
_FROM_A_PAGE = frozenset({"cross-site", "same-site"})


def served_hosts(host: str, port: int) -> frozenset[str] | None:
    """The ``Host`` values a server bound to ``host``:``port`` answers to: the loopback names
    and the bound host, with the port (also without it on port 80). None (any) when bound to
    every address: a token is required then, and the machine's names are not known here."""
    bare = host.strip("[]")
    try:
        if ipaddress.ip_address(bare).is_unspecified:
            return None
    except ValueError:
        pass
    names = {*_LOOPBACK_NAMES, f"[{bare}]" if ":" in bare else bare.lower()}
    return frozenset({f"{name}:{port}" for name in names} | (names if port == 80 else set()))


class ErrorOut(BaseModel):
    """Every error answer: the message, and the field (or header) it is about."""

    error: str
    field: str | None = None


StoreState = Literal["ok", "unreachable", "schema missing"]


class HealthOut(BaseModel):
    """The server is up (``status``), and whether its memory store is usable (``store``)."""

    status: Literal["ok"]
    store: StoreState


class _Refused(Exception):
    """A request refused before or instead of its lookup: status, field, message."""

    def __init__(self, status: int, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.status = status
        self.field = field


def _error(status: int, message: str, field: str | None = None) -> JSONResponse:
    return JSONResponse(ErrorOut(error=message, field=field).model_dump(exclude_none=True), status)


def _doc(description: str) -> dict[str, Any]:
    return {"model": ErrorOut, "description": description}


# What any request may get before it reaches its route, and what a lookup may get after.
_GUARDED: dict[int | str, dict[str, Any]] = {
    400: _doc("the Host header is not a name this server answers to (`field`: host)"),
    403: _doc("sent by a web page whose origin is not allowed, or a token not for `project`"),
    408: _doc(f"the body did not arrive within {READ_TIMEOUT_S:g} s"),
    413: _doc(f"the body is larger than {MAX_BODY} bytes"),
}
_ERRORS: dict[int | str, dict[str, Any]] = {
    **_GUARDED,
    401: _doc("missing or wrong bearer token"),
    404: _doc("the repository or file is not known here"),
    422: _doc("bad input; `field` names it (`body`: not application/json, or not JSON)"),
    503: _doc("memory store unreachable, or without the schema this version uses"),
}


class Guard:
    """Every check a request passes before the app sees it (see the module's docstring). The
    body is read here, capped and timed, then handed on whole."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        hosts: frozenset[str] | None,
        origins: frozenset[str],
        body_paths: frozenset[str],
        max_body: int,
        read_timeout: float,
    ) -> None:
        self.app = app
        self.token = token
        self.hosts = hosts
        self.origins = origins
        self.body_paths = body_paths
        self.max_body = max_body
        self.read_timeout = read_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            if not self._check(scope, headers):  # a CORS preflight: CORSMiddleware answers it
                await self.app(scope, receive, send)
                return
            body = await self._body(headers, receive)
        except _Refused as refused:
            answer = _error(refused.status, str(refused), refused.field)
            answer.headers["connection"] = "close"  # the rest of the request is never read
            if refused.status == 401:
                answer.headers["www-authenticate"] = "Bearer"
            await answer(scope, receive, send)
            return
        if body is not None:  # else the client left before sending it all
            await self.app(scope, _replay(body, receive), send)

    def _check(self, scope: Scope, headers: Headers) -> bool:
        """Refuse what must not reach the app; False for a preflight the app should answer."""
        host = headers.get("host")
        if self.hosts is not None and (host or "").lower() not in self.hosts:
            shown = "missing" if host is None else f"{host!r} is not a name this server answers to"
            raise _Refused(400, "host", shown)
        origin = headers.get("origin")
        if origin is not None and origin.lower().rstrip("/") not in self.origins:
            raise _Refused(
                403, "origin", f"requests from web pages at {origin!r} are not allowed "
                "(--allow-origin or POIMEN_HTTP_ALLOW_ORIGINS lets one in)",
            )  # fmt: skip
        if origin is None and headers.get("sec-fetch-site", "none").lower() in _FROM_A_PAGE:
            raise _Refused(403, "origin", "requests from web pages are not allowed")
        method = scope["method"]
        if method == "OPTIONS" and origin and "access-control-request-method" in headers:
            return False
        if self.token is not None and scope["path"] != "/health":
            scheme, _, given = headers.get("authorization", "").partition(" ")
            # The scheme is case-insensitive (RFC 7235); the token is compared in constant time.
            good = hmac.compare_digest(given.strip().encode(), self.token.encode())
            if scheme.lower() != "bearer" or not good:
                raise _Refused(401, "authorization", "missing or wrong bearer token")
        if method == "POST" and scope["path"] in self.body_paths:
            given_type = headers.get("content-type")
            if (given_type or "").split(";")[0].strip().lower() != "application/json":
                shown = "none" if given_type is None else repr(given_type)
                raise _Refused(422, "body", f"Content-Type must be application/json, got {shown}")
        return True

    async def _body(self, headers: Headers, receive: Receive) -> bytes | None:
        """The whole body (None if the client left): refused as soon as more than the cap
        arrived (or is announced), or when it has not arrived in time (a client that stops
        half-way holds nothing for long)."""
        too_large = _Refused(413, "body", f"larger than {self.max_body} bytes")
        length = headers.get("content-length", "")
        if length.isascii() and length.isdigit() and int(length) > self.max_body:
            raise too_large
        chunks: list[bytes] = []
        size, more = 0, True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.read_timeout
        while more:
            try:
                message = await asyncio.wait_for(receive(), deadline - loop.time())
            except TimeoutError:
                raise _Refused(
                    408, "body", f"not received within {self.read_timeout:g} s"
                ) from None
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise too_large
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then whatever the connection says next."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


# The HTTP status of each kind of failure.
STATUS: dict[ErrorKind, int] = {
    ErrorKind.INPUT: 422,
    ErrorKind.NOT_FOUND: 404,
    ErrorKind.UNAVAILABLE: 503,
    ErrorKind.REFUSED: 403,
    ErrorKind.INTERNAL: 500,
}


def _failed(exc: BaseException) -> JSONResponse:
    failure = classify(exc, logger=log)
    return _error(STATUS[failure.kind], failure.public, failure.field)


def _check_project(services: Services, projects: frozenset[str], req: Request) -> None:
    """A token limited to ``projects`` asks only about them: Refused naming ``project``."""
    if not projects:
        return
    if isinstance(req, LookupRequest):
        project = services.service.project_of(req).value
    else:
        named = getattr(req, "project", None)
        if named is None:
            raise Refused("project", "this token is limited to projects; name one")
        project = named.value
    if project not in projects:
        raise Refused("project", f"this token is not for project {project!r}")


def _endpoint(
    op: Operation[Any, Any, Any], services: Services, projects: frozenset[str]
) -> Callable[..., Awaitable[Response]]:
    """The route of ``op``: its request model as the body (or, for GET, the query), its
    answer as the response model's JSON, every failure as its kind's status."""

    async def endpoint(req: Request) -> Response:
        def answer() -> BaseModel:
            _check_project(services, projects, req)
            return op.answer(op.run(services, req))  # type: ignore[no-any-return]

        try:
            out = await run_in_threadpool(answer)
        except Exception as exc:
            return _failed(exc)
        return Response(out.model_dump_json(), media_type="application/json")

    assert op.http is not None
    source = Query() if op.http.method == "GET" else Body()
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                "req",
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                annotation=Annotated[op.request, source],
            )
        ],
        return_annotation=Response,
    )
    return endpoint


def create_app(
    services: Services,
    token: str | None = None,
    *,
    token_projects: Iterable[str] = (),
    hosts: Iterable[str] | None = None,
    allow_origins: Iterable[str] = (),
    max_body: int = MAX_BODY,
    read_timeout: float = READ_TIMEOUT_S,
) -> FastAPI:
    """The ASGI app: a route for every operation of the table that has one. ``token`` (when
    set) is required on every route but ``/health``; ``token_projects`` (when any) are the
    only projects it may ask about. ``hosts`` are the ``Host`` values accepted
    (``served_hosts``; None: any, for an app called in process); ``allow_origins`` the web
    pages let in (CORS)."""
    projects = frozenset(token_projects)
    if projects and token is None:
        raise ValueError("token_projects without a token")
    origins = frozenset(o.lower().rstrip("/") for o in allow_origins)
    app = FastAPI(
        title="poimen-memory",
        version=__version__,
        description="Memories from coding-agent sessions, anchored to code through git.",
        docs_url=None,
        redoc_url=None,
    )
    for op in OPERATIONS:
        if op.http is None:
            continue
        app.add_api_route(
            op.http.path,
            _endpoint(op, services, projects),
            methods=[op.http.method],
            name=op.name,
            summary=op.title,
            description=op.description,
            response_model=op.response,
            responses=_ERRORS,
            operation_id=op.name,
        )

    @app.get("/health", response_model=HealthOut, responses=_GUARDED)
    async def health() -> HealthOut:
        problem = await run_in_threadpool(services.store.probe)
        state: StoreState = "ok"
        if isinstance(problem, SchemaMissing):
            state = "schema missing"
        elif problem is not None:
            state = "unreachable"
        return HealthOut(status="ok", store=state)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: HttpRequest, exc: RequestValidationError) -> Response:
        error = input_error(exc.errors()[0], skip=1)
        return _error(422, str(error), error.field)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: HttpRequest, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 400:  # a body FastAPI could not decode
            return _error(422, f"body: not valid JSON ({exc.detail})", "body")
        answer = _error(exc.status_code, str(exc.detail))
        answer.headers.update(exc.headers or {})  # e.g. Allow on a 405
        return answer

    @app.exception_handler(_Refused)
    async def refused(_: HttpRequest, exc: _Refused) -> Response:
        return _error(exc.status, str(exc), exc.field)

    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=sorted(origins),
            allow_methods=["GET", "POST"],
            allow_headers=["authorization", "content-type"],
        )
    posts = [r for r in app.routes if isinstance(r, APIRoute) and "POST" in (r.methods or ())]
    body_paths = frozenset(route.path for route in posts)
    app.add_middleware(
        Guard,
        token=token,
        hosts=None if hosts is None else frozenset(h.lower() for h in hosts),
        origins=origins,
        body_paths=body_paths,
        max_body=max_body,
        read_timeout=read_timeout,
    )
    return app


# -- connections: headers on time, and a cap -----------------------------------------------------

_HEADER_BYTES = 16 * 1024  # the request line and headers together (h11's own default)
_ACCEPTS = 64  # connections accepted at once; each takes a descriptor before it is checked
_RESERVED_FDS = 2 * _ACCEPTS  # for those, the store's connections, git, files and logs


def _connection_cap(wanted: int) -> int:
    """``wanted``, lowered so that that many connections leave descriptors for the rest of
    the process (after raising the soft limit on open files as far as the hard one allows)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted + _RESERVED_FDS
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - _RESERVED_FDS))


class _Connection(H11Protocol):
    """uvicorn's HTTP/1.1 connection with two limits of its own. Its request line and headers
    must arrive whole within ``header_timeout`` seconds of its first byte (of the connection,
    or after the previous answer): a client that sends them slowly, or not at all, is closed,
    before any check of its token could run. At most ``max_connections`` are open: one more
    closes the connection that has waited longest for its headers, or, when every one is in
    the middle of a request, is answered 503 and closed."""

    header_timeout = 10.0
    max_connections = 256

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._timer: asyncio.TimerHandle | None = None
        self._waiting_since: float | None = time.monotonic()
        super().connection_made(transport)
        if len(self.connections) > self.max_connections and not self._make_room():
            self._refuse()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._waiting():
            if self._waiting_since is None:
                self._waiting_since = time.monotonic()
            self._arm()
        else:
            self._waiting_since = None
            self._disarm()

    def on_response_complete(self) -> None:
        self._waiting_since = time.monotonic()
        super().on_response_complete()  # idle now: uvicorn's keep-alive timeout closes it

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _waiting(self) -> bool:
        """Whether no request is in progress: the next one's headers have not all arrived."""
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        """Start the headers' clock, unless it runs already (bytes arriving do not reset it)."""
        if self._timer is None and not self.transport.is_closing():
            self._timer = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _too_slow(self) -> None:
        self._timer = None
        if self._waiting() and not self.transport.is_closing():
            self.transport.close()

    def _make_room(self) -> bool:
        """Close the connection that has waited longest for its headers; False if none is."""
        idle = [
            c
            for c in self.connections
            if isinstance(c, _Connection)
            and c is not self
            and c._waiting_since is not None
            and c._waiting()
            and not c.transport.is_closing()
        ]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c._waiting_since or 0.0)
        oldest._disarm()
        oldest.transport.close()
        return True

    def _refuse(self) -> None:
        message = (
            f"connection: too many open connections (at most {self.max_connections}, each in "
            "the middle of a request); try again shortly"
        )
        body = json.dumps({"error": message, "field": "connection"}).encode()
        head = (
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nretry-after: 1\r\nconnection: close\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
        self.transport.close()


def server_config(
    app: ASGIApp,
    *,
    header_timeout: float,
    max_connections: int,
    host: str = "127.0.0.1",
    port: int = 8000,
) -> Config:
    """uvicorn's configuration for ``mem http`` and ``mem mcp --http``: HTTP/1.1 through
    ``_Connection`` (headers within ``header_timeout`` seconds and at most 16 KiB, at most
    ``max_connections`` connections, fewer if the limit on open files needs it), idle
    keep-alive connections closed after 5 s, warnings only in the log."""
    cap = _connection_cap(max_connections)

    class Connection(_Connection):
        pass

    Connection.header_timeout = header_timeout
    Connection.max_connections = cap
    return Config(
        app,
        host=host,
        port=port,
        http=Connection,
        h11_max_incomplete_event_size=_HEADER_BYTES,
        timeout_keep_alive=5,
        backlog=_ACCEPTS,
        log_level="warning",
    )
