"""The run store's interface: `RunStore`, whose contract every implementation keeps."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from core.storage import queries
from core.storage.records import (
    IngestError,
    IngestReport,
    ProposalRecord,
    RunRecord,
    TopologyVersion,
)
from core.vocab.events import SearchEvent
from core.vocab.pareto import DEFAULT_OBJECTIVES, Objective

if TYPE_CHECKING:
    import pandas as pd  # pyright: ignore[reportMissingTypeStubs]

__all__ = ["RunStore"]


class RunStore(ABC):
    """Every run, candidate and per-example result of the searches, and the approvals.

    The command line and the studio share one store. A search reports what happens as typed
    search events (`core.vocab.events`); the store keeps them as rows and answers the
    studio's questions as pandas DataFrames. The reusable contract test suite is
    `tests/contracts/store_contract.py` (`StoreContract`): every implementation passes it.

    Contract:

    - **Events in, idempotently.** `record_events` and `ingest` (from run journals) store
      events; an event is identified by `(run_id, seq)`, so recording or ingesting the same
      event twice never duplicates a row. A replayed copy of a result under a new `seq` (a
      resumed search re-emitting what it recorded) does not duplicate either: per-example
      results are keyed by `(run, candidate, split, example, trial)` and candidates by
      `(run, candidate)`, first one wins. A journal holds the run it is named after
      (`<run_id>.jsonl`): a line that is not an event (including one an older version wrote
      with a NaN time or an integer beyond its column), or an event of another run, is skipped
      and recorded (`IngestReport.skipped_lines`), never stored under another name;
      `list_ingest_errors` reads the records back, each line once.
    - **Runs.** A run appears with its `run_started` event and stays `running` until a
      `run_finished` event (then `completed`, `stopped` or `failed`). A running run whose
      journal no live process writes any more is reported `interrupted`. `last_event_at`
      says how fresh the data is ("running, data as of ...").
    - **Specs** are stored once per canonical hash (`put_spec`, and every proposed candidate).
    - **Invalid entries are never on the front and never best** (field case F7): a result
      marked invalid, with any NaN or infinite objective, or of a rejected candidate, has
      `valid = False`, `on_front = False` and `is_best = False` in every query, and never
      counts as a run's best score. DuckDB sorts NaN as the largest value, so implementations
      filter explicitly, never by sort order alone.
    - **Compare like with like.** A candidate's objectives come from one evaluation: its full
      validation result when it has one, else its latest minibatch result (never the held-out
      test split); `archive(split=...)` restricts to one split. The front and the best entry
      are chosen among the valid entries of the most complete split present (validation over
      minibatch): an entry scored only on a minibatch is never on the front beside validated
      ones.
    - **Threads.** One store object may be used from many threads at once (the studio serves
      each session on its own thread): no errors, nothing lost (field case F9).
    - **Time** is Unix seconds (floats) everywhere; costs are USD, latencies ms.
    - **Read-only stores** (`read_only` is True, e.g. a view over journals while another
      process holds the database) answer every query and `ingest`, and raise `StoreError`
      from every other write.
    - **Errors.** Misuse of a closed store, a missing topology version or proposal and
      refused writes raise `StoreError`, and so does every call on a store whose database file was deleted or
      replaced while it was open (its writes would go to the old file and be lost); a
      database of a newer schema raises `SchemaVersionError`; a database file held by another
      process raises `StoreBusyError`.

    Use it as a context manager, or call `close()`.
    """

    # ---- lifecycle ----------------------------------------------------------------------

    @property
    @abstractmethod
    def read_only(self) -> bool:
        """True when every write except `ingest` raises `StoreError`."""

    @abstractmethod
    def close(self) -> None:
        """Release the database (idempotent). Any later call raises `StoreError`."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ---- events and runs ----------------------------------------------------------------

    @abstractmethod
    def record_events(self, events: Iterable[SearchEvent]) -> int:
        """Store events (of one or several runs) in one transaction.

        Returns:
            How many of them were new (already-stored `(run_id, seq)` pairs are skipped).

        Raises:
            StoreError: the store is read-only or closed, or the write failed (then nothing of
                this call is stored).
        """

    @abstractmethod
    def ingest(self) -> IngestReport:
        """Read the new complete lines of every run journal and store their events.

        Each journal is ingested in its own transaction together with its new read offset, so
        a failure leaves that journal's offset (and its rows) unchanged and the next call
        retries it; other journals still go in. A torn last line is left for later. A journal
        that shrank, or was rewritten so that its stored offset is no longer a line end, is read
        again from the start (stored events are skipped by their seq). A store without a
        journal folder ingests nothing.
        """

    @abstractmethod
    def list_ingest_errors(self, run_id: str | None = None) -> list[IngestError]:
        """The journal lines ingests skipped and recorded, of one run's journal or of all.

        Ingests new journal lines first (like the queries, when the store does so). A line is
        listed once even when its journal was read again from the start and it was skipped
        again (same journal, offset and text: the first record stands). A store without
        journals, or a run with none skipped, gives `[]`.

        Args:
            run_id: the run whose journal (`<run_id>.jsonl`) to look at; None for every
                journal.

        Returns:
            One `IngestError` per skipped line, by journal file name, then by position.
        """

    @abstractmethod
    def get_run(self, run_id: str) -> RunRecord | None:
        """One run, or None if the store has never seen it."""

    @abstractmethod
    def phase_two_run(self, run_id: str) -> str | None:
        """The run id of phase 2 (prompts) of the search `run_id`, the newest if it ran more
        than once, else None: the runs whose `config.phase` is `"prompts"` and whose
        `config.parent_run_id` is `run_id` (`list_runs`' `parent_run_id`). Reads no
        DataFrame, so `show` stays free of pandas."""

    @abstractmethod
    def list_runs(self) -> pd.DataFrame:
        """Every run, newest first.

        Columns: `run_id, problem, strategy, seed, status, status_label, reason, started_at,
        finished_at, last_event_at, wall_s, n_events, n_resumes, n_candidates, n_evaluations,
        cost_usd, design_cost_usd, design_requests, design_input_tokens, design_output_tokens,
        best_idx, best_score, parent_run_id, executor`.
        `design_cost_usd` is the part of `cost_usd` spent by the designer (the meta agent's
        own calls) or, for phase 2, the reflection model; `design_requests`,
        `design_input_tokens` and `design_output_tokens` are those calls' requests and tokens
        (0 for a run stored before tokens were recorded). `status_label` is human text
        such as `"running, data as of 2025-01-01 12:00:03 UTC"`. `n_evaluations` counts example evaluations that were
        not cache hits; `cost_usd` (USD) is their finite cost plus design cost, or for a run
        with no example rows (phase 2 of `search --then-prompts` records only each candidate's
        totals) its `run_finished` `budget_used["usd"]` (metric calls and reflection), the
        figure `show` prints. `best_idx` and
        `best_score` are the best valid entry's (see the contract), else None.
        `parent_run_id` is, for phase 2 of a two-phase run (its `config.phase` is `"prompts"`),
        the run id of the search it is phase 2 of (`config.parent_run_id`), else None.
        `executor` is where the run's evaluations ran, as its `RunStarted` recorded it
        (`config.executor`, `Executor.describe()`: `"local"`, `"ray: 2 workers, local
        127.0.0.1"`), `"local"` for a run recorded without one (before executors existed).
        """

    # ---- specs ----------------------------------------------------------------------------

    @abstractmethod
    def put_spec(self, spec_hash: str, spec_json: str) -> bool:
        """Store a spec under its canonical hash, once.

        Returns:
            True if it was new; False if the hash was already stored (the first JSON stays).

        Raises:
            StoreError: read-only or closed store, or an empty hash.
        """

    @abstractmethod
    def get_spec(self, spec_hash: str) -> str | None:
        """The spec JSON stored under a canonical hash, or None."""

    # ---- queries --------------------------------------------------------------------------

    @abstractmethod
    def archive(
        self,
        run_id: str,
        *,
        split: str | None = None,
        objectives: Sequence[Objective] = DEFAULT_OBJECTIVES,
        include_unevaluated: bool = False,
    ) -> pd.DataFrame:
        """A run's archive: one row per evaluated candidate, with objectives and front membership.

        Args:
            run_id: the run.
            split: None for each candidate's preferred evaluation (full validation, else latest
                minibatch), with the front and the best among the entries of the most complete
                split present; a split name to use only results of that split.
            objectives: the front's objectives (column names and directions).
            include_unevaluated: also list candidates with no result (rejected, duplicates, in
                flight), with `valid = False`.

        Returns:
            Rows ordered by `candidate_idx`, columns: `candidate_idx, generation, parent_idx,
            operator, thought, candidate_status, reason, spec_hash, objective_split,
            n_examples, accuracy, cost_usd, latency_ms, n_agents, depth, aggregate_score,
            error_rate, blank_rate, stdev, valid, invalid_reason, same_as, on_front, is_best,
            in_snapshot, snapshot_front, test_accuracy, test_aggregate_score`.
            `same_as`: the earlier candidate whose per-example results this one's equal,
            else NA; such a row keeps its figures but is never on the front
            nor the best (its twin stands for it).
            `in_snapshot` / `snapshot_front`: in the latest archive snapshot's entries / front
            (front only if valid). Empty (with these columns) for an unknown run.
        """

    def archive_records(
        self,
        run_id: str,
        *,
        split: str | None = None,
        objectives: Sequence[Objective] = DEFAULT_OBJECTIVES,
        include_unevaluated: bool = False,
    ) -> list[dict[str, Any]]:
        """`archive`'s rows as plain dicts (same columns and order; a missing value is None).

        For readers that do not need a DataFrame: the DuckDB store answers it without pandas
        (pandas and pyarrow add about 70 MiB to a process; the CLI's end-of-search report reads
        the store this way). This default converts `archive`'s frame."""
        frame = self.archive(
            run_id, split=split, objectives=objectives, include_unevaluated=include_unevaluated
        )
        return [
            {k: None if queries.is_missing(v) else v for k, v in row.items()}
            for row in queries.records_of(frame)
        ]

    def test_front_records(
        self, run_id: str, *, objectives: Sequence[Objective] = DEFAULT_OBJECTIVES
    ) -> list[dict[str, Any]]:
        """`test_front`'s rows as plain dicts (`core.storage.queries.test_front_records`), read
        through `archive_records`: no pandas in the DuckDB store."""
        return queries.test_front_records(
            self.archive_records(run_id, split="validation", objectives=objectives),
            self.archive_records(run_id, split="test", objectives=objectives),
            objectives,
        )

    def test_front(
        self, run_id: str, *, objectives: Sequence[Objective] = DEFAULT_OBJECTIVES
    ) -> pd.DataFrame:
        """The held-out test scores of the run's validation-front candidates: reported only,
        never used for selection (`core.storage.queries.test_front`, which documents the
        columns). Built from `archive` on the validation and test splits, so every store has
        it."""
        return queries.test_front(
            self.archive(run_id, split="validation", objectives=objectives),
            self.archive(run_id, split="test", objectives=objectives),
            objectives,
        )

    @abstractmethod
    def candidate_examples(
        self, run_id: str, candidate_idx: int, *, split: str | None = None, with_trace: bool = False
    ) -> pd.DataFrame:
        """A candidate's per-example results, ordered by `split, example_id, trial`.

        Columns: `split, example_id, trial, accuracy, cost_usd, latency_ms, input_tokens,
        output_tokens, requests, status, error, output_summary, cached, seq, ts`, plus `trace`
        (JSON text) when `with_trace`.
        """

    @abstractmethod
    def example_accuracies(
        self, run_id: str, candidate_idx: int, *, split: str | None = None
    ) -> list[tuple[str, int, float | None]]:
        """A candidate's per-example accuracy as `(example_id, trial, accuracy)` tuples, ordered
        by `split, example_id, trial`, with no pandas (`candidate_examples` holds the same rows
        with every column): what `show`'s paired intervals read."""

    @abstractmethod
    def example_trace(
        self, run_id: str, candidate_idx: int, example_id: str, *, trial: int = 0
    ) -> list[dict[str, Any]] | None:
        """One example's trace (spans as dicts), or None if that result is not stored."""

    @abstractmethod
    def compare_candidates(
        self,
        run_id: str,
        a: int,
        b: int,
        *,
        run_id_b: str | None = None,
        threshold: float = 0.5,
    ) -> pd.DataFrame:
        """Two candidates per example: which problems flipped from right to wrong and back.

        Trials are averaged per example; an example is right when its mean accuracy is finite
        and at least `threshold` (errors and NaN are wrong). `b` may come from another run
        (`run_id_b`).

        Returns:
            One row per `(split, example_id)` either side has, ordered by them, columns:
            `split, example_id, accuracy_a, accuracy_b, right_a, right_b, status_a, status_b,
            change` with `change` one of `"right_to_wrong"`, `"wrong_to_right"`,
            `"both_right"`, `"both_wrong"`, `"only_a"`, `"only_b"`.
        """

    @abstractmethod
    def progress(self, run_id: str) -> pd.DataFrame:
        """Cost and best score over evaluations: one row per candidate result, in event order.

        Columns: `seq, ts, candidate_idx, split, n_evaluations, cost_usd, n_unpriced, score,
        valid, best_score`. `n_evaluations` and `cost_usd` are cumulative up to that event
        (example evaluations that were not cache hits; finite evaluation cost plus design
        cost, USD); `n_unpriced` counts examples whose cost was not finite; `best_score` is the
        running maximum of valid scores within the row's split.
        """

    @abstractmethod
    def snapshots(self, run_id: str) -> pd.DataFrame:
        """The run's archive snapshots in order: `seq, ts, generation, entries, front, best_idx,
        best_score, hypervolume, n_evaluations, cost_usd_total`."""

    @abstractmethod
    def logs(self, run_id: str) -> pd.DataFrame:
        """The run's log messages in order: `seq, ts, level, message`."""

    # ---- proposals, approvals and topology versions --------------------------------------

    @abstractmethod
    def record_proposal(
        self,
        target: str,
        spec_json: str,
        *,
        spec_hash: str | None = None,
        run_id: str | None = None,
        candidate_idx: int | None = None,
        base_version: int | None = None,
        diff: str = "",
        proposed_by: str = "",
        when: datetime | float | None = None,
    ) -> int:
        """Record a proposal to apply a spec to a target; returns its id (1, 2, ...)."""

    @abstractmethod
    def record_approval(
        self,
        proposal_id: int,
        *,
        who: str,
        when: datetime | float | None = None,
        comment: str = "",
        base_version: int | None = None,
        applied_version: int | None = None,
        decision: str = "approved",
    ) -> int:
        """Record a decision on a proposal (who, when, comment, the target version the diff
        was made against and the version the apply wrote); returns its id.

        `when` is Unix seconds or a datetime (naive ones are local time); None means now.

        Raises:
            StoreError: unknown proposal, read-only or closed store.
        """

    @abstractmethod
    def list_proposals(self, target: str | None = None) -> pd.DataFrame:
        """Proposals (of one target, or all), newest first, each with its latest decision.

        Columns: `proposal_id, target, run_id, candidate_idx, spec_hash, base_version,
        proposed_by, created_at, decision, who, decided_at, comment, applied_version`
        (decision columns None while pending).
        """

    @abstractmethod
    def get_proposal(self, run_id: str | None, proposal_id: int) -> ProposalRecord:
        """One proposal in full: what `list_proposals` lists, plus its spec and diff.

        Proposal ids are unique across the store; `run_id` only checks where it came from.

        Args:
            run_id: the run the proposal must come from, or None for any proposal (those made
                outside a run, in the editor or by a rollback, have no run).
            proposal_id: its id.

        Raises:
            StoreError: there is no such proposal, or it is not of run `run_id` (the message
                names the id, e.g. `"no proposal 7 of run 'r1'"`), or the store is closed.
        """

    @abstractmethod
    def save_topology_version(
        self, target: str, spec_json: str, *, spec_hash: str | None = None, note: str = ""
    ) -> int:
        """Save a target's topology as its next version (1, 2, ...) and return the number."""

    @abstractmethod
    def list_topology_versions(self, target: str) -> pd.DataFrame:
        """A target's versions, oldest first: `version, spec_hash, created_at, note`."""

    @abstractmethod
    def get_topology_version(self, target: str, version: int | None = None) -> TopologyVersion:
        """One version of a target's topology (None: the latest), e.g. to roll back to it.

        Raises:
            StoreError: the target has no such version (the message lists the ones it has).
        """
