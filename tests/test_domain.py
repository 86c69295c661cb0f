"""M0.2 domain rules: validation with clear messages, and JSON round-trips for every type."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from poimen_memory.domain import (
    Anchor,
    Chunk,
    CommitInfo,
    CommitSha,
    ContentError,
    Edge,
    Level,
    MemoryNode,
    ProjectId,
    Provenance,
    QueryId,
    Record,
    RepoId,
    Role,
    RunId,
    Sha256Hash,
    parse_timestamp,
)

T0 = datetime(2026, 8, 15, 10, 30, tzinfo=UTC)
SHA = Sha256Hash("ab" * 32)
COMMIT = CommitSha("0123456789abcdef0123456789abcdef01234567")


def node(**overrides: Any) -> MemoryNode:
    fields: dict[str, Any] = {
        "level": Level.L0,
        "project": ProjectId("poimen"),
        "query_id": QueryId("q1"),
        "run_id": RunId("r1"),
        "t": 1,
        "text": "evidence",
        "created_at": T0,
    }
    fields.update(overrides)
    return MemoryNode(**fields)


@pytest.mark.parametrize(
    ("cls", "value", "message"),
    [
        (ProjectId, "", "project: must not be empty"),
        (ProjectId, "   ", "project: must not be empty"),
        (ProjectId, "x" * 129, "project: longer than 128"),
        (ProjectId, "has space", "project: 'has space' has characters"),
        (ProjectId, "-leading", "project: '-leading' has characters"),
        (ProjectId, 42, "project: expected a string, got 42"),
        (QueryId, "\t", "query_id: must not be empty"),
        (QueryId, "q\n1", "query_id: 'q\\\\n1' has characters"),
        (RunId, "", "run_id: must not be empty"),
        (Sha256Hash, "", "sha256: expected 64 lowercase hex digits, got ''"),
        (Sha256Hash, "ab" * 31, "sha256: expected 64"),
        (Sha256Hash, "AB" * 32, "sha256: expected 64 lowercase"),
        (Sha256Hash, "zz" * 32, "sha256: expected 64"),
        (CommitSha, "abc123", "commit_sha: expected a full commit id"),
        (CommitSha, "--upload-pack=x", "commit_sha: expected a full commit id"),
        (RepoId, "-x", "repo: expected a repository identity"),
        (RepoId, "", "repo: expected a repository identity"),
    ],
)
def test_newtypes_validate_and_name_the_value(cls: type, value: object, message: str) -> None:
    with pytest.raises(ContentError, match=message):
        cls(value)


def test_newtypes_accept_real_ids() -> None:
    assert ProjectId("poimen").value == "poimen"
    assert QueryId("7f3a9c1e-2b4d-4e8f-9a1b-3c5d7e9f1a2b").value.startswith("7f3a")
    assert RunId("session:2026-08-15/a@b").value
    assert str(Sha256Hash("0" * 64)) == "0" * 64
    assert RepoId("github.com/org/x").value == "github.com/org/x"
    assert CommitSha("a" * 64).short() == "aaaaaaa"


def test_level_and_role_are_closed() -> None:
    assert [lvl.value for lvl in Level] == ["L0", "L1", "L2"]
    assert [lvl.rank for lvl in Level] == [0, 1, 2]
    assert Role.parse("tool_result") is Role.TOOL_RESULT
    with pytest.raises(ContentError, match="role: expected one of user, assistant"):
        Role.parse("ToolResult")


def test_query_id_required_below_l2_and_absent_at_l2() -> None:
    with pytest.raises(ContentError, match="query_id: required at L0"):
        node(query_id=None)
    with pytest.raises(ContentError, match="query_id: required at L1"):
        node(level=Level.L1, query_id=None)
    with pytest.raises(ContentError, match="query_id: must be absent at L2"):
        node(level=Level.L2)
    assert node(level=Level.L2, query_id=None).query_id is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"text": "   "}, "text: a memory node needs non-empty text"),
        ({"text": "a\x00b"}, "text: contains a NUL"),
        ({"t": -1}, "t: must be between 0 and"),
        ({"t": 2**31}, "t: must be between 0 and"),
        ({"t": True}, "t: expected an integer"),
        ({"created_at": datetime(2026, 1, 1)}, "created_at: timestamp needs a UTC offset"),
        ({"project": "poimen"}, "project: expected ProjectId"),
        ({"parents": [SHA]}, "parents: expected a tuple"),
    ],
)
def test_memory_node_rejects_bad_fields(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ContentError, match=message):
        node(**overrides)


def test_node_cannot_be_its_own_parent() -> None:
    own = node().sha256
    with pytest.raises(ContentError, match="cannot be its own parent"):
        node(parents=(own,))


def test_brief_is_first_nonblank_line_cut_to_80() -> None:
    assert node(text="\n\n  Kong buffer raised  \nmore").brief == "Kong buffer raised"
    long = node(text="word " * 40).brief
    assert len(long) == 80
    assert long.endswith("…")


def test_timestamps_parse_with_offsets_only() -> None:
    assert parse_timestamp("x", "2026-08-15T10:30:00Z") == T0
    plus2 = parse_timestamp("x", "2026-08-15T12:30:00+02:00")
    assert plus2 == T0
    assert plus2.utcoffset() == timedelta(hours=2)
    with pytest.raises(ContentError, match="x: timestamp needs a UTC offset"):
        parse_timestamp("x", "2026-08-15T10:30:00")
    with pytest.raises(ContentError, match="x: not an ISO 8601 timestamp: 'yesterday'"):
        parse_timestamp("x", "yesterday")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"file": "/etc/passwd"}, "file: expected a path relative"),
        ({"file": "../x.py"}, "file: '../x.py' must be a normalized relative path"),
        ({"file": "a//b.py"}, "must be a normalized relative path"),
        ({"file": ""}, "file: expected a path relative"),
        ({"line_start": 0, "line_end": 3}, "line_end: whole-file anchors"),
        ({"line_start": 5, "line_end": 4}, "line_end: 4 is before line_start 5"),
        ({"line_start": -1, "line_end": 4}, "line_start: must be between 0"),
    ],
)
def test_anchor_rejects_bad_fields(overrides: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {
        "project": ProjectId("p"),
        "node": SHA,
        "repo": RepoId("github.com/org/x"),
        "commit": COMMIT,
        "file": "src/a.py",
        "line_start": 1,
        "line_end": 2,
    }
    fields.update(overrides)
    with pytest.raises(ContentError, match=message):
        Anchor(**fields)


def test_anchor_covers() -> None:
    a = Anchor(ProjectId("p"), SHA, RepoId("r.example/x"), COMMIT, "f.py", 10, 12)
    assert [a.covers(n) for n in (9, 10, 12, 13)] == [False, True, True, False]
    whole = Anchor(ProjectId("p"), SHA, RepoId("r.example/x"), COMMIT, "f.py", 0, 0)
    assert whole.covers(1)
    assert whole.covers(10_000)


def _roundtrip(value: Any) -> Any:
    return type(value).from_json(json.loads(json.dumps(value.to_json())))


def test_json_roundtrip_every_type() -> None:
    tz = timezone(timedelta(hours=-7))
    prov = Provenance("https://example.test/conv/1", 12)
    record = Record(Role.TOOL_RESULT, "out\r\nput ✓", T0.astimezone(tz), prov)
    chunk = Chunk(t=3, records=(record, record), tokens=9)
    values = [
        prov,
        record,
        chunk,
        node(parents=(SHA,)),
        node(level=Level.L2, query_id=None, t=0),
        Edge(ProjectId("p"), SHA, Sha256Hash("cd" * 32)),
        CommitInfo(RepoId("github.com/o/x"), COMMIT, "Fix\n\nbody", "Alice", "a@o.test", T0),
        Anchor(ProjectId("p"), SHA, RepoId("github.com/o/x"), COMMIT, "src/ü x.py", 0, 0),
    ]
    for value in values:
        back = _roundtrip(value)
        assert back == value
        assert back.to_json() == value.to_json()
    assert _roundtrip(record).timestamp.utcoffset() == timedelta(hours=-7)
    assert _roundtrip(chunk).sha256 == chunk.sha256
    for lvl in Level:
        assert Level.parse(json.loads(json.dumps(lvl.value))) is lvl
    for role in Role:
        assert Role.parse(json.loads(json.dumps(role.value))) is role


def test_from_json_refuses_a_sha256_that_does_not_match() -> None:
    wire = node().to_json()
    wire["sha256"] = "0" * 64
    with pytest.raises(ContentError, match=r"node\.sha256: '0000"):
        MemoryNode.from_json(wire)
    wire = Chunk(t=1, records=(Record(Role.USER, "x", T0, Provenance("s", 0)),), tokens=1).to_json()
    wire["records"][0]["text"] = "y"
    with pytest.raises(ContentError, match=r"chunk\.sha256"):
        Chunk.from_json(wire)


@pytest.mark.parametrize(
    ("cls", "obj", "message"),
    [
        (MemoryNode, [], "memory node: expected a JSON object"),
        (MemoryNode, {"level": "L0"}, "memory node: missing field 'project'"),
        (Record, {"role": "user", "text": 1, "timestamp": "x", "provenance": {}}, "record.text"),
        (Provenance, {"source": "s", "offset": -1}, "provenance.offset: must be between"),
        (Chunk, {"t": 0, "records": [], "tokens": 0}, "chunk.t: must be between 1"),
        (Edge, {"project": "p", "child": "a" * 64, "parent": "a" * 64}, "edge: child and parent"),
    ],
)
def test_from_json_errors_name_the_field(cls: Any, obj: object, message: str) -> None:
    with pytest.raises(ContentError, match=message):
        cls.from_json(obj)
