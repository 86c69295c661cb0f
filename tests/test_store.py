"""The store on a real Postgres: idempotent batches, COPY path, reads, edge walks, constraints."""

from __future__ import annotations

import string
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from poimen_memory.domain import (
    Anchor,
    CommitInfo,
    CommitSha,
    ContentError,
    Edge,
    Level,
    MemoryNode,
    PendingAnchor,
    ProjectId,
    QueryId,
    RepoId,
    RunId,
    Sha256Hash,
)
from poimen_memory.store import Batch, InsertCounts, Store
from poimen_memory.store.adapters import register_domain_types
from poimen_memory.store.queries import load_queries
from poimen_memory.store.writes import ANCHORS, COMMITS, EDGES, NODES, Table

from .schema import PROJECT_KEYED_TABLES

T0 = datetime(2026, 8, 15, 10, 30, tzinfo=UTC)
REPO = RepoId("github.com/org/poimen")
C1 = CommitSha("1" * 40)
C2 = CommitSha("2" * 40)


def mk(
    project: ProjectId, level: Level, text: str, parents: tuple[Any, ...] = (), q: str = "q1"
) -> MemoryNode:
    return MemoryNode(
        level=level,
        project=project,
        query_id=None if level is Level.L2 else QueryId(q),
        run_id=RunId("run-1"),
        t=1,
        text=text,
        created_at=T0,
        parents=parents,
    )


def commit(sha: CommitSha, email: str = "alice@org.test") -> CommitInfo:
    return CommitInfo(REPO, sha, "Increase buffer\n\nbody", "Alice", email, T0 - timedelta(days=1))


def graph(project: ProjectId) -> tuple[Batch, dict[str, MemoryNode]]:
    """L2 <- L1a <- (e1, e2); L2 <- L1b <- e2 (a diamond through e2)."""
    l2 = mk(project, Level.L2, "project synthesis")
    l1a = mk(project, Level.L1, "buffer raised to 16MB", (l2.sha256,))
    l1b = mk(project, Level.L1, "large bodies handled", (l2.sha256,), q="q2")
    e1 = mk(project, Level.L0, "edited buffer.rs:42", (l1a.sha256,))
    e2 = mk(project, Level.L0, "edited handler.rs:10", (l1a.sha256, l1b.sha256))
    anchors = [
        Anchor(project, e1.sha256, REPO, C1, "src/kong/buffer.rs", 42, 42),
        Anchor(project, e2.sha256, REPO, C2, "src/kong/handler.rs", 10, 12),
    ]
    batch = Batch(nodes=[l2, l1a, l1b, e1, e2], commits=[commit(C1), commit(C2)], anchors=anchors)
    return batch, {"l2": l2, "l1a": l1a, "l1b": l1b, "e1": e1, "e2": e2}


def snapshot(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, sorted, for row-for-row comparisons."""
    out = {}
    with psycopg.connect(dsn) as conn:
        for table in ("memory_node", "memory_edge", "git_commit", "git_anchor"):
            rows = conn.execute(f"SELECT * FROM {table}").fetchall()
            out[table] = sorted(rows, key=repr)
    return out


@pytest.mark.parametrize("use_copy", [False, True], ids=["rows", "copy"])
def test_insert_is_idempotent_row_for_row(
    store: Store, store_dsn: str, project: ProjectId, use_copy: bool
) -> None:
    batch, _ = graph(project)
    first = store.insert_batch(batch, use_copy=use_copy)
    assert first == InsertCounts(nodes=5, edges=5, commits=2, anchors=2)
    before = snapshot(store_dsn)
    again = store.insert_batch(batch, use_copy=use_copy)
    assert again == InsertCounts()
    assert snapshot(store_dsn) == before


def test_copy_and_row_paths_store_identical_rows(store: Store, store_dsn: str) -> None:
    pa, pb = ProjectId("path-rows"), ProjectId("path-copy")
    store.insert_batch(graph(pa)[0], use_copy=False)
    store.insert_batch(graph(pb)[0], use_copy=True)

    def rows_of(project: ProjectId) -> list[tuple[Any, ...]]:
        with psycopg.connect(store_dsn) as conn:
            rows = []
            for table in ("memory_node", "memory_edge", "git_commit", "git_anchor"):
                for row in conn.execute(
                    f"SELECT * FROM {table} WHERE project = %s", (project.value,)
                ).fetchall():
                    rows.append((table, *row[1:]))
            return sorted(rows, key=repr)

    a, b = rows_of(pa), rows_of(pb)
    assert len(a) == 5 + 5 + 2 + 2
    # Only the project differs between the two; identities hash the project, so map it out.
    by_copy = {n.sha256.value: n for n in graph(pb)[1].values()}
    by_rows = {n.sha256.value: n for n in graph(pa)[1].values()}
    to_rows = {
        sha: by_rows[next(k for k, v in by_rows.items() if v.text == n.text)].sha256.value
        for sha, n in by_copy.items()
    }

    def translate(row: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(to_rows.get(v, v) if isinstance(v, str) else v for v in row)

    assert sorted((translate(r) for r in b), key=repr) == a


def test_large_batch_goes_through_copy(store: Store, project: ProjectId) -> None:
    l1 = mk(project, Level.L1, "summary")
    nodes = [l1] + [mk(project, Level.L0, f"evidence {i}", (l1.sha256,)) for i in range(600)]
    counts = store.insert_batch(Batch(nodes=nodes))
    assert counts == InsertCounts(nodes=601, edges=600)
    assert store.insert_batch(Batch(nodes=nodes)) == InsertCounts()
    assert len(store.get_nodes(project, [n.sha256 for n in nodes])) == 601


def test_copy_of_new_nodes_goes_straight_in_and_a_partly_stored_batch_adds_the_rest(
    store: Store, store_dsn: str, project: ProjectId
) -> None:
    """New nodes, their edges and anchors are copied into the tables themselves; a batch of
    which some nodes are stored adds exactly the others (the staging path), with counts."""
    l1 = mk(project, Level.L1, "summary")
    evidence = [mk(project, Level.L0, f"evidence {i}", (l1.sha256,)) for i in range(600)]
    anchors = [
        Anchor(project, e.sha256, REPO, C1, "a.py", i + 1, i + 1) for i, e in enumerate(evidence)
    ]
    first = Batch(nodes=[l1, *evidence[:300]], commits=[commit(C1)], anchors=anchors[:300])
    assert store.insert_batch(first, use_copy=True) == InsertCounts(
        nodes=301, edges=300, commits=1, anchors=300
    )
    both = Batch(nodes=[l1, *evidence], commits=[commit(C1)], anchors=anchors)
    assert store.insert_batch(both, use_copy=True) == InsertCounts(
        nodes=300, edges=300, commits=0, anchors=300
    )
    before = snapshot(store_dsn)
    assert store.insert_batch(both, use_copy=True) == InsertCounts()
    assert snapshot(store_dsn) == before
    with psycopg.connect(store_dsn) as conn:
        stored = conn.execute(
            "SELECT count(*) FROM git_anchor WHERE project = %s", (project.value,)
        ).fetchone()
    assert stored == (600,)


def test_copy_straight_in_that_meets_a_stored_row_falls_back_to_the_stage(
    store: Store, store_dsn: str, project: ProjectId
) -> None:
    """A node the probe found new but another transaction writes meanwhile (held open here
    until the COPY waits for it, then committed): that COPY is undone and the rows are
    merged, the one stored skipped."""
    batch, _ = graph(project)
    first = batch.nodes[0]
    result: list[InsertCounts | BaseException] = []

    def write() -> None:
        try:
            result.append(store.insert_batch(batch, use_copy=True))
        except BaseException as exc:  # said below
            result.append(exc)

    with psycopg.connect(store_dsn) as other, psycopg.connect(store_dsn, autocommit=True) as seen:
        other.execute(  # not committed yet: the probe cannot see it
            "INSERT INTO memory_node (project, sha256, level, query_id, run_id, t, text,"
            " created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            (project.value, first.sha256.value, first.level.value, None, first.run_id.value,
             first.t, first.text, first.created_at),
        )  # fmt: skip
        writer = threading.Thread(target=write)
        writer.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the COPY waits for the other's row
            waiting = seen.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
            if waiting and waiting[0]:
                break
            time.sleep(0.02)
        else:
            raise AssertionError("the batch's COPY never waited for the other transaction")
        other.commit()
        writer.join(30)
    assert result == [InsertCounts(nodes=4, edges=5, commits=2, anchors=2)]
    before = snapshot(store_dsn)
    assert store.insert_batch(batch, use_copy=True) == InsertCounts()
    assert snapshot(store_dsn) == before
    extra = mk(project, Level.L0, "one more", (batch.nodes[0].sha256,))
    assert store.insert_batch(Batch(nodes=[*batch.nodes, extra]), use_copy=True) == InsertCounts(
        nodes=1, edges=1
    )


def test_get_nodes_reads_back_equal_values(store: Store, project: ProjectId) -> None:
    batch, n = graph(project)
    store.insert_batch(batch)
    got = store.get_nodes(project, [n["e2"].sha256, n["l2"].sha256, n["e1"].sha256])
    assert got == [n["e2"], n["l2"], n["e1"]]
    assert got[0].parents == tuple(sorted(n["e2"].parents))
    assert got[0].created_at == T0
    # Scoped by project: another project sees nothing.
    assert store.get_nodes(ProjectId("someone-else"), [n["e1"].sha256]) == []


def test_walk_up_returns_each_parent_once(store: Store, project: ProjectId) -> None:
    batch, n = graph(project)
    store.insert_batch(batch)
    walked = store.walk_up(project, [n["e1"].sha256, n["e2"].sha256])
    shas = [w.node.sha256 for w in walked]
    assert len(shas) == len(set(shas)) == 3
    by_sha = {w.node.sha256: w for w in walked}
    assert by_sha[n["l1a"].sha256].depth == 1
    assert by_sha[n["l1a"].sha256].origins == tuple(sorted((n["e1"].sha256, n["e2"].sha256)))
    assert by_sha[n["l1b"].sha256].origins == (n["e2"].sha256,)
    assert by_sha[n["l2"].sha256].depth == 2
    assert [w.depth for w in walked] == sorted(w.depth for w in walked)
    assert store.walk_up(project, [n["l2"].sha256]) == []


def test_edge_that_does_not_point_up_writes_nothing(
    store: Store, store_dsn: str, project: ProjectId
) -> None:
    l1 = mk(project, Level.L1, "memory")
    e = mk(project, Level.L0, "evidence")
    before = snapshot(store_dsn)
    with pytest.raises(ContentError, match=r"\(L1\) -> .* \(L0\) does not point up"):
        store.insert_batch(Batch(nodes=[l1, e], edges=[Edge(project, l1.sha256, e.sha256)]))
    assert snapshot(store_dsn) == before


def test_edge_to_unknown_node_writes_nothing(
    store: Store, store_dsn: str, project: ProjectId
) -> None:
    ghost = mk(project, Level.L1, "never stored")
    e = mk(project, Level.L0, "evidence", (ghost.sha256,))
    before = snapshot(store_dsn)
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        store.insert_batch(Batch(nodes=[e]))
    assert snapshot(store_dsn) == before


def test_anchor_needs_its_commit_metadata(store: Store, project: ProjectId) -> None:
    e = mk(project, Level.L0, "evidence")
    anchor = Anchor(project, e.sha256, REPO, C1, "a.py", 1, 1)
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        store.insert_batch(Batch(nodes=[e], anchors=[anchor]))
    assert store.get_nodes(project, [e.sha256]) == []


def test_same_commit_in_two_repos_is_two_anchors(
    store: Store, store_dsn: str, project: ProjectId
) -> None:
    e = mk(project, Level.L0, "evidence")
    mirror = RepoId("gitlab.com/org/poimen")
    batch = Batch(
        nodes=[e],
        commits=[commit(C1), CommitInfo(mirror, C1, "m", "Alice", "a@o.test", T0)],
        anchors=[
            Anchor(project, e.sha256, REPO, C1, "a.py", 3, 3),
            Anchor(project, e.sha256, mirror, C1, "a.py", 3, 3),
        ],
    )
    assert store.insert_batch(batch).anchors == 2
    assert store.insert_batch(batch).anchors == 0


def test_database_constraints_back_the_domain(store_dsn: str) -> None:
    with psycopg.connect(store_dsn) as conn:
        for bad_level in ("l0", "L3", "0"):
            with pytest.raises(psycopg.errors.CheckViolation), conn.transaction():
                conn.execute(
                    "INSERT INTO memory_node (project, sha256, level, query_id, run_id, t, text,"
                    " created_at) VALUES ('p', %s, %s, 'q', 'r', 1, 'x', now())",
                    ("e" * 64, bad_level),
                )
        with pytest.raises(psycopg.errors.CheckViolation), conn.transaction():
            conn.execute(
                "INSERT INTO memory_node (project, sha256, level, query_id, run_id, t, text,"
                " created_at) VALUES ('p', %s, 'L2', 'q', 'r', 1, 'x', now())",
                ("e" * 64,),
            )


def test_every_key_starts_with_project(store_dsn: str) -> None:
    # Not the migrations applied, nor which projects a role may see (keyed by role): neither
    # holds a project's rows, and both would be reference tables on Citus.
    with psycopg.connect(store_dsn) as conn:
        rows = conn.execute(
            """
            SELECT c.conrelid::regclass::text, c.contype, a.attname
            FROM pg_constraint c
            JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
            WHERE c.contype IN ('p', 'u', 'f') AND c.connamespace = 'public'::regnamespace
              AND c.conrelid::regclass::text NOT IN ('poimen_schema_version', 'role_project')
            """
        ).fetchall()
    assert {r[0] for r in rows} == PROJECT_KEYED_TABLES
    assert all(r[2] == "project" for r in rows), rows


def test_lookup_indexes_exist(store_dsn: str) -> None:
    with psycopg.connect(store_dsn) as conn:
        defs = [
            r[0] for r in conn.execute("SELECT indexdef FROM pg_indexes WHERE schemaname='public'")
        ]
    joined = "\n".join(defs)
    assert "(project, repo, commit_sha, file," in joined  # anchors by location (the pkey)
    assert "git_commit USING btree (project, repo, lower(author_email))" in joined
    assert "memory_node USING btree (project, created_at DESC)" in joined
    assert "memory_node USING gin (text_tsv)" in joined


def test_full_text_column_is_generated(store: Store, store_dsn: str, project: ProjectId) -> None:
    store.insert_batch(Batch(nodes=[mk(project, Level.L1, "Kong body buffers were raised")]))
    with psycopg.connect(store_dsn) as conn:
        hit = conn.execute(
            "SELECT count(*) FROM memory_node WHERE project = %s"
            " AND text_tsv @@ websearch_to_tsquery('english', 'buffer raise')",
            (project.value,),
        ).fetchone()
    assert hit == (1,)


def test_status_counts(store: Store) -> None:
    status = store.status()
    assert status.schema_version == status.latest_version >= 1
    assert set(status.nodes_by_level) == {"L0", "L1", "L2"}


def test_a_row_changed_behind_the_store_is_refused(
    store: Store, store_dsn: str, project: ProjectId
) -> None:
    node = mk(project, Level.L1, "original text")
    store.insert_batch(Batch(nodes=[node]))
    with psycopg.connect(store_dsn) as conn:
        conn.execute(
            "UPDATE memory_node SET text = 'tampered' WHERE project = %s AND sha256 = %s",
            (project.value, node.sha256.value),
        )
    with pytest.raises(ContentError, match=r"hashes to .* the row was changed outside"):
        store.get_nodes(project, [node.sha256])


def test_evidence_brings_anchor_commit_node_and_nodes_above(
    store: Store, project: ProjectId
) -> None:
    batch, n = graph(project)
    store.insert_batch(batch)
    [found] = store.evidence_at_line(project, REPO, C2, "src/kong/handler.rs", 11)
    assert found.anchor == batch.anchors[1]
    assert found.commit == commit(C2)
    assert found.node.sha256 == n["e2"].sha256
    # Nearest first; at one depth the newest, then by sha.
    l1s = sorted((n["l1a"].sha256, n["l1b"].sha256))
    assert [(a.sha256, d) for a, d in found.ancestors] == [
        (l1s[0], 1),
        (l1s[1], 1),
        (n["l2"].sha256, 2),
    ]
    assert store.evidence_at_line(project, REPO, C2, "src/kong/handler.rs", 13) == []
    # The limit keeps the first anchors by (commit, file, line, node).
    limited = store.evidence_for_commits(project, None, [C2, C1], limit=1)
    assert [e.anchor for e in limited] == [batch.anchors[0]]
    assert store.evidence_for_runs(project, REPO, []) == []


def test_a_line_s_newest_evidence_is_read_and_the_rest_counted(
    store: Store, project: ProjectId
) -> None:
    """A hover's read: the line's anchors newest memory first, the first few in full (with
    the nodes above them), every memory counted; another project's anchors neither."""
    l1 = mk(project, Level.L1, "what was learned")
    nodes = [
        replace(mk(project, Level.L0, f"note {i}", (l1.sha256,)), created_at=T0 + timedelta(i))
        for i in range(12)
    ]
    file = "src/kong/handler.rs"
    anchors = [Anchor(project, n.sha256, REPO, C2, file, 10, 12) for n in nodes[:10]]
    anchors.append(Anchor(project, nodes[10].sha256, REPO, C2, file, 0, 0))  # the whole file
    anchors.append(Anchor(project, nodes[10].sha256, REPO, C2, file, 11, 11))  # twice
    anchors.append(Anchor(project, nodes[11].sha256, REPO, C2, file, 12, 13))  # not line 11
    store.insert_batch(Batch(nodes=[l1, *nodes], commits=[commit(C2)], anchors=anchors))
    other_project = ProjectId(project.value + "-other")
    theirs = replace(mk(other_project, Level.L0, "not ours"), created_at=T0 + timedelta(99))
    store.insert_batch(
        Batch(
            nodes=[theirs],
            commits=[commit(C2)],
            anchors=[Anchor(other_project, theirs.sha256, REPO, C2, file, 11, 11)],
        )
    )
    page = store.newest_at_line(project, REPO, C2, file, 11, 4)
    assert [e.node.text for e in page.rows] == ["note 10", "note 10", "note 9", "note 8"]
    # Only the anchors read: note 10's second anchor is past the first one read.
    first = store.newest_at_line(project, REPO, C2, file, 11, 1)
    assert [(e.node.text, e.anchor.line_start) for e in first.rows] == [("note 10", 0)]
    assert first.nodes == 11
    assert page.nodes == 11  # notes 0-10 cover line 11; note 11 does not
    assert all(e.ancestors and e.ancestors[0][0].sha256 == l1.sha256 for e in page.rows)
    every = store.evidence_at_line(project, REPO, C2, file, 11)
    assert {e.node.text for e in every} == {f"note {i}" for i in range(11)}
    whole = store.newest_at_line(project, REPO, C2, file, 11, 100)
    assert sorted(map(repr, (e.anchor for e in whole.rows))) == sorted(
        map(repr, (e.anchor for e in every))
    )
    assert whole.nodes == 11


def test_anchors_for_runs_bring_commits_once_and_no_text(store: Store, project: ProjectId) -> None:
    batch, n = graph(project)
    store.insert_batch(batch)
    runs = [(C1, "src/kong/buffer.rs", 40, 44), (C1, "src/kong/buffer.rs", 40, 44)]
    runs.append((C2, "src/kong/handler.rs", 1, 9))
    anchors, commits = store.anchors_for_runs(project, REPO, runs)
    assert anchors == [(n["e1"].sha256.value, C1.value, "src/kong/buffer.rs", 42, 42)]
    assert commits == {C1.value: commit(C1)}
    assert store.anchors_for_runs(project, REPO, []) == ([], {})


def test_domain_values_are_dumped_as_their_text(store_dsn: str) -> None:
    """As query parameters, in lists, and in the text COPY of bulk writes."""
    sha = Sha256Hash("ab" * 32)
    values: list[Any] = [ProjectId("p-1"), QueryId("q:1"), RunId("run-1"), sha, REPO, C1, Level.L2]
    with psycopg.connect(store_dsn) as conn:
        register_domain_types(conn)
        for value in values:
            assert conn.execute("SELECT %s::text", (value,)).fetchone() == (value.value,)
        assert conn.execute("SELECT %s::text[]", ([sha, sha],)).fetchone() == ([sha.value] * 2,)
        conn.execute("CREATE TEMP TABLE dumped (v text)")
        with conn.cursor() as cur, cur.copy("COPY dumped (v) FROM STDIN") as copy:
            for value in values:
                copy.write_row((value,))
        stored = [r[0] for r in conn.execute("SELECT v FROM dumped").fetchall()]
    assert stored == [v.value for v in values]


@pytest.mark.parametrize("table", [NODES, COMMITS, EDGES, ANCHORS], ids=lambda t: t.name)
def test_each_table_definition_names_every_written_column(store_dsn: str, table: Table) -> None:
    with psycopg.connect(store_dsn) as conn:
        rows = conn.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = 'public' AND table_name = %s AND is_generated = 'NEVER'"
            " ORDER BY ordinal_position",
            (table.name,),
        ).fetchall()
    assert [column for column, _ in table.columns] == [r[0] for r in rows]


def test_no_query_is_put_inside_another() -> None:
    """Only table names, columns and placeholders are composed into a query, never SQL."""
    for name, text in load_queries().items():
        fields = {field for _, field, _, _ in string.Formatter().parse(text) if field}
        assert fields <= {"table", "stage", "columns", "values"}, name


def _server_pid(store: Store) -> int:
    """The backend of the store's one pooled connection (the pool's minimum is one)."""
    return int(store._connector.read(lambda conn: conn.info.backend_pid))


def test_a_lookup_is_one_statement_on_one_round_trip(
    store: Store, project: ProjectId, tmp_path: Path
) -> None:
    """The anchors, their commits, nodes and the nodes above: one statement, no BEGIN or
    COMMIT, no check of the connection. Read off libpq's trace of the pooled connection:
    each round trip ends with one Sync (extended protocol) or is one Query (simple)."""
    batch, _ = graph(project)
    store.insert_batch(batch)
    conn = store._connector.read(lambda c: c)  # the pool's one connection
    for _ in range(6):  # past psycopg's prepare threshold: the statements are prepared
        store.evidence_at_line(project, REPO, C2, "src/kong/handler.rs", 11)
        store.evidence_for_commits(project, None, [C2, C1])
    log = tmp_path / "libpq.trace"
    with log.open("w") as out:
        conn.pgconn.trace(out.fileno())
        try:
            for _ in range(10):
                assert len(store.evidence_at_line(project, REPO, C2, "src/kong/handler.rs", 11))
                assert store.evidence_for_commits(project, None, [C2, C1])
        finally:
            conn.pgconn.untrace()
    sent = [line.split("\t") for line in log.read_text().splitlines()]
    trips = [f for f in sent if len(f) > 3 and f[1] == "F" and f[3] in ("Sync", "Query")]
    assert len(trips) == 20, log.read_text()[:2000]
    assert store._connector.read(lambda c: c) is conn  # the same connection all along


def test_a_small_batch_is_written_in_three_round_trips(
    store: Store, project: ProjectId, tmp_path: Path
) -> None:
    """BEGIN, every table's rows together with the check that edges point up (a pipeline),
    and COMMIT: a hook's session costs three round trips to write, however many tables it
    fills. Read off libpq's trace of the pooled connection, as above."""
    batch, _ = graph(project)
    conn = store._connector.read(lambda c: c)
    log = tmp_path / "libpq.trace"
    with log.open("w") as out:
        conn.pgconn.trace(out.fileno())
        try:
            counts = store.insert_batch(batch)
        finally:
            conn.pgconn.untrace()
    assert counts == InsertCounts(nodes=5, edges=5, commits=2, anchors=2)
    sent = [line.split("\t") for line in log.read_text().splitlines()]
    trips = [f for f in sent if len(f) > 3 and f[1] == "F" and f[3] in ("Sync", "Query")]
    assert len(trips) == 3, log.read_text()[:2000]
    assert store.insert_batch(batch) == InsertCounts()  # counted again: nothing new


def test_a_read_on_a_connection_gone_is_run_again(
    store: Store, store_dsn: str, project: ProjectId
) -> None:
    """Connections are not checked when taken: a read whose connection the server dropped
    runs once more on a fresh one, and the caller sees only the answer."""
    batch, _ = graph(project)
    store.insert_batch(batch)
    pid = _server_pid(store)
    with psycopg.connect(store_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    [found] = store.evidence_at_line(project, REPO, C2, "src/kong/handler.rs", 11)
    assert found.anchor == batch.anchors[1]
    assert _server_pid(store) != pid


def test_a_new_connection_has_the_hot_statements_prepared(store_dsn: str) -> None:
    """Hovers and lenses find their statements prepared (and the server's caches of the
    schema filled) on a connection the pool just opened: the start did it, not the request."""
    fresh = Store(store_dsn, warm=True)
    try:
        assert fresh._connector.warm_up()
        prepared = fresh._connector.read(
            lambda conn: [r["statement"] for r in conn.execute(
                "SELECT statement FROM pg_prepared_statements"
            ).fetchall()]
        )  # fmt: skip
    finally:
        fresh.close()
    assert any("-- CHOSEN" not in s and "chosen AS MATERIALIZED" in s for s in prepared)
    assert any("The code lenses of a blamed file" in s for s in prepared)
    assert any("file_may_have_memories" in s or "could find any memory" in s for s in prepared)
    # A one-shot command's store (a hook's ingest, the CLI) does not run them.
    cold = Store(store_dsn)
    try:
        assert cold._connector.warm_up()
        assert cold._connector.read(
            lambda conn: conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
        ) == {"count": 0}
    finally:
        cold.close()


def test_the_dsn_s_own_options_are_kept(store_dsn: str) -> None:
    """The store adds its settings to a connection's options; those the DSN gives win."""
    fresh = Store(f"{store_dsn} options='-c work_mem=7MB -c jit=on'")
    try:
        shown = fresh._connector.read(
            lambda conn: [
                conn.execute(f"SHOW {name}").fetchone()[name]  # type: ignore[index]
                for name in ("work_mem", "jit", "plan_cache_mode")
            ]
        )
    finally:
        fresh.close()
    assert shown == ["7MB", "on", "auto"]


def test_expiring_pending_anchors_touches_only_the_project_named(
    store: Store, store_dsn: str
) -> None:
    """Each project's remember expires its own pending anchors; no project, every project's."""
    now = datetime.now(UTC)
    projects = [ProjectId(f"proj-exp-{k}-{now.timestamp():.0f}") for k in range(2)]

    def waiting(project: ProjectId, expires: datetime) -> PendingAnchor:
        e = mk(project, Level.L0, f"remembered before its commit ({expires.isoformat()})")
        store.insert_batch(Batch(nodes=[e]))
        return PendingAnchor(project, e.sha256, REPO, "a.py", C1, 1, (7,), now, expires)

    for project in projects:
        stale = waiting(project, now - timedelta(minutes=1))
        fresh = waiting(project, now + timedelta(days=1))
        store.insert_batch(Batch(pending=[stale, fresh]))

    def left(project: ProjectId) -> int:
        with psycopg.connect(store_dsn) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pending_anchor WHERE project = %s", (project.value,)
            ).fetchone()
        assert row is not None
        return int(row[0])

    assert store.expire_pending(projects[0]) == 1
    assert (left(projects[0]), left(projects[1])) == (1, 2)  # the other project's stale one stays
    assert store.expire_pending() >= 1
    assert (left(projects[0]), left(projects[1])) == (1, 1)  # only the unexpired ones are left


def test_candidates_chosen_from_a_prefetch_are_what_the_statement_answers(
    store: Store, project: ProjectId
) -> None:
    """A code lens reads every anchor holding one of its file's texts while the file is
    blamed, then chooses from them as ``rewrite_candidates`` would (texts, commits left out,
    those of one file first). Both answers, rows and order, for many random questions."""
    import random

    rng = random.Random(27)
    texts = list(range(1, 13))
    files = ["src/a.rs", "src/B.rs", "src/c/d.rs", "z.rs"]
    shas = [CommitSha(c * 40) for c in "3456789a"]
    nodes = [mk(project, Level.L0, f"note {i}") for i in range(6)]
    anchors = []
    for _ in range(60):
        start = rng.randrange(1, 50)
        hashes = tuple(rng.choice([*texts, None]) for _ in range(rng.randrange(1, 4)))
        anchors.append(
            Anchor(
                project, rng.choice(nodes).sha256, REPO, rng.choice(shas), rng.choice(files),
                start, start + len(hashes) - 1, line_hashes=hashes,
            )
        )  # fmt: skip
    store.insert_batch(Batch(nodes=nodes, commits=[commit(s) for s in shas], anchors=anchors))
    for _ in range(40):
        file_texts = rng.sample(texts, rng.randrange(1, len(texts)))
        known = store.rewrite_candidates(project, REPO, file_texts, [], "")
        asked = rng.sample(file_texts, rng.randrange(1, len(file_texts) + 1))
        exclude = rng.sample(shas, rng.randrange(0, 4))
        first = rng.choice([*files, "", "src/elsewhere.rs"])
        direct = store.rewrite_candidates(project, REPO, asked, exclude, first)
        assert direct, "a question with no answer checks nothing"
        assert store.candidates_among(known, asked, exclude, first) == direct
