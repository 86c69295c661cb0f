-- Where each run of a shared blame starts in the file (its first line, from 1): the hover of
-- one line in a fresh clone reads that line's run by one probe of the index below, not the
-- whole file's runs. A run's line_start is 1 plus the lengths of the runs before it (seq
-- order); rows stored before now are given theirs here.
ALTER TABLE blame_run ADD COLUMN line_start integer;

UPDATE blame_run r
SET line_start = s.line_start
FROM (
    SELECT project, file_id, seq,
           1 + sum(length) OVER (PARTITION BY project, file_id ORDER BY seq) - length
               AS line_start
    FROM blame_run
) AS s
WHERE r.project = s.project AND r.file_id = s.file_id AND r.seq = s.seq;

ALTER TABLE blame_run
    ALTER COLUMN line_start SET NOT NULL,
    ADD CONSTRAINT blame_run_line_start_check CHECK (line_start >= 1);

CREATE UNIQUE INDEX blame_run_line_idx ON blame_run (project, file_id, line_start);
