-- Anchors whose lines cannot be told apart by text: those whose texts are not known (NULL)
-- and those whose lines are all too short to hash (a blank line, a `}`), until now an array
-- of NULLs. Both say nothing of where their lines went, and file_may_have_memories must see
-- both through the one partial index git_anchor_no_texts_idx: both are NULL from now on.
UPDATE git_anchor SET line_hashes = NULL
WHERE line_hashes IS NOT NULL AND array_remove(line_hashes, NULL) = '{}';

-- Where an anchor's lines were when they were recorded, when that is not its file (the file
-- was renamed between the anchor's commit and the recording). For lines that cannot be told
-- by text, the path they can be found at: a file elsewhere holds them only if this one was
-- renamed again. NULL: the anchor's own file (and for every anchor stored before now).
ALTER TABLE git_anchor ADD COLUMN found_in text;
