-- Full-text search indexes the first 100,000 characters of a node's text. Postgres refuses a
-- tsvector over 1 MB, and a text within the node limit (1 MiB) can need nearly three times
-- that (a hyphenated word adds a lexeme for each part). The worst texts measured (hyphenated
-- words in 4-byte letters) make some 560 KB of tsvector from 100,000 characters, so every
-- node within the limit stores, and a search still finds the words of its first 15,000 or so.
ALTER TABLE memory_node DROP COLUMN text_tsv;
ALTER TABLE memory_node ADD COLUMN text_tsv tsvector
    GENERATED ALWAYS AS (to_tsvector('english'::regconfig, left(text, 100000))) STORED;
CREATE INDEX memory_node_text_tsv_idx ON memory_node USING gin (text_tsv);
