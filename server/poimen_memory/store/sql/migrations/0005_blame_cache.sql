-- The shared blame cache: whole-file `git blame` results, stored once so that a teammate's
-- first hover on a file at a commit anyone has blamed costs one query (store.blames).
--
-- A blame file is keyed by (repo, path, commit_sha, fingerprint): commit_sha is the last
-- commit that touched the path, fingerprint a digest of the blame flags, .mailmap and
-- ignore-revs. blob_id is the file's blob at that commit: a reader uses a row only when its
-- own repository has the same blob. Like every table, both lead their keys with `project`.
--
-- Bounded: the store evicts the least recently used files (used_at) beyond a number of files
-- and of runs (run_count, kept here so neither the bound nor `mem db status` counts
-- blame_run). used_at is deliberately not indexed: a read that marks it is then a HOT update
-- (fillfactor leaves the room), and eviction sorts the few thousand headers when it runs.
CREATE TABLE blame_file (
    project      text        NOT NULL,
    id           bigint      GENERATED ALWAYS AS IDENTITY,
    repo         text        NOT NULL CHECK (repo <> ''),
    path         text        NOT NULL CHECK (path <> '' AND path !~ '(^|/)\.{0,2}(/|$)'),
    commit_sha   text        NOT NULL CHECK (commit_sha ~ '^[0-9a-f]{40}([0-9a-f]{24})?$'),
    fingerprint  text        NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{32}$'),
    blob_id      text        NOT NULL CHECK (blob_id ~ '^[0-9a-f]{40}([0-9a-f]{24})?$'),
    line_count   integer     NOT NULL CHECK (line_count >= 0),
    run_count    integer     NOT NULL CHECK (run_count >= 0 AND run_count <= line_count),
    -- [[sha, author_name, author_email, author_time (epoch s), summary, boundary], ...]
    commits      jsonb       NOT NULL CHECK (jsonb_typeof(commits) = 'array'),
    est_bytes    bigint      NOT NULL CHECK (est_bytes >= 0),
    created_at   timestamptz NOT NULL DEFAULT now(),
    used_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, id),
    -- The key; its order also serves "which of these commits have a blame of (repo, path,
    -- fingerprint)" (blames_at) with one index range.
    CONSTRAINT blame_file_key UNIQUE (project, repo, path, fingerprint, commit_sha)
) WITH (fillfactor = 90);

-- A blame file's lines as runs, in order (seq from 0): lines i..i+length-1 of the file come
-- from lines orig_start..orig_start+length-1 of orig_path at orig_commit.
CREATE TABLE blame_run (
    project      text    NOT NULL,
    file_id      bigint  NOT NULL,
    seq          integer NOT NULL CHECK (seq >= 0),
    orig_commit  text    NOT NULL CHECK (orig_commit ~ '^[0-9a-f]{40}([0-9a-f]{24})?$'),
    orig_path    text    NOT NULL CHECK (orig_path <> '' AND orig_path !~ '(^|/)\.{0,2}(/|$)'),
    orig_start   integer NOT NULL CHECK (orig_start >= 1),
    length       integer NOT NULL CHECK (length >= 1),
    PRIMARY KEY (project, file_id, seq),
    FOREIGN KEY (project, file_id) REFERENCES blame_file (project, id) ON DELETE CASCADE
);

-- Counts the puts of every process sharing the store: every so many puts, one of them checks
-- the bound (no put counts the table).
CREATE SEQUENCE blame_put_seq;

-- Lookups by commit without a repository (by-commit's anchors, commits by prefix): the
-- primary key of git_commit starts (project, repo, ...). text_pattern_ops serves
-- commit_sha LIKE 'prefix%' whatever the database's collation.
CREATE INDEX git_commit_sha_idx ON git_commit (project, commit_sha text_pattern_ops);
