"""Where runs execute and their workers' health on the Runs page: the table's `executor` column, the
workers panel of a running run on Ray (from the snapshot its driver recorded beside the journal),
and the Start form's executor choice, with a bad Ray address refused before "Started run"."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from core.storage import DuckDBRunStore
from core.storage.health import write_health
from core.vocab.health import HealthSnapshot, WorkerHealth
from studio.views.tables import runs_overview
from studio.views.workers import health_caption, remote_running, worker_table

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "studio" / "app.py")
RUN_ID = "20250101-120000-abc123"
RAY_RUN = "20250102-000000-onray"
RAY = "ray: 2 workers, local 127.0.0.1"
T0 = 1_735_776_000.0


def _snapshot(taken_at: float) -> HealthSnapshot:
    return HealthSnapshot(
        run_id=RAY_RUN,
        executor=RAY,
        taken_at=taken_at,
        workers=(
            WorkerHealth(
                name="worker-0", state="alive", pid=4242, node="127.0.0.1", batches=3,
                runs=12, restarts=0, in_flight=4, last_seen=taken_at - 2.0,
            ),
            WorkerHealth(
                name="worker-1", state="unreachable", pid=4243, node="127.0.0.1", batches=1,
                runs=4, restarts=1, in_flight=0, last_seen=None,
            ),
        ),
    )  # fmt: skip


def _record_ray_run(db: Path, make_events: object) -> None:
    """A running run whose `RunStarted` recorded a Ray executor, beside the local `RUN_ID`."""
    events = make_events(RAY_RUN, finished=False, t0=T0)  # type: ignore[operator]
    head = events[0].model_copy(update={"config": {"executor": RAY}})
    with DuckDBRunStore(db) as store:
        store.record_events([head, *events[1:]])


# ---- view data ----------------------------------------------------------------------------


def test_the_workers_table_and_caption_say_each_worker_and_the_snapshots_age() -> None:
    snap = _snapshot(1000.0)
    table = worker_table(snap, now=1004.0)
    assert table.to_dict("records") == [
        {
            "worker": "worker-0", "state": "alive", "node": "127.0.0.1", "pid": "4242",
            "runs_done": 12, "in_flight": 4, "batches": 3, "restarts": 0, "last_seen": "6 s ago",
        },
        {
            "worker": "worker-1", "state": "unreachable", "node": "127.0.0.1", "pid": "4243",
            "runs_done": 4, "in_flight": 0, "batches": 1, "restarts": 1, "last_seen": "",
        },
    ]  # fmt: skip
    assert health_caption(snap, now=1004.0) == (
        "ray: 2 workers, local 127.0.0.1: 1 of 2 workers alive; snapshot taken 4 s ago by the "
        "search's driver"
    )
    assert health_caption(snap, now=1000.0 + 600) == (
        "ray: 2 workers, local 127.0.0.1: 1 of 2 workers alive; snapshot taken 10 min ago by "
        "the search's driver (stale: the search may have stopped recording)"
    )


def test_only_running_runs_on_a_remote_executor_have_workers() -> None:
    runs = pd.DataFrame(
        {
            "run_id": ["a", "b", "c", "d"],
            "status": ["running", "running", "completed", "running"],
            "executor": [RAY, "local", RAY, None],
        }
    )
    assert remote_running(runs) == ["a"]
    assert remote_running(runs.drop(columns=["executor"])) == []


def test_the_runs_table_says_where_each_run_executed(small_db: Path, make_events: object) -> None:
    _record_ray_run(small_db, make_events)
    with DuckDBRunStore(small_db) as store:
        runs = store.list_runs()
    table = runs_overview(runs)
    assert dict(zip(table["run_id"], table["executor"], strict=True)) == {
        RAY_RUN: RAY,
        RUN_ID: "local",  # recorded without an executor: before executors existed
    }


# ---- the page -----------------------------------------------------------------------------


@pytest.fixture
def app(studio_env: Path, make_events: object) -> Iterator[AppTest]:
    """The studio's Runs page on the small store plus a running run on Ray."""
    from studio._st_common import _manager

    _record_ray_run(studio_env, make_events)
    at = AppTest.from_file(APP, default_timeout=120)
    yield at
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def _texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [s.value for s in at.subheader] + [e.value for e in at.error]
    parts += [s.value for s in at.success] + [i.value for i in at.info]
    return "\n".join(str(p) for p in parts)


def test_the_runs_page_shows_the_executor_and_the_workers_of_a_running_ray_run(
    app: AppTest, studio_env: Path
) -> None:
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    table = app.dataframe[0].value
    assert table["executor"].tolist() == [RAY, "local"]
    # no snapshot yet: the panel says so
    assert app.selectbox(key="runs_workers_run").options == [RAY_RUN]
    assert (
        f"Run {RAY_RUN} runs on {RAY}; no worker health recorded yet (its driver records it "
        "once the workers are up)."
    ) in _texts(app)
    # the driver's snapshot (ages in minutes and hours: the same however long the page takes)
    now = time.time()
    snap = _snapshot(now - 600.0).model_copy(
        update={
            "workers": tuple(
                w.model_copy(update={"last_seen": None if w.last_seen is None else now - 7200})
                for w in _snapshot(0.0).workers
            )
        }
    )
    write_health(studio_env, snap)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    [_, workers_el] = app.dataframe
    workers = workers_el.value
    assert workers.to_dict("records") == [
        {
            "worker": "worker-0", "state": "alive", "node": "127.0.0.1", "pid": "4242",
            "runs_done": 12, "in_flight": 4, "batches": 3, "restarts": 0,
            "last_seen": "2.0 h ago",
        },
        {
            "worker": "worker-1", "state": "unreachable", "node": "127.0.0.1", "pid": "4243",
            "runs_done": 4, "in_flight": 0, "batches": 1, "restarts": 1, "last_seen": "",
        },
    ]  # fmt: skip
    assert (
        "ray: 2 workers, local 127.0.0.1: 1 of 2 workers alive; snapshot taken 10 min ago by "
        "the search's driver (stale: the search may have stopped recording)"
    ) in _texts(app)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens


@pytest.mark.parametrize(
    ("executor", "address", "said"),
    [
        (
            "ray",
            "head node",
            "StoreError: Ray address: not a Ray address: 'head node'; expected 'auto', "
            "HOST:PORT (e.g. 10.0.0.5:6379) or ray://HOST:PORT (e.g. ray://head:10001)",
        ),
        (
            "ray",
            "10.0.0.5:70000",
            "StoreError: Ray address: not a Ray address: '10.0.0.5:70000' (port 70000 is not "
            "1-65535)",
        ),
        ("local", "auto", "StoreError: --ray-address needs --executor ray"),
        (
            "ray",
            "127.0.0.1:{port}",
            "EvaluationError: no Ray cluster answers at '127.0.0.1:{port}' (Connection refused): "
            "start one there (`ray start --head` on the head node) or leave the address empty "
            "for a private local Ray",
        ),
    ],
)
def test_a_bad_ray_address_is_refused_before_started(
    app: AppTest, studio_env: Path, executor: str, address: str, said: str
) -> None:
    if address.endswith("{port}"):
        pytest.importorskip("ray", reason="the ray extra is not installed")
        port = _closed_port()
        address, said = address.format(port=port), said.format(port=port)
    app.run()
    app.selectbox(key="f_executor").set_value(executor)
    app.text_input(key="f_ray_address").set_value(address)
    [submit] = [b for b in app.button if b.label == "Start search"]
    submit.click().run()
    assert not app.exception, [e.value for e in app.exception]
    assert [str(e.value) for e in app.error] == [said]
    assert "Started run" not in _texts(app)
    assert not list(Path(f"{studio_env}.journals").glob("*.jsonl"))
