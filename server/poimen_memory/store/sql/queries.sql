-- Named queries, loaded by poimen_memory.store.queries. Each starts with a `-- name: x` line.
-- Parameters use psycopg's %(name)s style and are always bound, never formatted in.

-- name: insert_node
INSERT INTO memory_node (project, sha256, level, query_id, run_id, t, text, created_at)
VALUES (%(project)s, %(sha256)s, %(level)s, %(query_id)s, %(run_id)s, %(t)s, %(text)s,
        %(created_at)s)
ON CONFLICT DO NOTHING;

-- name: insert_edge
INSERT INTO memory_edge (project, child_sha256, parent_sha256)
VALUES (%(project)s, %(child)s, %(parent)s)
ON CONFLICT DO NOTHING;

-- name: insert_commit
INSERT INTO git_commit (project, repo, commit_sha, message, author_name, author_email,
                        author_date)
VALUES (%(project)s, %(repo)s, %(commit_sha)s, %(message)s, %(author_name)s, %(author_email)s,
        %(author_date)s)
ON CONFLICT DO NOTHING;

-- name: insert_anchor
INSERT INTO git_anchor (project, node_sha256, repo, commit_sha, file, line_start, line_end)
VALUES (%(project)s, %(node)s, %(repo)s, %(commit_sha)s, %(file)s, %(line_start)s,
        %(line_end)s)
ON CONFLICT DO NOTHING;

-- name: create_staging
CREATE TEMP TABLE stage_node (LIKE memory_node INCLUDING DEFAULTS EXCLUDING GENERATED)
    ON COMMIT DROP;
ALTER TABLE stage_node DROP COLUMN text_tsv;
CREATE TEMP TABLE stage_edge (LIKE memory_edge) ON COMMIT DROP;
CREATE TEMP TABLE stage_commit (LIKE git_commit) ON COMMIT DROP;
CREATE TEMP TABLE stage_anchor (LIKE git_anchor) ON COMMIT DROP;

-- name: copy_node
COPY stage_node (project, sha256, level, query_id, run_id, t, text, created_at) FROM STDIN;

-- name: copy_edge
COPY stage_edge (project, child_sha256, parent_sha256) FROM STDIN;

-- name: copy_commit
COPY stage_commit (project, repo, commit_sha, message, author_name, author_email, author_date)
FROM STDIN;

-- name: copy_anchor
COPY stage_anchor (project, node_sha256, repo, commit_sha, file, line_start, line_end)
FROM STDIN;

-- name: merge_node
INSERT INTO memory_node (project, sha256, level, query_id, run_id, t, text, created_at)
SELECT project, sha256, level, query_id, run_id, t, text, created_at FROM stage_node
ON CONFLICT DO NOTHING;

-- name: merge_edge
INSERT INTO memory_edge (project, child_sha256, parent_sha256)
SELECT project, child_sha256, parent_sha256 FROM stage_edge
ON CONFLICT DO NOTHING;

-- name: merge_commit
INSERT INTO git_commit (project, repo, commit_sha, message, author_name, author_email,
                        author_date)
SELECT project, repo, commit_sha, message, author_name, author_email, author_date
FROM stage_commit
ON CONFLICT DO NOTHING;

-- name: merge_anchor
INSERT INTO git_anchor (project, node_sha256, repo, commit_sha, file, line_start, line_end)
SELECT project, node_sha256, repo, commit_sha, file, line_start, line_end FROM stage_anchor
ON CONFLICT DO NOTHING;

-- name: edges_against_levels
-- Edges of a batch that do not point strictly up (L0 -> L1 -> L2).
SELECT e.child, c.level AS child_level, e.parent, p.level AS parent_level
FROM unnest(%(children)s::text[], %(parents)s::text[]) AS e (child, parent)
JOIN memory_node c ON c.project = %(project)s AND c.sha256 = e.child
JOIN memory_node p ON p.project = %(project)s AND p.sha256 = e.parent
WHERE c.level >= p.level
LIMIT 1;

-- name: nodes_by_sha
SELECT n.sha256, n.level, n.project, n.query_id, n.run_id, n.t, n.text, n.created_at,
       ARRAY(SELECT e.parent_sha256 FROM memory_edge e
             WHERE e.project = n.project AND e.child_sha256 = n.sha256
             ORDER BY e.parent_sha256) AS parents
FROM memory_node n
WHERE n.project = %(project)s AND n.sha256 = ANY(%(shas)s::text[]);

-- name: node_levels
SELECT sha256, level FROM memory_node
WHERE project = %(project)s AND sha256 = ANY(%(shas)s::text[]);

-- name: walk_up
-- Every node above the given ones, once, with the smallest depth at which it was reached
-- and the starting nodes it was reached from. Levels bound the depth; the guard is for safety.
WITH RECURSIVE up (origin, sha256, depth) AS (
    SELECT e.child_sha256, e.parent_sha256, 1
    FROM memory_edge e
    WHERE e.project = %(project)s AND e.child_sha256 = ANY(%(shas)s::text[])
  UNION
    SELECT up.origin, e.parent_sha256, up.depth + 1
    FROM up
    JOIN memory_edge e ON e.project = %(project)s AND e.child_sha256 = up.sha256
    WHERE up.depth < 8
)
SELECT n.sha256, n.level, n.project, n.query_id, n.run_id, n.t, n.text, n.created_at,
       ARRAY(SELECT e.parent_sha256 FROM memory_edge e
             WHERE e.project = n.project AND e.child_sha256 = n.sha256
             ORDER BY e.parent_sha256) AS parents,
       r.depth,
       r.origins
FROM (
    SELECT sha256, min(depth) AS depth, array_agg(DISTINCT origin ORDER BY origin) AS origins
    FROM up
    GROUP BY sha256
) AS r
JOIN memory_node n ON n.project = %(project)s AND n.sha256 = r.sha256
ORDER BY r.depth, n.created_at DESC, n.sha256;

-- name: status_levels
SELECT level, count(*) AS n FROM memory_node GROUP BY level ORDER BY level;

-- name: status_counts
SELECT (SELECT count(*) FROM memory_edge) AS edges,
       (SELECT count(*) FROM git_anchor) AS anchors,
       (SELECT count(*) FROM git_commit) AS commits,
       (SELECT count(DISTINCT project) FROM memory_node) AS projects;
