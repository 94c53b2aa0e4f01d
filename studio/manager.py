"""The studio's manager: the one run store, background searches, the topology registry.

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
  (`studio._cli_search.resume_setup`: the same checks, the recorded options). A search's
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
  approved proposals there and records the approval in the store.
"""

from __future__ import annotations

import asyncio
import getpass
import io
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from core.agents.providers import ProviderPolicy, use_policy
from core.errors import (
    ProviderError,
    StoreBusyError,
    StoreError,
    StoreReadOnlyError,
    TopologyStudioError,
)
from core.evaluation.evaluator import CandidateEvaluation
from core.ir import TopologySpec, spec_hash
from core.problems import Problem, load_problem
from core.search.apply import GeneDiff, apply_specs
from core.search.budget import Budget
from core.search.events import SearchEvent
from core.search.pareto import DEFAULT_OBJECTIVES, Objective
from core.search.registry import Approval, TopologyRegistry
from core.storage import (
    DuckDBRunStore,
    IngestError,
    IngestReport,
    ProposalRecord,
    RunJournal,
    RunRecord,
    RunStore,
    TopologyVersion,
    journal_dir,
    journal_path,
    new_run_id,
)
from core.storage.health import read_health
from core.vocab.health import HealthSnapshot
from studio.registry_root import REGISTRY_ENV, default_registry_root
from studio.views.phases import phase_two_of, search_of

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

SearchState = Literal["starting", "running", "paused", "stopping", "completed", "stopped", "failed"]
"""A background search's state, in the words the store uses for a run (`RunRecord.status`,
`RunFinished.status`), so the Runs table and its panel agree: `starting` before the search's
first step, `paused` and `stopping` while this studio holds or stops it, then the status its
`run_finished` recorded."""

_HELD_BY = re.compile(r"is held by (?P<who>.+?): ")
"""The holder named in a `StoreBusyError`'s message (`process 123 (python)`)."""


def current_user() -> str:
    """Who approves in this studio: `$TOPOLOGY_STUDIO_USER`, else the login name."""
    env = os.environ.get("TOPOLOGY_STUDIO_USER", "").strip()
    if env:
        return env
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER", "studio")


def _file_identity(path: Path) -> tuple[int, int] | None:
    """`(device, inode)` of a file, None when it does not exist."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


class SearchRequest(BaseModel):
    """A search started from the studio's form."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    problem: str = Field(min_length=1)
    """The problem's name (or directory)."""
    strategy: str = "evolutionary"
    """`evolutionary`, `random` or `meta_agent`."""
    seed: int = 42
    """The search's random seed."""
    max_evaluations: int | None = Field(default=20, ge=1)
    """Candidate evaluations (the seed counts one); None: the problem's default."""
    max_usd: float | None = Field(default=None, ge=0)
    """USD limit; None: the problem's default."""
    max_wall_s: float | None = Field(default=None, gt=0)
    """Wall-time limit in seconds; None: the problem's default."""
    n_generations: int | None = Field(default=None, ge=1)
    """Generations; None: the strategy's default."""
    meta_model: str | None = None
    """The meta agent's designer model (`provider:model`); None: the problem's."""
    time_scale: float | None = Field(default=None, ge=0)
    """Override of the problem's `models.time_scale` (replayed latency); None: keep it."""
    use_test_split: bool = True
    """Score the winner once on the held-out test split at the end (`--no-test`: False)."""
    patience: int | None = Field(default=None, ge=1)
    """Evaluations in a row without a new best before stopping (`--patience`); None: the
    problem's."""
    minibatch_size: int | None = Field(default=None, ge=1)
    """Validation examples per candidate evaluation during the search (`--minibatch-size`);
    None: the problem's."""
    concurrency: int | None = Field(default=None, ge=1)
    """Examples evaluated at once (`--concurrency`); None: the problem's."""
    overrides: dict[str, Any] = Field(default_factory=dict[str, Any])
    """Problem settings replaced, dotted key -> value (`--set KEY=VALUE`, e.g.
    `{"gold.validation_size": 50}`)."""
    executor: Literal["local", "ray"] = "local"
    """Where evaluations run (`--executor`): this process, or Ray worker actors."""
    ray_address: str | None = None
    """The Ray cluster (`--ray-address`: `auto`, `HOST:PORT`, `ray://HOST:PORT`); None: a
    private local Ray instance. Only with `executor="ray"`."""


@dataclass
class BackgroundSearch:
    """A search the studio runs in a thread (a live handle).

    Attributes:
        run_id: the run's id.
        request: what was asked for.
        state: `starting`, `running`, `paused`, `stopping`, then how it ended: `completed`,
            `stopped` or `failed` (`SearchState`).
        error: why it failed ("" otherwise).
        started_at: Unix seconds.
        n_events: events emitted so far.
        held: True while the run's thread waits at the pause gate (paused for real).
        resumed: True for an interrupted run this studio continued (`resume_search`).
    """

    run_id: str
    request: SearchRequest
    state: SearchState = "starting"
    error: str = ""
    started_at: float = field(default_factory=time.time)
    n_events: int = 0
    held: bool = False
    resumed: bool = False
    ended: Literal["completed", "stopped", "failed"] | None = None
    """The status of its `run_finished` event, once emitted."""
    _run: Any = None
    _thread: threading.Thread | None = None
    _gate: threading.Event = field(default_factory=threading.Event)
    _stop_requested: bool = False
    _executor: Any = None
    """Its remote executor (`--executor ray`), closed when it ends; None: local."""
    _health: Any = None
    """Its `HealthRecorder` (with a remote executor), closed before the executor."""

    @property
    def alive(self) -> bool:
        """True while its thread runs."""
        return self._thread is not None and self._thread.is_alive()


class StudioManager:
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
        self._view = _ReopeningStore(self)
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

    # ---- background searches ----------------------------------------------------------------

    def worker_health(self, run_id: str) -> HealthSnapshot | None:
        """The latest snapshot of a run's workers, as its driver recorded it beside its
        journal (`core.storage.health`; a search on a remote executor, from this studio or
        the command line); None: none recorded (a local run) or not readable.

        Raises:
            StoreError: not a valid run id.
        """
        return read_health(self.db_path, run_id)

    def searches(self) -> list[BackgroundSearch]:
        """The searches started by this studio, newest first."""
        with self._lock:
            return sorted(self._searches.values(), key=lambda s: -s.started_at)

    def search(self, run_id: str) -> BackgroundSearch | None:
        """The background search of `run_id`, if this studio started it."""
        with self._lock:
            return self._searches.get(run_id)

    def start_search(self, request: SearchRequest) -> str:
        """Start a search in a background thread; returns its run id at once.

        The problem is loaded (and the search built) in the caller's thread, so a bad problem,
        strategy, budget or `overrides` raises here, as a `TopologyStudioError` or
        `ValueError`.

        Raises:
            TopologyStudioError: the problem cannot be loaded, or the database cannot be
                written (`start_refusal`).
            ValueError: an unknown strategy or bad options.
        """
        from core.search.engine import build_search  # the engine loads heavy modules

        refusal = self.start_refusal()
        if refusal:
            raise StoreError(refusal)
        overrides: dict[str, Any] = dict(request.overrides)
        if request.time_scale is not None:
            overrides["models.time_scale"] = request.time_scale
        if request.concurrency is not None:
            overrides["search.concurrency"] = request.concurrency
        problem = self.problem(request.problem, overrides)
        defaults = problem.search
        budget = Budget(
            max_evaluations=request.max_evaluations or defaults.max_evaluations,
            max_usd=request.max_usd if request.max_usd is not None else defaults.max_usd,
            max_wall_s=request.max_wall_s
            if request.max_wall_s is not None
            else defaults.max_wall_time_s,
            patience=request.patience if request.patience is not None else defaults.patience,
        )
        executor = self._executor_for(request, problem)
        run_id = new_run_id()
        path = journal_path(self.db_path, run_id)
        journal = RunJournal.create(path)
        bg = BackgroundSearch(run_id=run_id, request=request)
        if executor is not None:
            from core.search.subscribers import HealthRecorder

            bg._executor = executor
            bg._health = HealthRecorder(executor, self.db_path, run_id)
        config: dict[str, Any] = {}
        if request.n_generations is not None:
            config["n_generations"] = request.n_generations
        if request.minibatch_size is not None:
            config["minibatch_size"] = request.minibatch_size
        try:
            run = build_search(
                problem,
                request.strategy,
                config=config or None,
                seed=request.seed,
                model=request.meta_model or None,
                budget=budget,
                run_id=run_id,
                subscribers=[self._subscriber(bg, journal), *([bg._health] if bg._health else [])],
                handle_sigint=False,
                use_test_split=request.use_test_split,
            )
            # what the run would find in its first step, found now: a designer model that
            # cannot be built (unknown provider, missing API key, no price) is refused before
            # "Started run", not visible only after a reload
            run.budget.validate_allows_work()
            run.strategy.preflight(run.space)
            if executor is not None:
                # connected now: nothing answering at the address, or workers that cannot
                # load the problem, is refused before "Started run"; the run records its
                # workers (`RunStarted.config["executor"]`)
                executor.start()
                run.evaluator.set_executor(executor)
        except BaseException:
            journal.close()
            path.unlink(missing_ok=True)
            if executor is not None:
                executor.close()
            raise
        self._launch(bg, run, journal, path, problem.provider_policy)
        return run_id

    def _executor_for(self, request: SearchRequest, problem: Problem) -> Any:
        """The request's executor as `--executor` would make it (`studio._cli_executor.
        executor_for`), not started; None: local.

        Raises:
            StoreError: a malformed Ray address (the message names the forms), Ray not
                installed, or another search on Ray still running in this studio (Ray is one
                instance per process: the first to end would shut it down under the other).
        """
        from studio._cli_common import CliUsageError
        from studio._cli_executor import executor_for

        if request.executor == "local" and not (request.ray_address or "").strip():
            return None
        on_ray = [s.run_id for s in self.searches() if s.alive and s.request.executor == "ray"]
        if request.executor == "ray" and on_ray:
            raise StoreError(
                f"run {on_ray[0]} is running on Ray in this studio: start another Ray search "
                "when it ends, or from the command line (topology-studio search PROBLEM "
                "--executor ray)"
            )
        try:
            return executor_for(request.executor, request.ray_address, problem, problem.rate_limits)
        except CliUsageError as exc:
            raise StoreError(str(exc).replace("--ray-address: ", "Ray address: ")) from None

    def resume_search(self, run_id: str) -> str:
        """Continue an interrupted run in a background thread, as
        `topology-studio search PROBLEM --resume RUN` does: the same checks (the problem's
        files unchanged, the journal not written by a live process), its recorded options, the
        recorded work served from the journal; returns the run id at once.

        The problem is the one the run records, loaded by name only when it is one of
        `problem_names()` (a journal never chooses a path to load code from).

        Raises:
            StoreError: no such run, a run that is not interrupted, its problem not found here,
                a journal another process writes, changed problem files (the message names
                them), or a database that cannot be written.
        """
        from core.search.engine import build_search
        from studio._cli_common import CliUsageError
        from studio._cli_search import resume_setup

        refusal = self.start_refusal()
        if refusal:
            raise StoreError(refusal)
        running = self.search(run_id)
        if running is not None and running.alive:
            raise StoreError(f"run {run_id} is already running in this studio")
        record = self.store.get_run(run_id)
        if record is None:
            raise StoreError(f"no run {run_id!r} in this store")
        # one run, two phases (`studio.views.phases`): phase 2's record resumes as its search,
        # and a search whose phase 2 was cut resumes phase 2
        runs = self.store.list_runs()
        search = search_of(runs, run_id)
        if search is not None:
            return self.resume_search(search)
        second = phase_two_of(runs).get(run_id)
        if record.status != "interrupted" and second is not None:
            child = self.store.get_run(second)
            if child is not None and child.status == "interrupted":
                return self._resume_prompt_phase(run_id, record.problem, child)
        if record.status != "interrupted":
            raise StoreError(
                f"run {run_id} is {record.status}, not interrupted: only a run that no process "
                "writes any more and that did not finish can be resumed"
            )
        if record.problem not in self.problem_names():
            raise StoreError(
                f"run {run_id}'s problem {record.problem!r} is not among this studio's problems "
                f"({', '.join(self.problem_names()) or 'none'}): resume it on the command line, "
                f"topology-studio search PROBLEM --resume {run_id} --db {self.db_path}"
            )
        try:
            setup = resume_setup(record.problem, run_id, self.db_path)
        except CliUsageError as exc:
            raise StoreError(str(exc)) from exc
        journal = setup.journal
        budget = setup.budget
        request = SearchRequest(
            problem=record.problem,
            strategy=setup.strategy,
            seed=setup.seed if setup.seed is not None else 42,
            max_evaluations=budget.max_evaluations,
            max_usd=budget.max_usd,
            max_wall_s=budget.max_wall_s,
            patience=budget.patience,
            use_test_split=setup.use_test_split,
        )
        bg = BackgroundSearch(run_id=run_id, request=request, resumed=True)
        try:
            run = build_search(
                setup.problem,
                setup.strategy,
                config=setup.config,
                seed=setup.seed,
                model=setup.model,
                budget=budget,
                run_id=run_id,
                subscribers=[self._subscriber(bg, journal)],
                handle_sigint=False,
                resume_from=list(journal.recorded),
                use_test_split=setup.use_test_split,
                test_size=setup.test_size,
            )
        except BaseException:
            journal.close()  # the recorded journal stays as it was
            raise
        self._launch(
            bg, run, journal, journal_path(self.db_path, run_id), setup.problem.provider_policy
        )
        return run_id

    def _resume_prompt_phase(self, run_id: str, problem: str | None, child: Any) -> str:
        """Continue the interrupted phase 2 (record `child`) of the completed search `run_id`
        in a background thread, as `topology-studio search PROBLEM --resume RUN` does: the
        search's problem with its recorded settings (`resume_setup`; the search's journal is
        only read), phase 2's recorded reflection model, budget and seed
        (`recorded_prompt_phase`), the topology it evolves from its `config.winner_spec`, and
        every call already made answered from its call log. The studio ingests phase 2's
        journal itself, as for any run. Returns `run_id` at once.

        Raises:
            StoreError: the problem is not among this studio's, changed problem files, damaged
                or missing phase-2 settings, a phase 2 recorded without its topology (before
                `winner_spec` was recorded: resume it on the command line).
        """
        from core.ir import parse_topology
        from studio._cli_common import CliUsageError
        from studio._cli_output import Output
        from studio._cli_prompts import recorded_prompt_phase, run_prompt_phase_on
        from studio._cli_search import resume_setup

        hint = (
            f"topology-studio search {problem or 'PROBLEM'} --resume {run_id} --db {self.db_path}"
        )
        if problem not in self.problem_names():
            raise StoreError(
                f"run {run_id}'s problem {problem!r} is not among this studio's problems: "
                f"resume it on the command line, {hint}"
            )
        winner_json = child.config.get("winner_spec")
        if not isinstance(winner_json, str):
            raise StoreError(
                f"phase 2 of run {run_id} was recorded without its topology: resume it on the "
                f"command line, {hint}"
            )
        try:
            setup = resume_setup(problem, run_id, self.db_path)
            setup.journal.close()  # phase 1 is complete: its journal is read, never written
            phase = recorded_prompt_phase(self.db_path, run_id, None)
        except CliUsageError as exc:
            raise StoreError(str(exc)) from exc
        if phase is None or not phase.resuming:
            raise StoreError(f"phase 2 of run {run_id} has no interrupted settings to resume")
        winner = parse_topology(winner_json)
        bg = BackgroundSearch(
            run_id=run_id,
            request=SearchRequest(problem=problem, strategy="gepa"),
            resumed=True,
        )

        def work() -> None:
            bg.state = "running"
            quiet = Output(io.StringIO(), io.StringIO(), rich_output=False)
            try:
                run_prompt_phase_on(
                    setup.problem, winner, run_id, phase, self.db_path, quiet, ingest=False
                )
                bg.state = "completed"
            except Exception as exc:  # noqa: BLE001 (shown in the page, never a traceback)
                bg.error = f"{type(exc).__name__}: {exc}"
                bg.state = "failed"
                _log.warning("phase 2 of %s failed: %s", run_id, bg.error)

        thread = threading.Thread(target=work, name=f"prompts-{run_id}", daemon=True)
        bg._thread = thread
        with self._lock:
            self._searches[run_id] = bg
        thread.start()
        return run_id

    @staticmethod
    def _subscriber(bg: BackgroundSearch, journal: RunJournal) -> Callable[[SearchEvent], None]:
        """The search's subscriber: the journal, the event count, the pause gate, and the
        final status (`run_finished`) as the search's state."""
        bg._gate.set()

        def on_event(event: SearchEvent) -> None:
            journal.append(event)
            bg.n_events += 1
            if event.type == "run_finished":
                bg.ended = event.status
            if event.type in ("candidate_evaluated", "archive_snapshot") and not bg._gate.is_set():
                bg.state = "paused"
                bg.held = True
                bg._gate.wait()
                bg.held = False
                if bg.state == "paused":
                    bg.state = "running"

        return on_event

    def _launch(
        self,
        bg: BackgroundSearch,
        run: Any,
        journal: RunJournal,
        path: Path,
        policy: ProviderPolicy | None = None,
    ) -> None:
        """Run `run` in a daemon thread, recording its end in `bg`; its model calls meet faults
        by `policy` (the problem's `[models]` settings; `core.agents.providers`)."""
        bg._run = run

        def work() -> None:
            bg.state = "running"
            if bg._health is not None:
                bg._health.start()
            try:
                with use_policy(policy or ProviderPolicy()):
                    asyncio.run(run.run())
                bg.state = bg.ended or "completed"
            except ProviderError as exc:  # the provider kept failing: stopped, resumable
                bg.error = str(exc)
                bg.state = "stopped"
                _log.warning("search %s stopped: %s", bg.run_id, bg.error)
            except Exception as exc:  # noqa: BLE001 (shown in the page, never a traceback)
                bg.error = f"{type(exc).__name__}: {exc}"
                bg.state = "failed"
                _log.warning("search %s failed: %s", bg.run_id, bg.error)
            finally:
                if bg._health is not None:
                    bg._health.close()  # a last snapshot, before the workers go
                if bg._executor is not None:
                    bg._executor.close()
                journal.close()
                if path.exists() and path.stat().st_size == 0:
                    path.unlink()  # failed before its first event: no ghost run

        thread = threading.Thread(target=work, name=f"search-{bg.run_id}", daemon=True)
        bg._thread = thread
        with self._lock:
            self._searches[bg.run_id] = bg
        thread.start()

    def stop(self, run_id: str, reason: str = "stopped from the studio") -> bool:
        """Ask a background search to stop cleanly (also releases a pause).

        Returns:
            False when this studio is not running that search.
        """
        bg = self.search(run_id)
        if bg is None or not bg.alive:
            return False
        bg._stop_requested = True
        bg.state = "stopping"
        if bg._run is not None:
            bg._run.request_stop(reason)
        bg._gate.set()
        return True

    def pause(self, run_id: str) -> bool:
        """Hold a background search after the candidate in flight (see the module docstring).

        Returns:
            False when this studio is not running that search.
        """
        bg = self.search(run_id)
        if bg is None or not bg.alive or bg._stop_requested:
            return False
        bg._gate.clear()
        bg.state = "paused"
        return True

    def resume(self, run_id: str) -> bool:
        """Let a paused background search go on.

        Returns:
            False when this studio is not running that search.
        """
        bg = self.search(run_id)
        if bg is None or not bg.alive:
            return False
        if bg.state == "paused":
            bg.state = "running"
        bg._gate.set()
        return True

    # ---- evaluation -------------------------------------------------------------------------

    def evaluate(
        self,
        problem_name: str,
        spec: TopologySpec,
        *,
        split: str = "validation",
        limit: int | None = 20,
        time_scale: float | None = 0.0,
    ) -> CandidateEvaluation:
        """Evaluate a topology on the first `limit` examples of a problem's split (blocking).

        Args:
            problem_name: the problem.
            spec: the topology.
            split: `"validation"` or `"test"`.
            limit: examples to use (None: the whole split).
            time_scale: replayed-latency override (0: no sleeping; None: the problem's).

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

    # ---- proposals, approvals, registry -----------------------------------------------------

    def registry_target(self, name: str) -> str:
        """The store's name for a registry topology: `<registry root>/<name>` (as the CLI's
        `apply` records it)."""
        return f"{self.registry.root}/{name}"

    def propose(
        self,
        name: str,
        spec: TopologySpec,
        *,
        run_id: str | None = None,
        candidate_idx: int | None = None,
        note: str = "",
        who: str | None = None,
    ) -> int:
        """Record a proposal to write `spec` as topology `name` of the registry.

        The spec is also stored by its canonical hash (so the diff page can read it back) and,
        from the editor, saved as the next draft version of `name` in the store.

        Returns:
            The proposal id.

        Raises:
            StoreError: the store is read-only.
        """
        store = self.store
        text = spec.model_dump_json()
        h = spec_hash(spec)
        store.put_spec(h, text)
        base = self.registry.current_version(name)
        before = None if base is None else self.registry.get(name, base)
        from core.ir.diff import unified_json_diff

        diff = unified_json_diff(before, spec)
        if run_id is None:
            store.save_topology_version(name, text, spec_hash=h, note=note or "saved in the editor")
        return store.record_proposal(
            self.registry_target(name),
            text,
            spec_hash=h,
            run_id=run_id,
            candidate_idx=candidate_idx,
            base_version=base,
            diff=diff,
            proposed_by=who or current_user(),
        )

    def approve(
        self,
        proposal_id: int,
        name: str,
        spec: TopologySpec,
        shown: GeneDiff,
        *,
        comment: str = "",
        who: str | None = None,
    ) -> GeneDiff:
        """Apply an approved proposal to the registry, atomically, and record the approval.

        Args:
            proposal_id: the proposal.
            name: the registry topology.
            spec: the proposed spec.
            shown: the dry-run diff the person approved (the write is refused if the target
                changed since, `StaleTargetError`).
            comment: the approver's comment.
            who: the approver (default `current_user()`).

        Returns:
            The written diff (`new_version` set).

        Raises:
            StaleTargetError: the registry topology changed since `shown` was made.
            ApplyError: the registry cannot be written (`"cannot write registry <root>:
                <why>"`: a read-only folder, a path below a file, a full disk).
            StoreError: the store is read-only.

        When any of these is raised nothing was written and no decision recorded: the proposal
        stays pending, to approve again once the cause is fixed, or to reject.
        """
        store = self.store
        if store.read_only:
            raise StoreError("the database is held by another process: nothing was written")
        by = who or current_user()
        (done,) = apply_specs(
            {name: spec},
            self.registry,
            dry_run=False,
            expected=[shown],
            approval=Approval(by=by, comment=comment),
            note=f"proposal {proposal_id}",
        )
        store.record_approval(
            proposal_id,
            who=by,
            comment=comment,
            base_version=shown.base_version,
            applied_version=done.new_version,
        )
        return done

    def reject(self, proposal_id: int, *, comment: str = "", who: str | None = None) -> int:
        """Record a rejection of a proposal (nothing is written to the registry)."""
        return self.store.record_approval(
            proposal_id, who=who or current_user(), comment=comment, decision="rejected"
        )

    def dry_run(self, name: str, spec: TopologySpec) -> GeneDiff:
        """The diff writing `spec` as `name` would make (nothing is written)."""
        (shown,) = apply_specs({name: spec}, self.registry, dry_run=True)
        return shown

    def rollback(
        self, name: str, version: int, *, comment: str = "", who: str | None = None
    ) -> int:
        """Make an earlier version of a registry topology current again (as a new version),
        recorded as an approved proposal in the store when it is writable.

        Returns:
            The new version number.

        Raises:
            ApplyError: no such version, or the registry cannot be written (then nothing is
                recorded in the store).
        """
        by = who or current_user()
        spec = self.registry.get(name, version)
        base = self.registry.current_version(name)
        # the registry first: a refused write (ApplyError) leaves no proposal behind in the store
        rec = self.registry.rollback(
            name, version, base_version=base, approval=Approval(by=by, comment=comment)
        )
        store = self.store
        if not store.read_only:
            h = spec_hash(spec)
            store.put_spec(h, spec.model_dump_json())
            proposal_id = store.record_proposal(
                self.registry_target(name),
                spec.model_dump_json(),
                spec_hash=h,
                base_version=base,
                diff=f"rollback to v{version}",
                proposed_by=by,
            )
            store.record_approval(
                proposal_id,
                who=by,
                # the store's record says it was a rollback (the diff page labels it so)
                comment=f"rollback to v{version}" + (f": {comment}" if comment else ""),
                base_version=base,
                applied_version=rec.version,
            )
        return rec.version


class _ReopeningStore(RunStore):
    """The manager's store as pages see it (`StudioManager.store`): every call goes to the
    store in use at that moment, and is retried once on a reopened store when the database file
    was deleted or replaced under it. `close()` closes the store in use; the manager opens the
    file again on the next call."""

    def __init__(self, manager: StudioManager) -> None:
        self._manager = manager

    def __repr__(self) -> str:
        return f"<the store of {self._manager!r}>"

    @property
    def read_only(self) -> bool:
        return self._manager._call(lambda s: s.read_only)

    def close(self) -> None:
        with self._manager._lock:
            self._manager._forget(self._manager._current())

    def record_events(self, events: Iterable[SearchEvent]) -> int:
        batch = list(events)  # an iterator would be used up by a failed first try
        return self._manager._call(lambda s: s.record_events(batch))

    def ingest(self) -> IngestReport:
        return self._manager._call(lambda s: s.ingest())

    def get_run(self, run_id: str) -> RunRecord | None:
        return self._manager._call(lambda s: s.get_run(run_id))

    def phase_two_run(self, run_id: str) -> str | None:
        return self._manager._call(lambda s: s.phase_two_run(run_id))

    def list_runs(self) -> pd.DataFrame:
        return self._manager._call(lambda s: s.list_runs())

    def put_spec(self, spec_hash: str, spec_json: str) -> bool:
        return self._manager._call(lambda s: s.put_spec(spec_hash, spec_json))

    def get_spec(self, spec_hash: str) -> str | None:
        return self._manager._call(lambda s: s.get_spec(spec_hash))

    def archive(
        self,
        run_id: str,
        *,
        split: str | None = None,
        objectives: Sequence[Objective] = DEFAULT_OBJECTIVES,
        include_unevaluated: bool = False,
    ) -> pd.DataFrame:
        return self._manager._call(
            lambda s: s.archive(
                run_id,
                split=split,
                objectives=objectives,
                include_unevaluated=include_unevaluated,
            )
        )

    def example_accuracies(
        self, run_id: str, candidate_idx: int, *, split: str | None = None
    ) -> list[tuple[str, int, float | None]]:
        return self._manager._call(
            lambda s: s.example_accuracies(run_id, candidate_idx, split=split)
        )

    def candidate_examples(
        self, run_id: str, candidate_idx: int, *, split: str | None = None, with_trace: bool = False
    ) -> pd.DataFrame:
        return self._manager._call(
            lambda s: s.candidate_examples(
                run_id, candidate_idx, split=split, with_trace=with_trace
            )
        )

    def example_trace(
        self, run_id: str, candidate_idx: int, example_id: str, *, trial: int = 0
    ) -> list[dict[str, Any]] | None:
        return self._manager._call(
            lambda s: s.example_trace(run_id, candidate_idx, example_id, trial=trial)
        )

    def compare_candidates(
        self,
        run_id: str,
        a: int,
        b: int,
        *,
        run_id_b: str | None = None,
        threshold: float = 0.5,
    ) -> pd.DataFrame:
        return self._manager._call(
            lambda s: s.compare_candidates(run_id, a, b, run_id_b=run_id_b, threshold=threshold)
        )

    def progress(self, run_id: str) -> pd.DataFrame:
        return self._manager._call(lambda s: s.progress(run_id))

    def snapshots(self, run_id: str) -> pd.DataFrame:
        return self._manager._call(lambda s: s.snapshots(run_id))

    def logs(self, run_id: str) -> pd.DataFrame:
        return self._manager._call(lambda s: s.logs(run_id))

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
        return self._manager._call(
            lambda s: s.record_proposal(
                target,
                spec_json,
                spec_hash=spec_hash,
                run_id=run_id,
                candidate_idx=candidate_idx,
                base_version=base_version,
                diff=diff,
                proposed_by=proposed_by,
                when=when,
            )
        )

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
        return self._manager._call(
            lambda s: s.record_approval(
                proposal_id,
                who=who,
                when=when,
                comment=comment,
                base_version=base_version,
                applied_version=applied_version,
                decision=decision,
            )
        )

    def list_proposals(self, target: str | None = None) -> pd.DataFrame:
        return self._manager._call(lambda s: s.list_proposals(target))

    def get_proposal(self, run_id: str | None, proposal_id: int) -> ProposalRecord:
        return self._manager._call(lambda s: s.get_proposal(run_id, proposal_id))

    def list_ingest_errors(self, run_id: str | None = None) -> list[IngestError]:
        return self._manager._call(lambda s: s.list_ingest_errors(run_id))

    def save_topology_version(
        self, target: str, spec_json: str, *, spec_hash: str | None = None, note: str = ""
    ) -> int:
        return self._manager._call(
            lambda s: s.save_topology_version(target, spec_json, spec_hash=spec_hash, note=note)
        )

    def list_topology_versions(self, target: str) -> pd.DataFrame:
        return self._manager._call(lambda s: s.list_topology_versions(target))

    def get_topology_version(self, target: str, version: int | None = None) -> TopologyVersion:
        return self._manager._call(lambda s: s.get_topology_version(target, version))
