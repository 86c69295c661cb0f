-- poimen-memory schema, version 1.
-- Every table carries `project` and every primary/unique key starts with it, so the schema
-- can be distributed by project (Citus) without redesign. Nodes are immutable; edges and
-- anchors live in their own tables.

CREATE TABLE memory_node (
    project     text        NOT NULL,
    sha256      text        NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    level       text        NOT NULL CHECK (level IN ('L0', 'L1', 'L2')),
    query_id    text,
    run_id      text        NOT NULL,
    t           integer     NOT NULL CHECK (t >= 0),
    text        text        NOT NULL,
    created_at  timestamptz NOT NULL,
    text_tsv    tsvector    GENERATED ALWAYS AS (to_tsvector('english'::regconfig, text)) STORED,
    PRIMARY KEY (project, sha256),
    -- M0.2: query_id is absent exactly at L2.
    CONSTRAINT memory_node_query_id_by_level CHECK ((level = 'L2') = (query_id IS NULL))
);

CREATE INDEX memory_node_created_at_idx ON memory_node (project, created_at DESC);
CREATE INDEX memory_node_text_tsv_idx ON memory_node USING gin (text_tsv);

-- Edges point up: child (L0) -> parent (L1), child (L1) -> parent (L2).
CREATE TABLE memory_edge (
    project        text NOT NULL,
    child_sha256   text NOT NULL,
    parent_sha256  text NOT NULL,
    PRIMARY KEY (project, child_sha256, parent_sha256),
    FOREIGN KEY (project, child_sha256) REFERENCES memory_node (project, sha256),
    FOREIGN KEY (project, parent_sha256) REFERENCES memory_node (project, sha256),
    CONSTRAINT memory_edge_not_self CHECK (child_sha256 <> parent_sha256)
);

CREATE INDEX memory_edge_parent_idx ON memory_edge (project, parent_sha256);

-- Commit metadata, once per (repo, commit): anchors share it (millions of anchors, thousands
-- of commits). The author columns are indexed columns, not JSONB (M3.5.9 Traps).
CREATE TABLE git_commit (
    project       text        NOT NULL,
    repo          text        NOT NULL,
    commit_sha    text        NOT NULL CHECK (commit_sha ~ '^[0-9a-f]{40}([0-9a-f]{24})?$'),
    message       text        NOT NULL,
    author_name   text        NOT NULL,
    author_email  text        NOT NULL,
    author_date   timestamptz NOT NULL,
    PRIMARY KEY (project, repo, commit_sha)
);

CREATE INDEX git_commit_author_email_idx ON git_commit (project, repo, lower(author_email));
CREATE INDEX git_commit_author_any_repo_idx ON git_commit (project, lower(author_email));
CREATE INDEX git_commit_author_name_idx ON git_commit (project, lower(author_name));

-- Where an L0 node's evidence sits in code. Lines are positions in commit_sha's version of
-- the file; line_start = line_end = 0 anchors the whole file. `repo` is part of uniqueness:
-- the same commit in two repositories is two anchors.
CREATE TABLE git_anchor (
    project      text    NOT NULL,
    node_sha256  text    NOT NULL,
    repo         text    NOT NULL,
    commit_sha   text    NOT NULL,
    file         text    NOT NULL CHECK (file <> ''),
    line_start   integer NOT NULL CHECK (line_start >= 0),
    line_end     integer NOT NULL,
    PRIMARY KEY (project, repo, commit_sha, file, line_start, line_end, node_sha256),
    FOREIGN KEY (project, node_sha256) REFERENCES memory_node (project, sha256),
    FOREIGN KEY (project, repo, commit_sha) REFERENCES git_commit (project, repo, commit_sha),
    CONSTRAINT git_anchor_range CHECK (
        line_end >= line_start AND ((line_start = 0) = (line_end = 0))
    )
);

-- The primary key serves lookups by (project, repo, commit_sha, file); these serve the rest.
CREATE INDEX git_anchor_node_idx ON git_anchor (project, node_sha256);
