-- Anchors of one file in any repository: the literal lookup by (file, line) of a server
-- with no work tree to blame (anchors_file_lines, repository optional, so the file comes
-- first), and the first look of file_may_have_memories (does the project have anything at
-- this path?).
CREATE INDEX git_anchor_file_idx ON git_anchor (project, file, repo);

-- Anchors whose line texts are not known (whole-file anchors, anchors stored before texts
-- were): while a repository has any, a file without anchors of its own may still have
-- memories, so file_may_have_memories asks (one probe of a small index).
CREATE INDEX git_anchor_no_texts_idx ON git_anchor (project, repo) WHERE line_hashes IS NULL;
