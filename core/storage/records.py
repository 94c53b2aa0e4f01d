"""Frozen records the run store returns (lists and tables come back as pandas DataFrames)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "IngestError",
    "IngestReport",
    "ProposalRecord",
    "RunRecord",
    "RunStatus",
    "TopologyVersion",
]

_CONFIG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

RunStatus = Literal["running", "interrupted", "completed", "stopped", "failed", "damaged"]
"""A run's state. `interrupted`: no `run_finished` event and no live process writes its journal
any more (it crashed or was killed; resume it). `damaged`: its stored `journal` is one the store
refuses to read (outside the store's journals folder, or not a regular file, e.g. a FIFO); the
reason is in `ingest_errors` (`RunStore.list_ingest_errors`)."""


class RunRecord(BaseModel):
    """One run as stored."""

    model_config = _CONFIG

    run_id: str
    """The run's id."""
    problem: str | None
    """The problem's name (None if the run's `run_started` event was never recorded)."""
    strategy: str | None
    """The search strategy."""
    seed: int | None
    """The search's random seed."""
    status: RunStatus
    """Its state; see `RunStatus`."""
    reason: str | None
    """Why it ended (from `run_finished`), else None."""
    config: dict[str, Any] = Field(default_factory=dict[str, Any])
    """The full search configuration."""
    problem_config: dict[str, Any] = Field(default_factory=dict[str, Any])
    """The problem's settings as loaded."""
    started_at: float | None
    """When it started, Unix seconds."""
    finished_at: float | None
    """When it ended, Unix seconds; None while running or interrupted."""
    last_event_at: float | None
    """Time of its last recorded event, Unix seconds: the data is as of then."""
    n_events: int
    """Events recorded."""
    n_resumes: int
    """How many times it was resumed."""
    best_idx: int | None
    """The winner from `run_finished`, if any."""
    budget_used: dict[str, float] = Field(default_factory=dict[str, float])
    """Budget figures from `run_finished`, e.g. `{"evaluations": 120, "usd": 0.3}`."""


class TopologyVersion(BaseModel):
    """One saved version of a target's topology (for history and rollback)."""

    model_config = _CONFIG

    target: str
    """What the topology belongs to, e.g. a problem name or a file path."""
    version: int
    """1, 2, ... per target, in save order."""
    spec_json: str
    """The full spec exactly as saved (node ids included)."""
    spec_hash: str | None
    """Its canonical hash, when the caller gave it."""
    created_at: float
    """When it was saved, Unix seconds."""
    note: str
    """Free text, e.g. `"applied proposal 3"` or `"rollback to 1"`."""


class IngestReport(BaseModel):
    """What one `RunStore.ingest()` call did."""

    model_config = _CONFIG

    n_events: int = 0
    """New events stored (re-ingested ones are not counted)."""
    n_journals: int = 0
    """Journals that had new complete lines."""
    skipped_lines: int = 0
    """Complete lines that were not valid events, or events the database cannot hold (e.g. a
    count beyond 64 bits): recorded in the store's ingest errors (`RunStore.list_ingest_errors`)
    and skipped, never keeping the other lines out; the journal itself is never changed."""
    failed: list[tuple[str, str]] = Field(default_factory=list[tuple[str, str]])
    """`(journal file, error)` per journal whose ingest failed; its offset did not move, so the
    next ingest retries it."""


class IngestError(BaseModel):
    """One journal line an ingest skipped (a record, not an exception): not a search event, an
    event of another run, or an event the database cannot hold (an older version's line with an
    integer beyond its column or a NaN time). The journal itself is never changed."""

    model_config = _CONFIG

    run_id: str
    """The run whose journal it is (a journal is named after its run: `<run_id>.jsonl`)."""
    journal: str
    """The journal file: its path in the store's journal folder (its file name when the store
    has no journal folder)."""
    line_no: int | None
    """The line's 1-based number in the journal; None for lines skipped before the store's
    schema v4, which did not keep it (`byte_offset` says where it is then)."""
    byte_offset: int
    """Where the skipped text starts in the journal, bytes from its start."""
    error: str
    """Why it was skipped, e.g. `"('example_evaluated', 'input_tokens'): Input should be less
    than or equal to 9223372036854775807 (got 100000000000000000000)"`."""
    line_head: str
    """The line's first 200 characters."""
    recorded_at: float
    """When the ingest skipped it, Unix seconds."""


class ProposalRecord(BaseModel):
    """One proposal to apply a spec to a target, in full, with its latest decision."""

    model_config = _CONFIG

    proposal_id: int
    """Its id: 1, 2, ... across the whole store."""
    target: str
    """What it would be applied to, e.g. `"<registry root>/gsm8k_replay"`."""
    spec_json: str
    """The proposed spec exactly as recorded (node ids included)."""
    spec_hash: str | None
    """The spec's canonical hash, when the proposer gave it."""
    run_id: str | None
    """The run the candidate came from; None for a proposal made outside a run (the editor, a
    rollback)."""
    candidate_idx: int | None
    """The candidate of that run, if any."""
    base_version: int | None
    """The target's version the diff was made against; None when the target was new."""
    diff: str
    """The diff shown when it was proposed (a unified JSON diff, or a note such as
    `"rollback to v2"`), "" when none was recorded."""
    proposed_by: str
    """Who proposed it."""
    created_at: float
    """When it was proposed, Unix seconds."""
    decision: Literal["approved", "rejected"] | None
    """Its latest decision; None while pending."""
    who: str | None
    """Who made that decision."""
    decided_at: float | None
    """When, Unix seconds."""
    comment: str | None
    """The decision's comment."""
    applied_version: int | None
    """The target version an approval wrote, if any."""
