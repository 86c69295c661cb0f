-- Memories that survive rewritten history (rebase, cherry-pick, amend, squash).
--
-- git_commit.patch_id: what the commit changed, independent of line numbers and whitespace
-- (gitio.history), read while the commit still exists; a rebased or cherry-picked copy of the
-- change has the same one. NULL: not known (a change over the size cap, or stored before).
ALTER TABLE git_commit ADD COLUMN patch_id text;
CREATE INDEX git_commit_patch_id_idx ON git_commit (project, repo, patch_id)
    WHERE patch_id IS NOT NULL;

-- Per anchor: the hash of each anchored line's text (whitespace removed; NULL for a line of
-- fewer than 3 characters, never matched on text), and the position of line_start among the
-- lines its commit added to the file. Both NULL when unknown (whole-file anchors, literal
-- anchors of lines their commit did not add, changes over the size cap).
ALTER TABLE git_anchor ADD COLUMN line_hashes bigint[];
ALTER TABLE git_anchor ADD COLUMN added_from integer CHECK (added_from >= 0);
-- Only rows that have hashes: rows without (older anchors, whole-file and literal ones) would
-- all share GIN's one null entry, which makes bulk loads crawl.
CREATE INDEX git_anchor_line_hashes_idx ON git_anchor USING gin (line_hashes)
    WHERE line_hashes IS NOT NULL;

-- A rewritten commit (old_commit, no longer in the history) and the commit its change landed
-- as (new_commit): found once, shared by everyone using the store. `how`: 'same-change' (the
-- change is identical: rebase, cherry-pick) or 'squash' (it landed inside a larger or edited
-- change: squash merge, amend, fixup).
CREATE TABLE commit_alias (
    project     text        NOT NULL,
    repo        text        NOT NULL,
    new_commit  text        NOT NULL CHECK (new_commit ~ '^[0-9a-f]{40}([0-9a-f]{24})?$'),
    old_commit  text        NOT NULL,
    how         text        NOT NULL CHECK (how IN ('same-change', 'squash')),
    found_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, repo, new_commit, old_commit),
    FOREIGN KEY (project, repo, old_commit) REFERENCES git_commit (project, repo, commit_sha),
    CONSTRAINT commit_alias_not_self CHECK (new_commit <> old_commit)
);
CREATE INDEX commit_alias_old_idx ON commit_alias (project, repo, old_commit);
