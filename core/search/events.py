"""Re-exports `core.vocab.events` (moved below `core.search` and `core.storage`, which both use
it, so that neither imports the other to get it). Import from `core.vocab.events` in new code."""

from core.vocab.events import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    ArchiveSnapshot,
    CandidateEvaluated,
    CandidateProposed,
    ExampleEvaluated,
    LogMessage,
    RunFinished,
    RunStarted,
    SearchEvent,
    parse_event,
)

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "ArchiveSnapshot",
    "CandidateEvaluated",
    "CandidateProposed",
    "ExampleEvaluated",
    "LogMessage",
    "RunFinished",
    "RunStarted",
    "SearchEvent",
    "parse_event",
]
