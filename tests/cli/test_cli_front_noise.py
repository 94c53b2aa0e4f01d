"""`show` and `show --json` give each validation-front candidate its paired interval against the
cheaper neighbour (studio.views.front_noise), on a run built from events."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "storage"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from store_contract import RunBuilder  # noqa: E402
from test_store_test_front import _run  # noqa: E402

from core.search.noise import paired_bootstrap  # noqa: E402
from core.storage import DuckDBRunStore  # noqa: E402
from studio.cli import main  # noqa: E402

IDS = [f"q{i:02d}" for i in range(20)]
RIGHT = {0: 10, 1: 15, 3: 15}  # 1 is right on 5 more than 0; 3 on exactly the same as 1


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("TOPOLOGY_STUDIO_DB", raising=False)
    path = tmp_path / "runs.duckdb"
    events = _run([])
    b = RunBuilder(seq=len(events))  # the examples after the run's own events
    examples = [
        b.example(idx, eid, 1.0 if k < right else 0.0)
        for idx, right in RIGHT.items()
        for k, eid in enumerate(IDS)
    ]
    with DuckDBRunStore(path, auto_ingest=False) as store:
        store.record_events([*events[:-1], *examples, events[-1]])
    return path


def test_show_prints_each_front_candidates_interval(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", "run-a", "--db", str(db)]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index("== Front noise (validation, paired bootstrap: 1,000 resamples, seed 0, 95%) ==")
    gain = paired_bootstrap([1.0] * 15 + [0.0] * 5, [1.0] * 10 + [0.0] * 10, seed=0)
    assert gain.mean == 0.25 and gain.low > 0.0  # 5 of 20 better, none worse: a real gain
    assert out[at + 1].split() == [
        "candidate",
        "val_accuracy",
        "vs_cheaper",
        "gain",
        "interval",
        "noise",
    ]
    assert out[at + 2].split() == ["0", "0.5000", "-", "-", "-"]
    assert out[at + 3].split() == [
        "1", "0.8000", "0", "+25.00", f"[{gain.low * 100:+.2f},", f"{gain.high * 100:+.2f}]",
    ]  # fmt: skip
    # 3 answers exactly as 1 does: gain 0 with the interval [0, 0], within noise
    assert out[at + 4].split() == [
        "3",
        "0.9000",
        "1",
        "+0.00",
        "[+0.00,",
        "+0.00]",
        "within",
        "noise",
    ]
    assert out[at + 5] == (
        "(1 of 3 front candidates within noise: their gain in accuracy points over the next "
        "cheaper front candidate, on the same validation problems, could be zero)"
    )


def test_show_json_carries_the_intervals(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "run-a", "--json", "--db", str(db)]) == 0
    front = json.loads(capsys.readouterr().out)["validation_front"]
    got = {
        r["candidate_idx"]: (r["cheaper_idx"], r["gain_vs_cheaper"], r["within_noise"])
        for r in front
    }
    assert got == {0: (None, None, False), 1: (0, 0.25, False), 3: (1, 0.0, True)}
