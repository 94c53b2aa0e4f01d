"""The studio's manager: the one run store, background searches, the topology registry.

Each is its own module: the store's view in `studio._manager_store`, the searches in
`studio._manager_searches` (`SearchesMixin`), the registry in `studio._manager_registry`
(`RegistryMixin`); this module holds the store's ownership, problems and evaluations, and
re-exports `SearchRequest`, `BackgroundSearch` and `current_user`.

One `StudioManager` per database file is held by `st.cache_resource` (see `studio/app.py`), so
every browser session of the studio shares it. It never calls `st.*`: pages ask it for data and
show what it returns, so it is tested without Streamlit.

- **The store.** The manager owns the one `RunStore` for the database file (DuckDB allows one
  process per file; the store gives each thread its own cursor). The store ingests run journals
  before every query, so a search started from the command line in another process shows up
  live. If another process holds the file (e.g. a `topology-studio` command, briefly), the
  manager falls back to a read-only view built from the journals and says so (`store_note`),
  retrying the file on later refreshes (`RETRY_BUSY_S`); it never raises `StoreBusyError` to a
  page. A database on a read-only file system is shown the same way, from a read-only copy of
  the file kept live from the journals (`DuckDBRunStore.read_only_copy`); a damaged one raises
  `StoreCorruptError`, whose message names `topology-studio store rebuild`. If the database file is deleted or replaced while the studio has it open (the store
  then refuses every call with a `StoreError` saying so), the manager closes that store, opens
  the file again (a deleted file is recreated and refilled from the run journals) and retries
  the call once; a second failure is raised as before. Pages get this through `store`, which
  sends each call to the store in use at that moment.
- **Background searches.** `start_search` runs `core.search.engine.build_search(...).run()` in
  a daemon thread with its own event loop; the search writes its run journal
  (`<db>.journals/<run_id>.jsonl`) exactly as a command-line search does, and the store ingests
  it. `stop` asks the run to stop cleanly (between evaluations); `pause` holds the run after the
  candidate in flight finishes (the run's thread waits inside its event subscriber, so no
  evaluation is cut in half) until `resume` or `stop`. Time spent paused counts toward a wall
  time budget. `resume_search` continues an interrupted run (no process writes its journal and
  it did not finish) as `topology-studio search PROBLEM --resume RUN` does
  (`studio.cli._setup.resume_setup`: the same checks, the recorded options). A search's
  `state` is in the store's words (`SearchState`), so the Runs page's table and panel agree.
  A search asked to run on Ray (`SearchRequest.executor`, as `--executor ray [--ray-address]`)
  connects before `start_search` returns (a bad address is refused there), records its
  workers' health beside its journal while it runs (`worker_health`), and closes its workers
  when it ends; one Ray search at a time per studio.
  A database held by another process does not stop a search (it writes only its journal, which
  the journal view shows and the file takes in later); one that cannot be written does
  (`start_refusal`).
- **The registry.** Topologies that applications run live in a `TopologyRegistry` directory
  (`$TOPOLOGY_STUDIO_REGISTRY`, default `<db folder>/topologies`); the diff page applies
  approved proposals there and records the approval in the store. A spec that routes on
  learned conditions takes their artefacts from the proposal's run journal, else the
  registry's `learned/` folders, else the other run journals (`learned_artefacts`, digests
  checked); `evaluate` and the editor register them the same way.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from core.errors import (
    StoreBusyError,
    StoreError,
    StoreReadOnlyError,
    TopologyStudioError,
)
from core.evaluation.evaluator import CandidateEvaluation
from core.ir import TopologySpec, spec_hash
from core.problems import Problem, load_problem
from core.search.events import SearchEvent
from core.search.registry import TopologyRegistry
from core.storage import (
    DuckDBRunStore,
    RunJournal,
    RunStore,
    journal_dir,
    journal_path,
    new_run_id,
)
from studio._manager_registry import RegistryMixin, current_user
from studio._manager_searches import BackgroundSearch, SearchesMixin, SearchRequest
from studio._manager_store import ReopeningStore
from studio.registry_root import REGISTRY_ENV, default_registry_root

__all__ = [
    "DB_ENV",
    "REGISTRY_ENV",
    "RETRY_BUSY_S",
    "BackgroundSearch",
    "SearchRequest",
    "StudioManager",
    "current_user",
    "default_registry_root",
]

_log = logging.getLogger(__name__)

DB_ENV = "TOPOLOGY_STUDIO_DB"
"""Environment variable naming the run database (the CLI's `studio` command sets it)."""

RETRY_BUSY_S = 5.0
"""Seconds between attempts to open a database file that another process holds."""

_REPLACED = "was deleted or replaced"
"""Words of the store's `StoreError` for a database file deleted or replaced under it
(`DuckDBRunStore`: every call checks the file's device and inode)."""

_T = TypeVar("_T")

_PROBLEMS: dict[tuple[str, str], Problem] = {}
"""Problems loaded by any manager in this process (loading one imports its module and reads
its data: seconds), keyed by name and overrides."""
_PROBLEMS_LOCK = threading.Lock()

_HELD_BY = re.compile(r"is held by (?P<who>.+?): ")
"""The holder named in a `StoreBusyError`'s message (`process 123 (python)`)."""


def _file_identity(path: Path) -> tuple[int, int] | None:
    """`(device, inode)` of a file, None when it does not exist."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


class StudioManager(SearchesMixin, RegistryMixin):
    """The studio's one store, its background searches, its topology registry.

    Args:
        db_path: the run database file (created if missing).
        registry_root: the topology registry directory (default: `default_registry_root`).
        problem_loader: loads a problem by name with dotted overrides (tests pass a fake).
        store_factory: opens the store (tests pass a fake); default `DuckDBRunStore(path)`.

    The manager is thread-safe: Streamlit serves each browser session on its own thread.
    """

    def __init__(
        self,
        db_path: str | os.PathLike[str],
        *,
        registry_root: str | os.PathLike[str] | None = None,
        problem_loader: Callable[..., Problem] | None = None,
        store_factory: Callable[[str], RunStore] | None = None,
    ) -> None:
        self.db_path = Path(os.fspath(db_path)).expanduser().resolve()
        self.registry = TopologyRegistry(
            registry_root if registry_root is not None else default_registry_root(self.db_path)
        )
        self._load_problem = problem_loader or load_problem
        self._store_factory = store_factory or (lambda p: DuckDBRunStore(p))
        self._lock = threading.RLock()
        self._store: RunStore | None = None
        self._store_id: tuple[int, int] | None = None  # the file the store opened
        self._reopens = 0  # stores dropped because their file was deleted or replaced
        self._fallback: RunStore | None = None
        self._view = ReopeningStore(self)
        self._note = ""
        self._busy = False  # the journal view because another process holds the file
        self._next_try = 0.0
        self._searches: dict[str, BackgroundSearch] = {}
        self._problems = _PROBLEMS if problem_loader is None else {}

    def __repr__(self) -> str:
        return f"StudioManager({str(self.db_path)!r})"

    # ---- the store --------------------------------------------------------------------------

    @property
    def store(self) -> RunStore:
        """The run store: the database file, or a read-only journal view while the file is
        held by another process (see `store_note`).

        Each call on it goes to the store in use at that moment; a call refused because the
        database file was deleted or replaced reopens the file and is retried once (see the
        module docstring).

        Raises:
            StoreError: the file cannot be opened at all (not a run store, newer schema, ...).
        """
        self._current()
        return self._view

    def _current(self) -> RunStore:
        """The store in use: the file's (opened now if needed), or the journal view."""
        with self._lock:
            if self._store is not None:
                return self._store
            now = time.monotonic()
            if self._fallback is None or now >= self._next_try:
                try:
                    self._store = self._store_factory(str(self.db_path))
                    self._store_id = _file_identity(self.db_path)
                except StoreBusyError as exc:
                    self._next_try = now + RETRY_BUSY_S
                    m = _HELD_BY.search(str(exc))
                    who = f" ({m['who']})" if m else ""
                    self._busy = True
                    # said to a browser user: what the page still does and what waits, never
                    # an API call
                    self._note = (
                        f"The run database is held by another process{who}, so this page shows "
                        "the runs read-only, from their journals. You can still start, resume "
                        "and watch searches here: a search writes only its journal, which the "
                        "database takes in once it is free. Saving topologies and approving "
                        "proposals wait until that process ends (close the other studio or "
                        f"topology-studio command); the studio tries the file again every "
                        f"{RETRY_BUSY_S:g} s by itself."
                    )
                    if self._fallback is None:
                        self._fallback = DuckDBRunStore.from_journals(journal_dir(self.db_path))
                    return self._fallback
                except StoreReadOnlyError as exc:
                    # a read-only file system: a read-only copy of the file, live from the
                    # journals (retried like a busy file: a remount may make it writable)
                    self._next_try = now + RETRY_BUSY_S
                    self._busy = False
                    self._note = (
                        "The database cannot be written, so this is a read-only copy of it, "
                        f"kept live from the run journals (retrying every {RETRY_BUSY_S:g} s by "
                        f"itself): {exc}. Starting or resuming a search, saving topologies and "
                        "approving proposals are off here: run the studio with a database in a "
                        "writable folder (topology-studio studio --db PATH)."
                    )
                    if self._fallback is None:
                        self._fallback = DuckDBRunStore.read_only_copy(
                            self.db_path, reason=str(exc)
                        )
                    return self._fallback
                if self._fallback is not None:
                    self._fallback.close()
                    self._fallback = None
                self._note = ""
                self._busy = False
                return self._store
            return self._fallback

    def _call(self, fn: Callable[[RunStore], _T]) -> _T:
        """`fn(store)` on the store in use, retried once on a reopened store when the database
        file was deleted or replaced under it.

        Raises:
            StoreError: what the store raises (the retry's error, if it was retried).
        """
        with self._lock:
            store = self._current()
            reopens = self._reopens
        try:
            return fn(store)
        except StoreError as exc:
            if not self._drop_replaced(store, reopens, exc):
                raise
        return fn(self._current())

    def _drop_replaced(self, store: RunStore, reopens: int, exc: StoreError) -> bool:
        """Whether a call that failed with `exc` on `store` is to be retried on a new store:
        `store` is closed and forgotten here when its database file was deleted or replaced
        (the error says so, or the file is no longer the one opened), or was already dropped by
        another thread meanwhile (`reopens` changed). Other errors are left alone."""
        if type(exc) is not StoreError:  # busy, newer schema: not a replaced file
            return False
        with self._lock:
            if self._reopens != reopens:
                return True  # another thread reopened the store since this call took it
            if store is not self._store:
                return False  # the journal view, or a store the manager closed
            if _REPLACED not in str(exc) and _file_identity(self.db_path) == self._store_id:
                return False
            _log.warning(
                "the run store file %s was deleted or replaced: reopening it", self.db_path
            )
            self._store = None
            self._store_id = None
            self._reopens += 1
            try:  # before opening the file again: DuckDB would reuse a database still open
                store.close()
            except Exception as close_exc:  # noqa: BLE001 (the old file is gone anyway)
                _log.warning("closing the replaced run store failed: %s", close_exc)
            return True

    def _forget(self, store: RunStore) -> None:
        """Close `store` (the one in use) and forget it: the next call opens the file again."""
        with self._lock:
            if store is self._store:
                self._store = None
                self._store_id = None
            elif store is self._fallback:
                self._fallback = None
            store.close()

    @property
    def store_note(self) -> str:
        """Why the store is a read-only view right now ("" when the file is open)."""
        return self._note

    @property
    def read_only(self) -> bool:
        """True while the store is the read-only journal view."""
        return self.store.read_only

    def start_refusal(self) -> str:
        """Why a search cannot be started (or resumed) here now, "" when it can.

        A database held by another process does not stop a search: the search writes only its
        journal, which the journal view shows at once and the file takes in once it is free.
        A database that cannot be written (a read-only file system) does: its journal folder
        cannot be written either.
        """
        if not self.read_only or self._busy:
            return ""
        return (
            "Starting a search is off: the run database cannot be written (see the note at the "
            "top of the page)."
        )

    def refresh(self) -> int:
        """Ingest new run journal lines now; returns how many events were new (0 on failure,
        which is logged: the next refresh retries)."""
        try:
            return self.store.ingest().n_events
        except TopologyStudioError as exc:
            _log.warning("refresh failed: %s", exc)
            return 0

    def close(self) -> None:
        """Stop every background search and close the store (idempotent)."""
        for s in list(self._searches.values()):
            self.stop(s.run_id, "studio closed")
        for s in list(self._searches.values()):
            if s._thread is not None:
                s._thread.join(timeout=10)
        with self._lock:
            for st in (self._store, self._fallback):
                if st is not None:
                    st.close()
            self._store = self._fallback = None
            self._store_id = None

    # ---- problems ---------------------------------------------------------------------------

    def problem(self, name: str, overrides: Mapping[str, Any] | None = None) -> Problem:
        """A loaded problem (cached per name and overrides).

        Raises:
            ProblemError, DatasetError: the problem cannot be loaded.
        """
        key = (name, json.dumps(dict(overrides or {}), sort_keys=True, default=str))
        with _PROBLEMS_LOCK:
            cached = self._problems.get(key)
            if cached is None:
                cached = self._load_problem(name, overrides=dict(overrides or {}))
                self._problems[key] = cached
        return cached

    @staticmethod
    def problem_names() -> list[str]:
        """Problem names found in `core.problems.problem_search_dirs()`, sorted, unique."""
        from core.problems import PROBLEM_FILE, problem_search_dirs

        names: set[str] = set()
        for d in problem_search_dirs():
            if d.is_dir():
                names.update(p.parent.name for p in d.glob(f"*/{PROBLEM_FILE}"))
        return sorted(names)

    @staticmethod
    def cost_basis(name: str | None) -> str:
        """How a problem's costs come about: `"replayed"` when every priced model is a replay
        (`[models.prices]` keys `replay:*`: the cost is modelled from recorded text at list
        prices, no money is spent), `"measured"` when it prices other models, `""` when the
        problem is not found here or prices nothing. Read from its `problem.toml` (no import
        of its module)."""
        import tomllib

        from core.problems import PROBLEM_FILE, problem_search_dirs
        from core.problems._prices import cost_basis

        if not name:
            return ""
        for d in problem_search_dirs():
            path = d / name / PROBLEM_FILE
            if not path.is_file():
                continue
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                return ""
            models = data.get("models")
            prices = models.get("prices") if isinstance(models, dict) else None
            if not isinstance(prices, dict):
                return ""
            return cost_basis(cast(dict[str, object], prices))
        return ""

    # ---- evaluation -------------------------------------------------------------------------

    def evaluate(
        self,
        problem_name: str,
        spec: TopologySpec,
        *,
        split: str = "validation",
        limit: int | None = 20,
        time_scale: float | None = 0.0,
        run_id: str | None = None,
    ) -> CandidateEvaluation:
        """Evaluate a topology on the first `limit` examples of a problem's split (blocking).
        The learned conditions it routes on are registered first (`learned_artefacts`).

        Args:
            problem_name: the problem.
            spec: the topology.
            split: `"validation"` or `"test"`.
            limit: examples to use (None: the whole split).
            time_scale: replayed-latency override (0: no sleeping; None: the problem's).
            run_id: the run the topology came from (its journal is read first for learned
                artefacts); None: the registry's and every run's.

        Raises:
            TopologyStudioError: the problem cannot be loaded, or has no such split.
        """
        overrides = {} if time_scale is None else {"models.time_scale": time_scale}
        problem = self.problem(problem_name, overrides)
        if split not in problem.splits:
            raise StoreError(
                f"problem {problem.name!r} has no split {split!r}; it has {sorted(problem.splits)}"
            )
        examples = problem.splits[split]
        if limit is not None:
            examples = examples[:limit]
        # the problem's own evaluator: its blank-output rule (F5), latency source and weights
        # with traces: the editor's drill-down shows each example's route and steps
        evaluator = problem.evaluator().with_options(capture_traces=True)
        self.register_learned_of(spec, evaluator.callable_registry, run_id)
        return asyncio.run(evaluator.evaluate(spec, examples, split=split))

    def record_evaluation(
        self,
        problem_name: str,
        spec: TopologySpec,
        evaluation: CandidateEvaluation,
        *,
        parent: tuple[str, int] | None = None,
        source: str = "",
        now: float | None = None,
    ) -> str:
        """Store an evaluation made outside a search (the editor's) as a run of its own.

        The run has strategy `"editor"` and one candidate, 0, with its per-example results
        (and traces), so Live and Compare show it like any run's candidate; a run journal is
        written (as a search writes one, so a database another process holds loses nothing)
        and ingested now.

        Args:
            problem_name: the problem it was evaluated on.
            spec: the topology evaluated.
            evaluation: `evaluate`'s result for `spec`.
            parent: `(run_id, candidate_idx)` of the candidate the topology was edited from,
                recorded as `RunStarted.config["parent"]` (see `editor_parent`).
            source: where the working copy came from, in words (the candidate's `thought`).
            now: the events' timestamp, s since the epoch (default: the clock).

        Returns:
            The new run's id.

        Raises:
            StoreError: the journal cannot be written.
        """
        from core.search._emission import example_event_fields
        from core.search.events import (
            ArchiveSnapshot,
            CandidateEvaluated,
            CandidateProposed,
            ExampleEvaluated,
            RunFinished,
            RunStarted,
        )

        ts = time.time() if now is None else now
        run_id = new_run_id(ts)
        h = evaluation.spec_hash or spec_hash(spec)
        score = evaluation.aggregate_score
        valid = bool(evaluation.valid) and math.isfinite(score)
        config: dict[str, Any] = {"source": source, "n_validation": evaluation.n_examples}
        if parent is not None:
            config["parent"] = {"run_id": parent[0], "candidate_idx": int(parent[1])}
        seq = iter(range(1 << 62))
        common = {"run_id": run_id, "ts": ts}
        events: list[SearchEvent] = [
            RunStarted(
                **common,
                seq=next(seq),
                problem=problem_name,
                strategy="editor",
                seed=0,
                config=config,
            ),
            CandidateProposed(
                **common,
                seq=next(seq),
                candidate_idx=0,
                generation=0,
                spec_hash=h,
                spec_json=spec.model_dump_json(),
                operator="editor",
                thought=source,
            ),
        ]
        for r in evaluation.results:
            fields = example_event_fields(r)
            fields["spec_hash"] = h
            events.append(ExampleEvaluated(**common, seq=next(seq), candidate_idx=0, **fields))
        events += [
            CandidateEvaluated(
                **common,
                seq=next(seq),
                candidate_idx=0,
                spec_hash=h,
                split=evaluation.split,
                n_examples=evaluation.n_examples,
                accuracy=evaluation.accuracy,
                cost_usd=evaluation.cost_usd,
                latency_ms=evaluation.latency_ms,
                n_agents=evaluation.n_agents or 0,
                depth=evaluation.depth or 0,
                aggregate_score=score,
                valid=valid,
                invalid_reason=None if valid else (evaluation.reason or "non_finite_score"),
                error_rate=evaluation.error_rate,
                blank_rate=evaluation.blank_rate,
                stdev=evaluation.stdev,
            ),
            ArchiveSnapshot(
                **common,
                seq=next(seq),
                generation=0,
                entries=[0],
                front=[0] if valid else [],
                best_idx=0 if valid else None,
                best_score=score if valid else None,
                n_evaluations=len(evaluation.results),
                cost_usd_total=sum(r.cost_usd for r in evaluation.results),
            ),
            RunFinished(
                **common,
                seq=next(seq),
                status="completed",
                reason=f"evaluated in the editor on {evaluation.n_examples} "
                f"{evaluation.split} examples",
                best_idx=0 if valid else None,
            ),
        ]
        journal = RunJournal.create(journal_path(self.db_path, run_id))
        try:
            for event in events:
                journal.append(event)
        finally:
            journal.close()
        self.refresh()
        return run_id

    def editor_parent(self, run_id: str) -> tuple[str, int] | None:
        """The candidate an editor run (`record_evaluation`) was edited from, as
        `(run_id, candidate_idx)`; None for another run or one without a recorded parent."""
        record = self.store.get_run(run_id)
        if record is None or record.strategy != "editor":
            return None
        parent = (record.config or {}).get("parent")
        if not isinstance(parent, Mapping):
            return None
        run, idx = parent.get("run_id"), parent.get("candidate_idx")  # type: ignore[union-attr]
        if not isinstance(run, str) or not isinstance(idx, int):
            return None
        return run, idx
