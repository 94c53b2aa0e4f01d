"""The studio manager's background searches: the request, the live handle, and the methods
that start, pause, resume and stop them (`StudioManager` inherits `SearchesMixin`; the rules are
in `studio.manager`'s docstring, section "Background searches")."""

from __future__ import annotations

import asyncio
import io
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.agents.providers import ProviderPolicy, apply_base_url, use_policy
from core.errors import (
    ProviderError,
    StoreError,
)
from core.problems import Problem
from core.search.budget import Budget
from core.search.events import SearchEvent
from core.storage import (
    RunJournal,
    RunStore,
    journal_path,
    new_run_id,
)
from core.storage.health import read_health
from core.vocab.health import HealthSnapshot
from studio.views.phases import phase_two_of, search_of

_log = logging.getLogger("studio.manager")
"""The manager's logger (a search that fails or stops is logged there)."""

SearchState = Literal["starting", "running", "paused", "stopping", "completed", "stopped", "failed"]
"""A background search's state, in the words the store uses for a run (`RunRecord.status`,
`RunFinished.status`), so the Runs table and its panel agree: `starting` before the search's
first step, `paused` and `stopping` while this studio holds or stops it, then the status its
`run_finished` recorded."""


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


class SearchesMixin:
    """`StudioManager`'s background searches (see `studio.manager`)."""

    db_path: Path
    _lock: threading.RLock
    _searches: dict[str, BackgroundSearch]

    if TYPE_CHECKING:

        @property
        def store(self) -> RunStore: ...

        def problem(self, name: str, overrides: Mapping[str, Any] | None = None) -> Problem: ...

        @staticmethod
        def problem_names() -> list[str]: ...

        def start_refusal(self) -> str: ...

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
        # as the CLI does: the problem's [models] base_url is OPENAI_BASE_URL unless the
        # environment has one, set before any model is built from a name (the preflight below)
        apply_base_url(problem.config.models.base_url)
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
                executor=executor,
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
        except BaseException:
            journal.close()
            path.unlink(missing_ok=True)
            if executor is not None:
                executor.close()
            raise
        self._launch(bg, run, journal, path, problem.provider_policy)
        return run_id

    def _executor_for(self, request: SearchRequest, problem: Problem) -> Any:
        """The request's executor as `--executor` would make it (`studio.cli._executor.
        executor_for`), not started; None: local.

        Raises:
            StoreError: a malformed Ray address (the message names the forms), Ray not
                installed, or another search on Ray still running in this studio (Ray is one
                instance per process: the first to end would shut it down under the other).
        """
        from studio.cli._common import CliUsageError
        from studio.cli._executor import executor_for

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
        from studio.cli._common import CliUsageError
        from studio.cli._setup import resume_setup

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
        apply_base_url(setup.problem.config.models.base_url)  # as the CLI does
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
        from studio.cli._common import CliUsageError
        from studio.cli._output import Output
        from studio.cli._prompts import recorded_prompt_phase, run_prompt_phase_on
        from studio.cli._setup import resume_setup

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
