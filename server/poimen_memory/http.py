"""The seed's HTTP API (M3.5.9) over the lookup service: a thin FastAPI adapter on the
request and response models of ``poimen_memory.lookup`` (OpenAPI is generated from them).

    POST /memory/nodes/by-git      ByGitRequest
    POST /memory/nodes/by-commit   ByCommitRequest
    POST /memory/nodes/by-author   ByAuthorRequest
    GET  /memory/query?query=...&project=...&git_repo=...&limit=...
    GET  /openapi.json             this API, described
    GET  /health                   {"status": "ok"}

Bad input: 422 ``{"error": "field: ...", "field": "..."}``. With a token, every lookup needs
``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import psycopg
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from poimen_memory import __version__
from poimen_memory.domain import ContentError
from poimen_memory.lookup import LookupResponse, LookupResult, LookupService
from poimen_memory.lookup.errors import LookupFailed, LookupInputError, NotInRepository
from poimen_memory.lookup.requests import (
    ByAuthorRequest,
    ByCommitRequest,
    ByGitRequest,
    LookupRequest,
    QueryRequest,
    input_error,
)
from poimen_memory.wiring import StoreUnavailable

__all__ = ["create_app", "is_loopback"]

_MAX_BODY = 64 * 1024


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class ErrorOut(BaseModel):
    """Every error answer: the message, and the field it is about (bad input only)."""

    error: str
    field: str | None = None


class HealthOut(BaseModel):
    """The server is up."""

    status: str


class _Unauthorized(Exception):
    """A lookup without the right bearer token."""


def _error(status: int, message: str, field: str | None = None) -> JSONResponse:
    return JSONResponse(ErrorOut(error=message, field=field).model_dump(exclude_none=True), status)


_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "missing or wrong bearer token"},
    404: {"model": ErrorOut, "description": "the repository or file is not known here"},
    422: {"model": ErrorOut, "description": "bad input; `field` names it"},
    503: {"model": ErrorOut, "description": "memory store unreachable"},
}

_R = TypeVar("_R", bound=LookupRequest)


def create_app(service: LookupService, token: str | None = None) -> FastAPI:
    """The ASGI app; ``token`` (when set) is required as a bearer token on every lookup."""
    app = FastAPI(
        title="poimen-memory",
        version=__version__,
        description="Memories from coding-agent sessions, anchored to code through git.",
        docs_url=None,
        redoc_url=None,
    )

    async def authorized(request: Request) -> None:
        if token is not None:
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                raise _Unauthorized
        if len(await request.body()) > _MAX_BODY:
            raise LookupInputError("body", f"larger than {_MAX_BODY} bytes")

    guarded = [Depends(authorized)]

    async def answer(run: Callable[[_R], LookupResult], req: _R) -> Response:
        result = await run_in_threadpool(run, req)
        return Response(result.response().model_dump_json(), media_type="application/json")

    lookup: dict[str, Any] = {
        "response_model": LookupResponse,
        "responses": _ERRORS,
        "dependencies": guarded,
    }

    @app.post("/memory/nodes/by-git", summary="Memories at a code location", **lookup)
    async def by_git(body: ByGitRequest) -> Response:
        return await answer(service.by_git, body)

    @app.post("/memory/nodes/by-commit", summary="Memories anchored in a commit", **lookup)
    async def by_commit(body: ByCommitRequest) -> Response:
        return await answer(service.by_commit, body)

    @app.post("/memory/nodes/by-author", summary="Evidence from an author's commits", **lookup)
    async def by_author(body: ByAuthorRequest) -> Response:
        return await answer(service.by_author, body)

    @app.get("/memory/query", summary="Full-text search over memories", **lookup)
    async def query(params: Annotated[QueryRequest, Query()]) -> Response:
        return await answer(service.query, params)

    @app.get("/health", response_model=HealthOut)
    async def health() -> HealthOut:
        return HealthOut(status="ok")

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> Response:
        error = input_error(exc.errors()[0], skip=1)
        return _error(422, str(error), error.field)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 400:  # a body FastAPI could not decode
            return _error(422, f"body: not valid JSON ({exc.detail})", "body")
        answer = _error(exc.status_code, str(exc.detail))
        answer.headers.update(exc.headers or {})  # e.g. Allow on a 405
        return answer

    @app.exception_handler(LookupInputError)
    async def bad_input(_: Request, exc: LookupInputError) -> Response:
        return _error(422, str(exc), exc.field)

    @app.exception_handler(ContentError)
    async def bad_content(_: Request, exc: ContentError) -> Response:
        return _error(422, str(exc), str(exc).split(":", 1)[0])

    @app.exception_handler(NotInRepository)  # a LookupFailed too, but the caller's mistake
    async def not_in_repository(_: Request, exc: NotInRepository) -> Response:
        return _error(422, str(exc), exc.field)

    @app.exception_handler(LookupFailed)
    async def not_found(_: Request, exc: LookupFailed) -> Response:
        return _error(404, str(exc))

    @app.exception_handler(StoreUnavailable)
    @app.exception_handler(psycopg.OperationalError)
    async def unavailable(_: Request, exc: Exception) -> Response:
        return _error(503, "memory store unreachable")

    @app.exception_handler(_Unauthorized)
    async def unauthorized(_: Request, exc: _Unauthorized) -> Response:
        return _error(401, "missing or wrong bearer token")

    return app
