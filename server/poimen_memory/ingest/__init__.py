"""Ingest: agent transcripts -> memory nodes with git anchors -> the store."""

from poimen_memory.ingest.model import BadRecord, IngestError
from poimen_memory.ingest.pipeline import (
    NOTIFY_CHANNEL,
    Format,
    IngestOptions,
    IngestRejected,
    IngestSummary,
    ingest,
)

__all__ = [
    "NOTIFY_CHANNEL",
    "BadRecord",
    "Format",
    "IngestError",
    "IngestOptions",
    "IngestRejected",
    "IngestSummary",
    "ingest",
]
