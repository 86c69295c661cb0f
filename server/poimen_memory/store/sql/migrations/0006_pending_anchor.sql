-- Memories an agent recorded on lines it had not committed yet (`remember`): the node waits,
-- keyed by the hash of each line's text, for a commit after `base_commit` that holds those
-- lines; they then become git_anchor rows at the lines' origin, and the pending row goes.
-- base_commit is '' in a repository with no commit yet. Rows past expires_at are never used
-- and are deleted by `mem db resolve-pending` and by the next `remember`.
CREATE TABLE pending_anchor (
    project      text        NOT NULL,
    node_sha256  text        NOT NULL,
    repo         text        NOT NULL CHECK (repo <> ''),
    file         text        NOT NULL CHECK (file <> '' AND file !~ '(^|/)\.{0,2}(/|$)'),
    base_commit  text        NOT NULL CHECK (base_commit ~ '^([0-9a-f]{40}([0-9a-f]{24})?)?$'),
    line_start   integer     NOT NULL CHECK (line_start >= 1),
    line_hashes  bigint[]    NOT NULL CHECK (cardinality(line_hashes) >= 1),
    recorded_at  timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (project, repo, file, node_sha256, line_hashes),
    FOREIGN KEY (project, node_sha256) REFERENCES memory_node (project, sha256)
);
CREATE INDEX pending_anchor_expires_idx ON pending_anchor (expires_at);
