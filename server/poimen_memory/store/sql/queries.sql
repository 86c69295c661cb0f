-- Named queries, loaded by poimen_memory.store.queries. Each starts with a `-- name: x` line.
-- Parameters use psycopg's %(name)s style and are always bound, never formatted in. The
-- {table}, {stage}, {columns} and {values} of the write queries are composed by psycopg from
-- identifiers and placeholders (store/writes.py); no query is ever put inside another.

-- name: insert_rows
-- One table's rows, one by one (a small batch).
INSERT INTO {table} ({columns}) VALUES ({values})
ON CONFLICT DO NOTHING;

-- name: create_stage
-- A temporary table with the columns a COPY fills (no generated columns, no constraints:
-- the merge into the real table checks everything).
CREATE TEMP TABLE {stage} ON COMMIT DROP AS SELECT {columns} FROM {table} WITH NO DATA;

-- name: copy_stage
COPY {stage} ({columns}) FROM STDIN;

-- name: copy_table
-- Rows that are all new, straight into the table (a row stored already fails the whole
-- COPY: the rows then go through a staging table and merge_stage).
COPY {table} ({columns}) FROM STDIN;

-- name: nodes_stored
-- Whether any of the nodes is stored already, and whether row-level security applies to this
-- role (COPY into a table refuses it): a batch of new nodes is copied straight in otherwise.
SELECT EXISTS (
    SELECT 1 FROM memory_node
    WHERE project = %(project)s AND sha256 = ANY(%(shas)s::text[])
) AS stored,
row_security_active('memory_node') OR row_security_active('memory_edge')
    OR row_security_active('git_anchor') AS secured;

-- name: merge_stage
INSERT INTO {table} ({columns}) SELECT {columns} FROM {stage}
ON CONFLICT DO NOTHING;

-- name: notify
-- Sent in the batch's transaction, so listeners hear of it exactly when it becomes visible.
SELECT pg_notify(%(channel)s, %(payload)s);

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

-- name: evidence
-- The evidence of the anchors a selector chooses, in one statement: the selector (one of the
-- anchors_* queries below) takes the place of the CHOSEN line, and its rows are numbered k
-- in its order (a numbering without an order of its own keeps its input's). Each thing is
-- sent once, in rows of four kinds, in no order (the reader puts them together):
-- 0, every chosen anchor (a row past %(page)s only says that more follow);
-- 2, each commit of the first %(page)s anchors, once, where it is stored;
-- 3, each L0 node of those anchors, once, where it is stored;
-- 1, each node above those L0 nodes, once, with the L0 nodes it is above (origins) and its
-- nearest depth from each, walked once per L0 node however many anchors it has, and its
-- parents (the edges among them: edges point up a level at a time, so a walk of 8 sees
-- them all).
WITH RECURSIVE chosen AS MATERIALIZED (
    SELECT s.*, row_number() OVER () AS k
    FROM (
        -- CHOSEN
    ) AS s
),
l0 AS MATERIALIZED (
    SELECT DISTINCT node_sha256 AS sha256 FROM chosen WHERE k <= %(page)s
),
walk (origin, child, sha256, depth) AS (
    SELECT e.child_sha256, e.child_sha256, e.parent_sha256, 1
    FROM l0
    JOIN memory_edge e ON e.project = %(project)s AND e.child_sha256 = l0.sha256
  UNION
    SELECT w.origin, e.child_sha256, e.parent_sha256, w.depth + 1
    FROM walk w
    JOIN memory_edge e ON e.project = %(project)s AND e.child_sha256 = w.sha256
    WHERE w.depth < 8
),
above AS (
    SELECT origin, sha256, min(depth) AS depth FROM walk GROUP BY origin, sha256
),
edge AS (  -- a parent may come twice (walked from two nodes): a node's parents are a set
    SELECT child, array_agg(sha256) AS parents FROM walk GROUP BY child
)
SELECT 0 AS kind, ch.k, ch.node_sha256, ch.repo, ch.commit_sha, ch.file, ch.line_start,
       ch.line_end, NULL::text AS message, NULL::text AS author_name,
       NULL::text AS author_email, NULL::timestamptz AS author_date, NULL::text AS sha256,
       NULL::text AS level, NULL::text AS project, NULL::text AS query_id,
       NULL::text AS run_id, NULL::int AS t, NULL::text AS text,
       NULL::timestamptz AS created_at, NULL::text[] AS origins, NULL::int[] AS depths,
       NULL::text[] AS parents
FROM chosen ch
UNION ALL
-- Each by its key (a lateral lookup: the planner cannot know how few anchors were chosen,
-- and would hash a whole table of commits for them).
SELECT 2, NULL, NULL, d.repo, c.commit_sha, NULL, NULL, NULL, c.message, c.author_name,
       c.author_email, c.author_date, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL
FROM (SELECT DISTINCT repo, commit_sha FROM chosen WHERE k <= %(page)s) AS d
CROSS JOIN LATERAL (
    SELECT c.commit_sha, c.message, c.author_name, c.author_email, c.author_date
    FROM git_commit c
    WHERE c.project = %(project)s AND c.repo = d.repo AND c.commit_sha = d.commit_sha
    LIMIT 1  -- the key: at most one row; the limit keeps the lookup a lookup
) AS c
UNION ALL
SELECT 3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       n.sha256, n.level, n.project, n.query_id, n.run_id, n.t, n.text, n.created_at, NULL,
       NULL, NULL
FROM l0
CROSS JOIN LATERAL (
    SELECT n.sha256, n.level, n.project, n.query_id, n.run_id, n.t, n.text, n.created_at
    FROM memory_node n
    WHERE n.project = %(project)s AND n.sha256 = l0.sha256
    LIMIT 1
) AS n
UNION ALL
SELECT 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       p.sha256, p.level, p.project, p.query_id, p.run_id, p.t, p.text, p.created_at,
       r.origins, r.depths, coalesce(g.parents, '{}')
FROM (SELECT sha256, array_agg(origin) AS origins, array_agg(depth) AS depths  -- paired
      FROM above GROUP BY sha256) AS r
JOIN memory_node p ON p.project = %(project)s AND p.sha256 = r.sha256
LEFT JOIN edge g ON g.child = r.sha256;

-- name: anchors_given
-- Anchors the caller chose, one array per column (for the evidence query).
SELECT * FROM unnest(%(node_sha256)s::text[], %(repo)s::text[], %(commit_sha)s::text[],
                     %(file)s::text[], %(line_start)s::int[], %(line_end)s::int[])
     AS a (node_sha256, repo, commit_sha, file, line_start, line_end);

-- name: anchors_line
-- The anchors_* queries choose anchors for the evidence query above (and anchors_runs for the
-- code lenses): the first max_anchors of them, in the order each states.
-- Anchors at (repo, commit, file) covering one line, by (line_start, node); with
-- %(newest)s, newest memory first (by its node's created_at: a hover reads the first few in
-- full and counts the rest; without it, no node is looked up here). Anchors are short, so
-- the scan of line_start is bounded below by the longest anchor of the repository (an index
-- lookup).
SELECT a.node_sha256, a.repo, a.commit_sha, a.file, a.line_start, a.line_end
FROM (
    SELECT a.node_sha256, a.repo, a.commit_sha, a.file, a.line_start, a.line_end
    FROM git_anchor a
    WHERE a.project = %(project)s AND a.repo = %(repo)s AND a.commit_sha = %(commit_sha)s
      AND a.file = %(file)s
      AND a.line_start BETWEEN %(line)s - (
            SELECT s.line_end - s.line_start FROM git_anchor s
            WHERE s.project = %(project)s AND s.repo = %(repo)s
            ORDER BY s.line_end - s.line_start DESC LIMIT 1)
          AND %(line)s
      AND a.line_end >= %(line)s
    UNION ALL
    SELECT a.node_sha256, a.repo, a.commit_sha, a.file, a.line_start, a.line_end
    FROM git_anchor a
    WHERE a.project = %(project)s AND a.repo = %(repo)s AND a.commit_sha = %(commit_sha)s
      AND a.file = %(file)s AND a.line_start = 0
) AS a
LEFT JOIN LATERAL (
    SELECT n.created_at FROM memory_node n
    WHERE %(newest)s AND n.project = %(project)s AND n.sha256 = a.node_sha256
    LIMIT 1
) AS n ON true
ORDER BY n.created_at DESC NULLS LAST, a.line_start, a.node_sha256, a.line_end
LIMIT %(max_anchors)s;

-- name: anchors_runs
-- Anchors overlapping runs of original lines (commit, file, first, last): what blame says
-- the lines of a range or a whole document came from. Whole-file anchors of those files too.
SELECT DISTINCT a.node_sha256, a.repo, a.commit_sha, a.file, a.line_start, a.line_end
FROM unnest(%(commits)s::text[], %(files)s::text[], %(starts)s::int[], %(ends)s::int[])
     AS r (commit_sha, file, s, e)
JOIN git_anchor a
  ON a.project = %(project)s AND a.repo = %(repo)s
 AND a.commit_sha = r.commit_sha AND a.file = r.file
 AND a.line_start BETWEEN r.s - (
        SELECT s.line_end - s.line_start FROM git_anchor s
        WHERE s.project = %(project)s AND s.repo = %(repo)s
        ORDER BY s.line_end - s.line_start DESC LIMIT 1)
     AND r.e
 AND a.line_end >= r.s
UNION
SELECT a.node_sha256, a.repo, a.commit_sha, a.file, a.line_start, a.line_end
FROM (SELECT DISTINCT * FROM unnest(%(commits)s::text[], %(files)s::text[])) AS p (commit_sha, file)
JOIN git_anchor a
  ON a.project = %(project)s AND a.repo = %(repo)s
 AND a.commit_sha = p.commit_sha AND a.file = p.file AND a.line_start = 0
ORDER BY commit_sha, file, line_start, node_sha256, line_end
LIMIT %(max_anchors)s;

-- name: lens_blocks
-- The code lenses of a blamed file, worked out here rather than anchor by anchor. In: runs of
-- blamed lines (commit, original file, first original line, first current line, length),
-- each run consecutive current lines from consecutive lines of one file at one commit. An
-- anchor covers the current lines whose origin is among its lines (a whole-file anchor: all
-- lines from its file). A memory is an L0 node at a commit, cited by its first covering
-- anchor by (file, line_start, line_end). On a line, memories come in the order of the first
-- anchor of each covering the line, as anchors_runs orders anchors: all of them are at the
-- line's origin commit and file, so by (line_start, node). Out: one row per block, a maximal
-- range of consecutive current lines with the same memories in the same order: first line,
-- last line, and the memories' ids (1, 2, ... by node and commit); the first row also has
-- every memory, by id, as arrays (node, commit, and the citation's file and lines).
WITH run AS (
    SELECT * FROM unnest(%(commits)s::text[], %(files)s::text[], %(orig_starts)s::int[],
                         %(starts)s::int[], %(lengths)s::int[]) WITH ORDINALITY
         AS r (commit_sha, file, orig_first, first_line, n, k)
),
hit AS MATERIALIZED (
    -- Each anchor over each run it overlaps, with the current lines it covers there, the id
    -- of its memory, and the last line an earlier anchor of the memory covers in that run
    -- (earlier by line_start: in a run, current lines keep the order of original ones).
    SELECT u.*, dense_rank() OVER (ORDER BY u.node_sha256, u.commit_sha) AS id,
           max(u.last_line) OVER (PARTITION BY u.node_sha256, u.commit_sha, u.k
                                  ORDER BY u.line_start, u.line_end
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
    FROM (
        -- Anchors are short: line_start is scanned from the longest anchor back.
        SELECT a.node_sha256, a.commit_sha, a.file, a.line_start, a.line_end, r.k,
               r.first_line + (greatest(a.line_start, r.orig_first) - r.orig_first)
                   AS first_line,
               r.first_line + (least(a.line_end, r.orig_first + r.n - 1) - r.orig_first)
                   AS last_line
        FROM run r
        JOIN git_anchor a
          ON a.project = %(project)s AND a.repo = %(repo)s
         AND a.commit_sha = r.commit_sha AND a.file = r.file
         AND a.line_start BETWEEN greatest(1, r.orig_first - (
                SELECT s.line_end - s.line_start FROM git_anchor s
                WHERE s.project = %(project)s AND s.repo = %(repo)s
                ORDER BY s.line_end - s.line_start DESC LIMIT 1))
             AND r.orig_first + r.n - 1
         AND a.line_end >= r.orig_first
      UNION ALL
        SELECT a.node_sha256, a.commit_sha, a.file, a.line_start, a.line_end, r.k,
               r.first_line, r.first_line + r.n - 1
        FROM (SELECT DISTINCT * FROM unnest(%(commits)s::text[], %(files)s::text[]))
             AS p (commit_sha, file)
        JOIN git_anchor a
          ON a.project = %(project)s AND a.repo = %(repo)s
         AND a.commit_sha = p.commit_sha AND a.file = p.file AND a.line_start = 0
        JOIN run r ON r.commit_sha = a.commit_sha AND r.file = a.file
    ) AS u
),
line AS (
    -- The memories of each line, each placed by its first anchor covering the line: the
    -- lines an anchor covers less those an earlier anchor of its memory already covers.
    SELECT line, array_agg(id ORDER BY place, id) AS ids
    FROM (SELECT l.line, h.id, h.line_start AS place
          FROM hit h
          CROSS JOIN LATERAL generate_series(
              CASE WHEN h.before >= h.first_line THEN h.before + 1 ELSE h.first_line END,
              h.last_line) AS l (line)) AS o
    GROUP BY line
),
edge AS (
    -- The lines that open or close a block.
    SELECT *
    FROM (SELECT line, ids,
                 coalesce(lag(line) OVER w <> line - 1 OR lag(ids) OVER w <> ids, true) AS opens,
                 coalesce(lead(line) OVER w <> line + 1 OR lead(ids) OVER w <> ids, true)
                     AS closes
          FROM line
          WINDOW w AS (ORDER BY line)) AS e
    WHERE opens OR closes
),
block AS (
    SELECT first_line, last_line, ids
    FROM (SELECT line AS first_line, opens, ids,
                 CASE WHEN closes THEN line ELSE lead(line) OVER (ORDER BY line) END AS last_line
          FROM edge) AS b
    WHERE opens
),
memory AS MATERIALIZED (
    -- Every memory by id, with the anchor it is cited by (computed once, not per block).
    -- The arrays take the rows in the order the subquery sorted them (by id): an ORDER BY
    -- in each aggregate sorted every memory five times more (PostgreSQL before 16 does not
    -- see that its input is sorted already).
    SELECT array_agg(node_sha256) AS nodes,
           array_agg(commit_sha) AS commits,
           array_agg(file) AS files,
           array_agg(line_start) AS line_starts,
           array_agg(line_end) AS line_ends
    FROM (SELECT DISTINCT ON (id) id, node_sha256, commit_sha, file, line_start, line_end
          FROM hit
          ORDER BY id, file, line_start, line_end) AS c
)
SELECT first_line, last_line, ids,
       CASE WHEN first THEN (SELECT nodes FROM memory) END AS nodes,
       CASE WHEN first THEN (SELECT commits FROM memory) END AS commits,
       CASE WHEN first THEN (SELECT files FROM memory) END AS files,
       CASE WHEN first THEN (SELECT line_starts FROM memory) END AS line_starts,
       CASE WHEN first THEN (SELECT line_ends FROM memory) END AS line_ends
-- (OFFSET 0 keeps ``first`` computed once per block: pulled up, the subquery's scan of every
-- hit ran once for each of the five columns.)
FROM (SELECT *, first_line = (SELECT min(first_line) FROM hit) AS first FROM block OFFSET 0) AS b
ORDER BY first_line;

-- name: anchors_commits
-- The commits' rows first (one per repository holding them), then their anchors by primary
-- key: git_anchor's keys start (project, repo, ...), so without a repository a filter on
-- git_anchor.commit_sha alone scans every anchor of the project. A page: the anchors after
-- the last one of the previous page (after_*, all NULL for the first), in key order.
SELECT a.node_sha256, a.repo, a.commit_sha, a.file, a.line_start, a.line_end
FROM git_commit g
JOIN git_anchor a
  ON a.project = g.project AND a.repo = g.repo AND a.commit_sha = g.commit_sha
WHERE g.project = %(project)s AND g.commit_sha = ANY(%(commits)s::text[])
  AND (%(repo)s::text IS NULL OR g.repo = %(repo)s)
  AND (%(after_repo)s::text IS NULL
       OR (a.repo, a.commit_sha, a.file, a.line_start, a.line_end, a.node_sha256)
          > (%(after_repo)s::text, %(after_commit)s::text, %(after_file)s::text,
             %(after_start)s::int, %(after_end)s::int, %(after_node)s::text))
ORDER BY a.repo, a.commit_sha, a.file, a.line_start, a.line_end, a.node_sha256
LIMIT %(max_anchors)s;

-- name: anchors_author
-- The author's newest commits first, walked one commit at a time until max_anchors anchors:
-- a prolific author's hundreds of thousands of anchors are never sorted. The inner LIMIT keeps
-- the per-commit lookup a nested loop in key order (a plain join is planned as a hash join,
-- which takes anchors in table order, not the newest commits'); the outer ORDER BY states
-- the order, which that plan already has up to the commit (an incremental sort within one).
-- A page: the anchors after the last one of the previous page (after_*, all NULL for the
-- first) in that order; author_date is returned for the next page's cursor.
SELECT a.node_sha256, a.repo, a.commit_sha, a.file, a.line_start, a.line_end, g.author_date
FROM (
    SELECT g.project, g.repo, g.commit_sha, g.author_date FROM git_commit g
    WHERE g.project = %(project)s
      AND (%(repo)s::text IS NULL OR g.repo = %(repo)s)
      AND (lower(g.author_email) = ANY(%(authors)s::text[])
           OR lower(g.author_name) = ANY(%(authors)s::text[]))
      AND (%(after_date)s::timestamptz IS NULL
           OR g.author_date < %(after_date)s::timestamptz
           OR (g.author_date = %(after_date)s::timestamptz
               AND (g.commit_sha, g.repo) >= (%(after_commit)s::text, %(after_repo)s::text)))
    ORDER BY g.author_date DESC, g.commit_sha, g.repo
) AS g
CROSS JOIN LATERAL (
    SELECT x.node_sha256, x.repo, x.commit_sha, x.file, x.line_start, x.line_end
    FROM git_anchor x
    WHERE x.project = g.project AND x.repo = g.repo AND x.commit_sha = g.commit_sha
      AND (%(after_date)s::timestamptz IS NULL
           OR (g.author_date, g.commit_sha, g.repo)
              <> (%(after_date)s::timestamptz, %(after_commit)s::text, %(after_repo)s::text)
           OR (x.file, x.line_start, x.line_end, x.node_sha256)
              > (%(after_file)s::text, %(after_start)s::int, %(after_end)s::int,
                 %(after_node)s::text))
    ORDER BY x.file, x.line_start, x.line_end, x.node_sha256
    LIMIT %(max_anchors)s
) AS a
ORDER BY g.author_date DESC, g.commit_sha, g.repo, a.file, a.line_start, a.line_end,
         a.node_sha256
LIMIT %(max_anchors)s;

-- name: anchors_nodes
SELECT a.node_sha256, a.repo, a.commit_sha, a.file, a.line_start, a.line_end
FROM git_anchor a
WHERE a.project = %(project)s AND a.node_sha256 = ANY(%(shas)s::text[])
  AND (%(repo)s::text IS NULL OR a.repo = %(repo)s)
ORDER BY a.commit_sha, a.file, a.line_start, a.node_sha256
LIMIT %(max_anchors)s;

-- name: commits_by_sha
-- The metadata of commits of one repository (what code lenses show: authors, summaries).
SELECT commit_sha, message, author_name, author_email, author_date FROM git_commit
WHERE project = %(project)s AND repo = %(repo)s AND commit_sha = ANY(%(commits)s::text[]);

-- name: allow_slow_statements
-- For the rest of the transaction: a whole file's anchors may take longer than a hover may.
SET LOCAL statement_timeout = 30000;

-- name: ping
SELECT 1;

-- name: commits_by_prefix
SELECT DISTINCT commit_sha FROM git_commit
WHERE project = %(project)s AND (%(repo)s::text IS NULL OR repo = %(repo)s)
  AND commit_sha LIKE %(prefix)s || '%%'
ORDER BY commit_sha
LIMIT 2;

-- name: search
-- Full-text search over node text, best first.
SELECT n.sha256, n.level, n.project, n.query_id, n.run_id, n.t, n.text, n.created_at,
       ARRAY(SELECT e.parent_sha256 FROM memory_edge e
             WHERE e.project = n.project AND e.child_sha256 = n.sha256
             ORDER BY e.parent_sha256) AS parents,
       ts_rank_cd(n.text_tsv, q) AS rank
FROM memory_node n, websearch_to_tsquery('english'::regconfig, %(query)s) AS q
WHERE n.project = %(project)s AND n.text_tsv @@ q
ORDER BY rank DESC, n.created_at DESC, n.sha256
LIMIT %(limit)s;

-- name: evidence_below
-- For each given node, the L0 nodes at or below it (walking edges down), so that search
-- results at L1/L2 can be cited by the evidence they were built from.
WITH RECURSIVE down (top, sha256, depth) AS (
    SELECT s, s, 0 FROM unnest(%(shas)s::text[]) AS s
  UNION
    SELECT d.top, e.child_sha256, d.depth + 1
    FROM down d
    JOIN memory_edge e ON e.project = %(project)s AND e.parent_sha256 = d.sha256
    WHERE d.depth < 8
)
SELECT DISTINCT d.top, d.sha256
FROM down d
JOIN memory_node n ON n.project = %(project)s AND n.sha256 = d.sha256 AND n.level = 'L0';

-- name: rewrite_candidates
-- Anchors in the repository holding a line whose text hash is one of the given ones (one
-- GIN probe), with their commit's patch id and date: what lines with no anchor at their
-- origin may have been recorded as before their commit was rewritten. Those in `file` come
-- first; the origin commits themselves (`exclude`) are left out. The caller decides; nothing
-- here is a match yet.
SELECT a.node_sha256, a.commit_sha, a.file, a.line_start, a.line_end, a.line_hashes,
       a.added_from, c.patch_id, c.author_date
FROM git_anchor a
JOIN git_commit c
  ON c.project = a.project AND c.repo = a.repo AND c.commit_sha = a.commit_sha
WHERE a.project = %(project)s AND a.repo = %(repo)s
  AND a.line_hashes IS NOT NULL AND a.line_hashes && %(hashes)s::bigint[]
  AND a.commit_sha <> ALL(%(exclude)s::text[])
ORDER BY a.file = %(file)s DESC, a.commit_sha, a.file, a.line_start, a.node_sha256
LIMIT %(max_anchors)s;

-- name: insert_aliases
INSERT INTO commit_alias (project, repo, new_commit, old_commit, how)
SELECT %(project)s, %(repo)s, x.new_commit, x.old_commit, x.how
FROM unnest(%(new)s::text[], %(old)s::text[], %(how)s::text[]) AS x (new_commit, old_commit, how)
ON CONFLICT DO NOTHING;

-- name: analyze_anchors
-- Fresh planner statistics after a large ingest, so lookups by line text use their index at
-- once rather than when autovacuum gets to it (skipped with a warning if not the owner).
ANALYZE git_anchor, git_commit;

-- name: blame_put_file
-- The header of a shared blame (store.blames), inserted or replaced; its runs follow in the
-- same transaction. Also draws the put's number from the sequence every process shares: each
-- so many puts, one checks the cache's bound.
INSERT INTO blame_file AS b
    (project, repo, path, commit_sha, fingerprint, blob_id, line_count, run_count, commits,
     est_bytes)
VALUES (%(project)s, %(repo)s, %(path)s, %(commit)s, %(fingerprint)s, %(blob_id)s,
        %(line_count)s, %(run_count)s, %(commits)s, %(est_bytes)s)
ON CONFLICT (project, repo, path, fingerprint, commit_sha) DO UPDATE
SET blob_id = EXCLUDED.blob_id, line_count = EXCLUDED.line_count,
    run_count = EXCLUDED.run_count, commits = EXCLUDED.commits,
    est_bytes = EXCLUDED.est_bytes, used_at = now()
RETURNING b.id, nextval('blame_put_seq') AS put_no;

-- name: blame_delete_runs
-- The runs a replaced blame had (a statement of its own: it must see runs committed while
-- blame_put_file waited for the header's lock).
DELETE FROM blame_run WHERE project = %(project)s AND file_id = %(file_id)s;

-- name: blame_put_runs
-- A run's line_start: 1 plus the lengths of the runs before it.
INSERT INTO blame_run
    (project, file_id, seq, line_start, orig_commit, orig_path, orig_start, length)
SELECT %(project)s, %(file_id)s, r.n - 1, 1 + sum(r.length) OVER (ORDER BY r.n) - r.length,
       r.orig_commit, r.orig_path, r.orig_start, r.length
FROM unnest(%(orig_commit)s::text[], %(orig_path)s::text[], %(orig_start)s::int[],
            %(length)s::int[]) WITH ORDINALITY AS r (orig_commit, orig_path, orig_start, length, n);

-- name: blame_get
-- One blame with its runs as arrays in order, in one round trip. Marks it used, but only when
-- its mark is older than touch_after_s seconds: most reads write nothing.
WITH f AS (
    SELECT id, blob_id, line_count, run_count, commits, used_at
    FROM blame_file
    WHERE project = %(project)s AND repo = %(repo)s AND path = %(path)s
      AND fingerprint = %(fingerprint)s AND commit_sha = %(commit)s
), touched AS (
    UPDATE blame_file b SET used_at = now()
    FROM f
    WHERE b.project = %(project)s AND b.id = f.id
      AND f.used_at < now() - make_interval(secs => %(touch_after_s)s::float8)
)
SELECT f.blob_id, f.line_count, f.run_count, f.commits,
       r.orig_commits, r.orig_paths, r.orig_starts, r.lengths
FROM f
CROSS JOIN LATERAL (
    SELECT coalesce(array_agg(r.orig_commit ORDER BY r.seq), '{}') AS orig_commits,
           coalesce(array_agg(r.orig_path ORDER BY r.seq), '{}') AS orig_paths,
           coalesce(array_agg(r.orig_start ORDER BY r.seq), '{}') AS orig_starts,
           coalesce(array_agg(r.length ORDER BY r.seq), '{}') AS lengths
    FROM blame_run r
    WHERE r.project = %(project)s AND r.file_id = f.id
) r;

-- name: blame_line
-- One line of each stored blame of (repo, path, fingerprint) whose file is the blob
-- %(blob_id)s (which commit's is the caller's to choose): the last run starting at or before
-- the line, by one probe of (file, line_start) rather than the file's runs (the caller checks
-- that the run holds the line); NULLs when none does. Marks the blames used, as blame_get.
WITH f AS (
    SELECT id, commit_sha, line_count, used_at
    FROM blame_file
    WHERE project = %(project)s AND repo = %(repo)s AND path = %(path)s
      AND fingerprint = %(fingerprint)s AND blob_id = %(blob_id)s
    LIMIT 8
), touched AS (
    UPDATE blame_file b SET used_at = now()
    FROM f
    WHERE b.project = %(project)s AND b.id = f.id
      AND f.used_at < now() - make_interval(secs => %(touch_after_s)s::float8)
)
SELECT f.commit_sha, f.line_count, r.line_start, r.length, r.orig_commit, r.orig_path,
       r.orig_start
FROM f
LEFT JOIN LATERAL (
    SELECT r.line_start, r.length, r.orig_commit, r.orig_path, r.orig_start
    FROM blame_run r
    WHERE r.project = %(project)s AND r.file_id = f.id AND r.line_start <= %(line)s
    ORDER BY r.line_start DESC
    LIMIT 1
) AS r ON true;

-- name: blame_at_commits
-- Which of the given commits have a stored blame of (repo, path, fingerprint): one range of
-- the key's index.
SELECT commit_sha
FROM blame_file
WHERE project = %(project)s AND repo = %(repo)s AND path = %(path)s
  AND fingerprint = %(fingerprint)s AND commit_sha = ANY(%(commits)s::text[]);

-- name: blame_of_path
-- Whether any blame of (repo, path, fingerprint) is stored: one probe of the key's index.
SELECT EXISTS (SELECT 1 FROM blame_file
               WHERE project = %(project)s AND repo = %(repo)s AND path = %(path)s
                 AND fingerprint = %(fingerprint)s) AS present;

-- name: blame_evict_lock
-- Only one process evicts at a time (two deleting the same rows in another order could
-- deadlock); the others find the lock taken and leave it to that one.
SELECT pg_try_advisory_xact_lock(%(key)s) AS got;

-- name: blame_evict
-- Keep the most recently used files while both their number and their runs stay within the
-- bound; delete the rest (their runs go with them). Reads only the headers.
WITH ranked AS (
    SELECT project, id,
           row_number() OVER newest AS files_upto,
           sum(run_count) OVER newest AS runs_upto
    FROM blame_file
    WINDOW newest AS (ORDER BY used_at DESC, id DESC ROWS UNBOUNDED PRECEDING)
)
DELETE FROM blame_file b
USING ranked k
WHERE b.project = k.project AND b.id = k.id
  AND (k.files_upto > %(max_files)s OR k.runs_upto > %(max_runs)s);

-- name: blame_status
-- The shared blame cache's size for `mem db status`, from the headers' run counts.
SELECT count(*) AS files, coalesce(sum(run_count), 0) AS runs FROM blame_file;

-- name: blame_cache_present
-- Whether the schema has the shared blame cache (a database not migrated to it has none).
SELECT to_regclass('blame_file') IS NOT NULL AS present;

-- name: pending_present
SELECT to_regclass('pending_anchor') IS NOT NULL AS present;

-- name: pending_count
SELECT count(*) AS n FROM pending_anchor WHERE expires_at > now();

-- name: pending_files
-- The files of a repository where nodes wait for their lines to be committed.
SELECT DISTINCT file FROM pending_anchor
WHERE project = %(project)s AND repo = %(repo)s AND expires_at > now()
ORDER BY file;

-- name: pending_repos
-- Every (project, repository) with something pending (one project, or all when NULL).
SELECT DISTINCT project, repo FROM pending_anchor
WHERE (%(project)s::text IS NULL OR project = %(project)s) AND expires_at > now()
ORDER BY project, repo;

-- name: pending_in_file
SELECT project, node_sha256, repo, file, base_commit, line_start, line_hashes, recorded_at,
       expires_at
FROM pending_anchor
WHERE project = %(project)s AND repo = %(repo)s AND file = %(file)s AND expires_at > now()
ORDER BY recorded_at, node_sha256, line_start;

-- name: settle_pending
-- The pending rows whose lines were found in a commit (each by its line hashes, given as
-- comma-separated text; NULL: every row of the node in the file). A row placed in part is
-- settled: its lines that were not found were changed before that commit, and the memory
-- does not describe them. Other rows wait on (a commit may hold them later: git add -p).
DELETE FROM pending_anchor p
USING unnest(%(nodes)s::text[], %(files)s::text[], %(hashes)s::text[]) AS s (node, file, hashes)
WHERE p.project = %(project)s AND p.repo = %(repo)s AND p.node_sha256 = s.node
  AND p.file = s.file
  AND (s.hashes IS NULL OR array_to_string(p.line_hashes, ',') = s.hashes);

-- name: expire_pending
-- The expired pending anchors of one project (of every project when project is NULL).
DELETE FROM pending_anchor
WHERE (%(project)s::text IS NULL OR project = %(project)s) AND expires_at <= now();

-- name: anchors_file_lines
-- Anchors of a file, as stored, covering lines first..last (0: the whole file) in any commit
-- (of one repository, or of any when repo is NULL), newest commit first: the literal lookup
-- by (file, line) of a server that has no work tree of the repository to blame.
SELECT a.node_sha256, a.repo, a.commit_sha, a.file, a.line_start, a.line_end
FROM git_anchor a
JOIN git_commit c
  ON c.project = a.project AND c.repo = a.repo AND c.commit_sha = a.commit_sha
WHERE a.project = %(project)s AND (%(repo)s::text IS NULL OR a.repo = %(repo)s)
  AND a.file = %(file)s
  AND (%(first)s::int = 0 OR a.line_start = 0
       OR (a.line_start <= %(last)s::int AND a.line_end >= %(first)s::int))
ORDER BY c.author_date DESC, a.commit_sha, a.repo, a.line_start, a.line_end, a.node_sha256
LIMIT %(max_anchors)s;

-- name: file_may_have_memories
-- Whether a lookup of a file could find any memory of the project, answered without a blame:
-- through an anchor at that path (any commit), a pending anchor there, or an anchor anywhere
-- in the repository holding one of the file's line texts (a line blamed to another path,
-- after a rename, or a rewritten commit's candidate: those are found by text). Each is one
-- index probe; false only when none of them finds a row. Also where the lines of the
-- anchors whose texts are not known or too short to tell (a whole-file anchor, a closing
-- brace) were when recorded, for at most %(limit)s anchors (one more: there are more): the
-- caller decides whether those lines could be in this file (renamed since).
SELECT EXISTS (SELECT 1 FROM git_anchor a
               WHERE a.project = %(project)s AND a.file = %(file)s AND a.repo = %(repo)s)
    OR EXISTS (SELECT 1 FROM pending_anchor p
               WHERE p.project = %(project)s AND p.repo = %(repo)s AND p.file = %(file)s)
    OR EXISTS (SELECT 1 FROM git_anchor a
               WHERE a.project = %(project)s AND a.repo = %(repo)s
                 AND a.line_hashes IS NOT NULL AND a.line_hashes && %(hashes)s::bigint[])
    AS may,
    ARRAY(SELECT coalesce(a.found_in, a.file) FROM git_anchor a
          WHERE a.project = %(project)s AND a.repo = %(repo)s AND a.line_hashes IS NULL
          LIMIT %(limit)s + 1) AS untexted;

-- name: repo_known
-- Whether a project has memories anchored in a repository (one probe of git_commit's key).
SELECT EXISTS (
    SELECT 1 FROM git_commit WHERE project = %(project)s AND repo = %(repo)s
) AS known;

-- name: project_repos
-- Some of the repositories a project has memories in (to name them in an error).
SELECT DISTINCT repo FROM git_commit WHERE project = %(project)s ORDER BY repo LIMIT %(limit)s;

-- name: may_set_role_projects
-- Whether the current role may change role_project (which projects a role sees): row-level
-- security lets only the table's owner (or a role with its privileges), a superuser or a role
-- that bypasses it write there; anyone else's changes would do nothing, silently.
SELECT pg_has_role(current_user, c.relowner, 'USAGE') OR r.rolsuper OR r.rolbypassrls AS may
FROM pg_class c, pg_roles r
WHERE c.oid = 'public.role_project'::regclass AND r.rolname = current_user;
