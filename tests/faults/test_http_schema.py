"""Schemathesis against the HTTP API's own /openapi.json: no 5xx, answers as documented."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from poimen_memory.domain import ProjectId
from poimen_memory.http import create_app
from poimen_memory.lookup import build_service
from poimen_memory.operations import Services
from poimen_memory.store import Store

from .conftest import PROJECT, Faults


@pytest.fixture(scope="module")
def api_schema(faults: Faults) -> Iterator[schemathesis.schemas.BaseSchema]:
    with Store(faults.dsn) as store:
        service = build_service(
            store, [faults.kong.root], ProjectId(PROJECT), cache_path=faults.root / "st.db"
        )
        yield schemathesis.openapi.from_asgi("/openapi.json", create_app(Services.over(service)))


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_http_api_conforms_and_never_crashes(case: schemathesis.Case) -> None:
    response = case.call()
    assert response.status_code < 500 or response.status_code == 503, response.text
    if response.status_code == 422:
        body = response.json()
        assert body["field"]
        assert body["error"].startswith(body["field"])
    # Schema-valid is not always valid here: a path must be normalized, a repository must
    # have a known checkout, a commit prefix must be unambiguous. Those answers are 422s
    # naming the field (checked above), so the "positive data accepted" check is left out.
    case.validate_response(response, excluded_checks=[positive_data_acceptance])
