"""The Runs page: one vocabulary for states in the table and the panel, per-run links, replayed
costs labelled, the command line's options on the start form, Resume for an interrupted run, and a
banner that says what a browser user can do while another process holds the database, with Start
agreeing with it."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from core.errors import StoreBusyError, StoreError, StoreReadOnlyError
from core.storage import DuckDBRunStore, journal_path
from studio import manager as manager_mod
from studio.manager import StudioManager
from studio.views.tables import runs_overview

REPO = Path(__file__).resolve().parents[2]
DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")
RUN_ID = "20250101-120000-abc123"
APP = str(REPO / "studio" / "app.py")
RUN2 = "20250102-000000-run2"


def _texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [s.value for s in at.subheader] + [e.value for e in at.error]
    parts += [s.value for s in at.success] + [i.value for i in at.info]
    parts += [w.value for w in at.warning]
    return "\n".join(str(p) for p in parts)


@pytest.fixture
def app(studio_env: Path) -> Iterator[AppTest]:
    """The studio on the small store, on the Runs page."""
    from studio._st_common import _manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    yield at
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def _start(app: AppTest) -> None:
    [submit] = [b for b in app.button if b.label == "Start search"]
    submit.click().run()
    assert not app.exception, [e.value for e in app.exception]


# ---- the table ----------------------------------------------------------------------------


def test_runs_overview_says_a_paused_search_as_the_panel_links_each_run_and_labels_costs(
    small_db: Path, make_events: Any
) -> None:
    with DuckDBRunStore(small_db) as store:
        store.record_events(make_events(RUN2, finished=False, t0=1_735_776_000.0))
        runs = store.list_runs()
    table = runs_overview(
        runs, search_states={RUN2: "paused"}, cost_basis={"gsm8k_replay": "replayed"}
    )
    assert table["run_id"].tolist() == [RUN2, RUN_ID]
    # what a researcher scans first (status, best score, cost) right after the run and its
    # links, in view at 1000 px; what the run is and where it ran after
    assert table.columns.tolist() == [
        "run_id", "live", "overlay", "status_label", "best_score", "cost_usd", "costs",
        "n_candidates", "problem", "strategy", "seed", "executor", "n_evaluations",
        "design_cost_usd", "design_input_tokens", "design_output_tokens", "best_idx", "started",
    ]  # fmt: skip
    assert table["executor"].tolist() == ["local", "local"]
    # the store says running; the studio holds it paused: the table says what the panel says
    assert table["status_label"].tolist() == [
        "paused, data as of 2025-01-02 00:00:09 UTC",
        "completed: done",
    ]
    assert table["costs"].tolist() == ["replayed (modelled)", "replayed (modelled)"]
    assert table["live"].tolist() == [f"live?run={RUN2}", f"live?run={RUN_ID}"]
    assert table["overlay"].tolist() == [f"overlay?runs={RUN2},{RUN_ID}"] * 2
    # a search this studio no longer runs: the store's words
    plain = runs_overview(runs)
    assert plain["status_label"].tolist() == [
        "running, data as of 2025-01-02 00:00:09 UTC",
        "completed: done",
    ]
    assert plain["costs"].tolist() == ["", ""]
    assert runs_overview(runs.iloc[0:0]).empty


def test_the_overlay_link_takes_the_ten_newest_runs_of_the_problem_and_always_its_own() -> None:
    n = 12
    runs = pd.DataFrame(
        {
            "run_id": [f"r{i:02d}" for i in range(n)],
            "problem": ["p"] * (n - 1) + ["q"],
            "strategy": ["random"] * n,
            "seed": list(range(n)),
            "status": ["completed"] * n,
            "reason": [""] * n,
            "status_label": ["completed"] * n,
            "n_candidates": [1] * n,
            "n_evaluations": [1] * n,
            "cost_usd": [0.0] * n,
            "best_idx": [0] * n,
            "best_score": [0.5] * n,
            "started_at": [float(1_735_776_000 - i) for i in range(n)],
            "last_event_at": [float(1_735_776_000 - i) for i in range(n)],
        }
    )
    links = runs_overview(runs, cost_basis={"p": "measured"})
    newest_ten = ",".join(f"r{i:02d}" for i in range(10))
    assert links["overlay"].tolist()[:10] == [f"overlay?runs={newest_ten}"] * 10
    nine = ",".join(f"r{i:02d}" for i in range(9))
    assert links["overlay"].tolist()[10] == f"overlay?runs={nine},r10"
    assert links["overlay"].tolist()[11] == "overlay?runs=r11"
    assert links["costs"].tolist() == ["measured"] * 11 + [""]


def test_cost_basis_reads_the_problems_prices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    problems = tmp_path / "problems"
    for name, prices in (
        ("priced", '[models.prices."openai:gpt-4o-mini"]\ninput_usd_per_1k = 0.1\n'),
        ("mixed", '[models.prices."replay:a"]\nx = 1\n[models.prices."openai:b"]\nx = 1\n'),
        ("free", "[models]\ntime_scale = 0.0\n"),
        ("broken", "[models\n"),
    ):
        (problems / name).mkdir(parents=True)
        (problems / name / "problem.toml").write_text(f'name = "{name}"\n{prices}')
    monkeypatch.setenv("TOPOLOGY_STUDIO_PROBLEMS", str(problems))
    assert StudioManager.cost_basis("gsm8k_replay") == "replayed"
    assert StudioManager.cost_basis("priced") == "measured"
    assert StudioManager.cost_basis("mixed") == "measured"
    assert StudioManager.cost_basis("free") == ""
    assert StudioManager.cost_basis("broken") == ""
    assert StudioManager.cost_basis("nowhere") == ""
    assert StudioManager.cost_basis(None) == ""


def test_the_runs_page_table_has_links_costs_and_the_refresh_switch(app: AppTest) -> None:
    table = app.dataframe[0].value
    assert table["run_id"].tolist() == [RUN_ID]
    assert table["status_label"].tolist() == ["completed: done"]
    assert table["costs"].tolist() == ["replayed (modelled)"]
    assert table["live"].tolist() == [f"live?run={RUN_ID}"]
    assert table["overlay"].tolist() == [f"overlay?runs={RUN_ID}"]
    assert app.toggle(key="runs_live").value is True
    text = _texts(app)
    assert "Refreshes every 3 s while the switch above is on." in text
    assert (
        "Costs of gsm8k_replay are replayed: modelled from the recorded text at the problem's "
        "list prices; a search spends no money."
    ) in text
    app.toggle(key="runs_live").set_value(False).run()
    assert "Not refreshing (switch on above)." in _texts(app)


def test_editor_evaluations_can_be_left_out_of_the_table(studio_env: Path) -> None:
    from conftest import run_events

    from core.search.events import RunStarted
    from studio._st_common import _manager

    editor_run = "20250103-000000-editor"
    with DuckDBRunStore(studio_env) as store:
        store.record_events(
            [
                e.model_copy(update={"strategy": "editor"}) if isinstance(e, RunStarted) else e
                for e in run_events(editor_run, t0=1_735_862_400.0)
            ]
        )
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.toggle(key="runs_editor").value is True  # every run, as before
    assert at.dataframe[0].value["run_id"].tolist() == [editor_run, RUN_ID]
    at.toggle(key="runs_editor").set_value(False).run()
    assert at.dataframe[0].value["run_id"].tolist() == [RUN_ID]
    assert "1 editor evaluation(s) not listed." in _texts(at)
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def test_the_overlay_link_opens_on_its_runs_problem(studio_env: Path) -> None:
    from studio._st_common import _manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["runs"] = RUN_ID
    at.switch_page(str(REPO / "pages" / "overlay.py"))
    at.run()
    assert not at.exception
    assert at.selectbox(key="ov_problem").value == "gsm8k_replay"
    assert at.multiselect(key="ov_runs_gsm8k_replay").value == [RUN_ID]
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


# ---- a held or read-only database ---------------------------------------------------------

_BUSY_NOTE = (
    "The run database is held by another process (process 4242 (python)), so this page shows "
    "the runs read-only, from their journals. You can still start, resume and watch searches "
    "here: a search writes only its journal, which the database takes in once it is free. "
    "Saving topologies and approving proposals wait until that process ends (close the other "
    "studio or topology-studio command); the studio tries the file again every 5 s by itself."
)


def _held(path: str) -> DuckDBRunStore:
    raise StoreBusyError(
        f"the run store {path} is held by process 4242 (python): DuckDB lets only one process "
        "open a database file, even read-only. ... open_store(path, on_busy='journals') ..."
    )


def _read_only(path: str) -> DuckDBRunStore:
    raise StoreReadOnlyError(f"cannot open the run store {path}: read-only file system")


def test_a_held_database_says_what_the_browser_user_can_do_and_start_agrees(
    small_db: Path, tmp_path: Path
) -> None:
    m = StudioManager(small_db, registry_root=tmp_path / "reg", store_factory=_held)
    assert m.read_only
    assert m.store_note == _BUSY_NOTE
    assert "open_store" not in m.store_note  # no Python advice to a browser user
    assert m.start_refusal() == ""  # a search needs only its journal: Start stays on
    m.close()


def test_a_read_only_database_turns_start_and_resume_off_and_says_so(
    small_db: Path, tmp_path: Path
) -> None:
    m = StudioManager(small_db, registry_root=tmp_path / "reg", store_factory=_read_only)
    assert m.read_only
    assert m.store_note == (
        "The database cannot be written, so this is a read-only copy of it, kept live from the "
        "run journals (retrying every 5 s by itself): cannot open the run store "
        f"{small_db}: read-only file system. Starting or resuming a search, saving topologies "
        "and approving proposals are off here: run the studio with a database in a writable "
        "folder (topology-studio studio --db PATH)."
    )
    refusal = (
        "Starting a search is off: the run database cannot be written (see the note at the top "
        "of the page)."
    )
    assert m.start_refusal() == refusal
    with pytest.raises(StoreError) as err:
        m.start_search(manager_mod.SearchRequest(problem="gsm8k_replay"))
    assert str(err.value) == refusal
    with pytest.raises(StoreError) as err:
        m.resume_search(RUN_ID)
    assert str(err.value) == refusal
    m.close()


class _HeldStore(DuckDBRunStore):
    """The studio's database file as if another process held it (the journal view opens)."""

    def __init__(self, path: str, **kwargs: Any) -> None:
        if path != ":memory:" and not kwargs:
            _held(path)
        super().__init__(path, **kwargs)


class _ReadOnlyStore(DuckDBRunStore):
    def __init__(self, path: str, **kwargs: Any) -> None:
        if path != ":memory:" and not kwargs:
            _read_only(path)
        super().__init__(path, **kwargs)


def test_the_runs_page_banner_and_start_button_agree_on_a_held_database(
    studio_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from studio._st_common import _manager

    monkeypatch.setattr(manager_mod, "DuckDBRunStore", _HeldStore)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    assert [w.value for w in at.warning] == [_BUSY_NOTE]
    [submit] = [b for b in at.button if b.label == "Start search"]
    assert not submit.disabled
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def test_the_runs_page_turns_start_off_when_the_database_cannot_be_written(
    studio_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from studio._st_common import _manager

    monkeypatch.setattr(manager_mod, "DuckDBRunStore", _ReadOnlyStore)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    [note] = [str(w.value) for w in at.warning]
    assert note.startswith("The database cannot be written, so this is a read-only copy of it")
    assert "Starting or resuming a search, saving topologies and approving proposals" in note
    [submit] = [b for b in at.button if b.label == "Start search"]
    assert submit.disabled
    assert (
        "Starting a search is off: the run database cannot be written (see the note at the top "
        "of the page)."
    ) in [c.value for c in at.caption]
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


# ---- the start form -----------------------------------------------------------------------


def test_a_bad_problem_setting_is_said_in_the_page(app: AppTest, studio_env: Path) -> None:
    app.text_area(key="f_set").set_value("gold.validation_size=50\nnovalue")
    _start(app)
    assert [e.value for e in app.error] == [
        "Problem settings: --set expects FIELD=VALUE, got 'novalue'"
    ]
    assert "Started run" not in _texts(app)
    assert not list(Path(f"{studio_env}.journals").glob("*.jsonl"))


def _wait(manager: StudioManager, run_id: str) -> None:
    bg = manager.search(run_id)
    assert bg is not None
    deadline = time.monotonic() + 180
    while bg.alive and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not bg.alive and not bg.error, bg.error


@pytest.mark.slow
def test_the_start_form_passes_the_command_lines_options(app: AppTest, studio_env: Path) -> None:
    from studio._st_common import _manager

    app.number_input(key="f_evals").set_value(3)
    app.number_input(key="f_patience").set_value(5)
    app.number_input(key="f_generations").set_value(1)
    app.number_input(key="f_minibatch").set_value(10)
    app.number_input(key="f_concurrency").set_value(2)
    app.text_area(key="f_set").set_value("gold.validation_size=40\n")
    app.checkbox(key="f_test").uncheck()
    _start(app)
    [started] = [str(s.value) for s in app.success if str(s.value).startswith("Started run ")]
    run_id = started.removeprefix("Started run ").rstrip(".")
    manager = _manager(str(studio_env.resolve()))
    _wait(manager, run_id)
    record = manager.store.get_run(run_id)
    assert record is not None
    assert record.status == "completed"
    assert record.config["budget"] == {
        "max_evaluations": 3,
        "max_usd": 20000.0,
        "max_wall_s": 600.0,
        "patience": 5,
    }
    assert record.config["n_generations"] == 1
    assert record.config["minibatch_size"] == 10
    assert record.config["evaluator"]["concurrency"] == 2
    assert record.config["n_validation"] == 40
    assert record.config["n_test"] == 0  # --no-test
    assert record.problem_config["overrides"] == {
        "gold.validation_size": 40,
        "models.time_scale": 0.0,
        "search.concurrency": 2,
    }
    # the panel says the table's words for it
    app.run()
    table = app.dataframe[0].value
    [said] = table.loc[table["run_id"] == run_id, "status_label"].tolist()
    assert said == "completed: 1 generations done"
    assert f"**{said}**" in [m.value for m in app.markdown]


# ---- resume -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A real four-evaluation search of gsm8k_replay (no test split), recorded by the CLI:
    its database and run id."""
    from core.storage import journal_dir
    from studio.cli import main

    db = tmp_path_factory.mktemp("full") / "full.duckdb"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
        code = main(
            ["search", "gsm8k_replay", "--max-evaluations", "4", "--no-test", "--seed", "3"]
            + ["--db", str(db), "--no-call-cache"]
        )
    assert code == 0
    [journal] = list(journal_dir(db).glob("*.jsonl"))
    return db, journal.stem


def _interrupt_copy(full_run: tuple[Path, str], db: Path, n_candidates: int) -> str:
    """The full run's journal cut after its `n_candidates`-th evaluated candidate's snapshot,
    beside `db`: a run no process writes and that did not finish (interrupted)."""
    src_db, run_id = full_run
    lines = journal_path(src_db, run_id).read_text().splitlines(keepends=True)
    seen, cut = 0, len(lines)
    for i, line in enumerate(lines):
        if '"type":"candidate_evaluated"' in line.replace(" ", ""):
            seen += 1
            if seen == n_candidates:
                cut = i + 1
                break
    dest = journal_path(db, run_id)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("".join(lines[:cut]))
    return run_id


def test_resume_refuses_a_run_that_is_not_interrupted(studio_env: Path, tmp_path: Path) -> None:
    m = StudioManager(studio_env, registry_root=tmp_path / "reg")
    with pytest.raises(StoreError) as err:
        m.resume_search(RUN_ID)
    assert str(err.value) == (
        f"run {RUN_ID} is completed, not interrupted: only a run that no process writes any "
        "more and that did not finish can be resumed"
    )
    with pytest.raises(StoreError) as err:
        m.resume_search("nope")
    assert str(err.value) == "no run 'nope' in this store"
    m.close()


@pytest.mark.slow
def test_resume_on_the_runs_page_finishes_an_interrupted_run_as_the_uninterrupted_one(
    app: AppTest, studio_env: Path, full_run: tuple[Path, str]
) -> None:
    from studio._st_common import _manager

    run_id = _interrupt_copy(full_run, studio_env, 2)
    app.run()
    table = app.dataframe[0].value
    [said] = table.loc[table["run_id"] == run_id, "status_label"].tolist()
    assert said.startswith("interrupted (no process writes it), data as of ")
    assert "Interrupted runs" in [s.value for s in app.subheader]
    assert f"`{run_id}` gsm8k_replay / evolutionary: 2 candidates recorded" in [
        m.value for m in app.markdown
    ]
    app.button(key=f"resume_run_{run_id}").click().run()
    assert not app.exception, [e.value for e in app.exception]
    assert f"Resumed run {run_id}." in [s.value for s in app.success]
    manager = _manager(str(studio_env.resolve()))
    bg = manager.search(run_id)
    assert bg is not None and bg.resumed
    _wait(manager, run_id)
    record = manager.store.get_run(run_id)
    with DuckDBRunStore(full_run[0]) as full:
        want = full.archive(run_id)
        full_record = full.get_run(run_id)
    assert full_record is not None and full_record.reason == "max_evaluations reached (4)"
    assert record is not None
    assert (record.status, record.reason) == ("stopped", "max_evaluations reached (4)")
    assert bg.state == "stopped"  # the store's word, as in the table
    got = manager.store.archive(run_id)
    cols = ["candidate_idx", "spec_hash", "accuracy", "cost_usd", "aggregate_score", "is_best"]
    pd.testing.assert_frame_equal(
        got[cols].reset_index(drop=True), want[cols].reset_index(drop=True)
    )
    assert got["candidate_idx"].tolist() == [0, 1, 2, 3]
    app.run()
    assert "Interrupted runs" not in [s.value for s in app.subheader]
    assert f"`{run_id}` gsm8k_replay / resumed" in [m.value for m in app.markdown]


def test_a_resume_refused_by_the_journal_is_said_in_the_page(
    app: AppTest, studio_env: Path, tmp_path: Path, make_events: Any
) -> None:
    from core.storage import RunJournal

    # an interrupted run whose problem files differ from the recorded ones
    events = make_events("20250103-000000-int", finished=False, t0=1_735_862_400.0)
    started = events[0].model_copy(
        update={"problem_config": {"files_sha256": "0" * 64, "overrides": {}}}
    )
    with RunJournal.create(journal_path(studio_env, "20250103-000000-int")) as journal:
        for event in [started, *events[1:]]:
            journal.append(event)
    app.run()
    app.button(key="resume_run_20250103-000000-int").click().run()
    assert not app.exception
    [error] = [str(e.value) for e in app.error]
    assert error.startswith(
        "StoreError: cannot resume run 20250103-000000-int with another problem than it was "
        "started with: recorded problem 'gsm8k_replay' (files sha256 000000000000), given "
        "problem 'gsm8k_replay' at "
    )
    assert error.endswith("; name the run's own problem, unchanged")
    shutil.rmtree(tmp_path / "registry", ignore_errors=True)


@pytest.mark.slow
def test_a_search_started_while_the_database_is_held_shows_in_the_journal_view(
    small_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # what the banner promises: a search needs only its journal
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    m = StudioManager(small_db, registry_root=tmp_path / "reg", store_factory=_held)
    assert m.read_only
    run_id = m.start_search(
        manager_mod.SearchRequest(
            problem="gsm8k_replay", max_evaluations=2, time_scale=0.0, use_test_split=False
        )
    )
    _wait(m, run_id)
    record = m.store.get_run(run_id)
    assert record is not None
    assert (record.status, record.reason) == ("stopped", "max_evaluations reached (2)")
    assert m.store.list_runs()["run_id"].tolist() == [run_id]  # the view: journals only
    assert m.store.archive(run_id)["candidate_idx"].tolist() == [0, 1]
    m.close()
    # once the file is free, it takes the journal in
    with DuckDBRunStore(small_db) as store:
        assert sorted(store.list_runs()["run_id"].tolist()) == sorted([RUN_ID, run_id])


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("nosuchprovider:gpt-x", "nosuchprovider"),
        ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
    ],
)
def test_a_meta_agent_run_with_a_bad_designer_model_is_refused_before_started(
    app: AppTest, studio_env: Path, monkeypatch: pytest.MonkeyPatch, model: str, said: str
) -> None:
    # the bug this pins: it used to say "Started run ..." and fail later, visible only after a
    # reload, with a "Watch it live" link to another run
    from studio._st_common import _manager

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    store = _manager(str(studio_env.resolve())).store
    runs_before = sorted(store.list_runs()["run_id"])
    app.selectbox(key="f_strategy").set_value("meta_agent")
    app.text_input(key="f_model").set_value(model)
    _start(app)
    errors = [str(e.value) for e in app.error]
    assert len(errors) == 1 and said in errors[0], errors
    assert "Started run" not in _texts(app)
    assert [str(p.label) for p in app.get("page_link")].count("Watch it live") == 0
    assert not list(Path(f"{studio_env}.journals").glob("*.jsonl"))
    assert sorted(store.list_runs()["run_id"]) == runs_before
