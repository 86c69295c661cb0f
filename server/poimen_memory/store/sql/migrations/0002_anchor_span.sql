-- Lookups bound their scan of an anchor's line_start by the longest anchor of the
-- repository; this index answers that in one probe.
CREATE INDEX git_anchor_span_idx ON git_anchor (project, repo, (line_end - line_start) DESC);
