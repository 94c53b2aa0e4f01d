"""`apply --yes` killed at each step of its write: the registry write and its record are one
recoverable step.

The registry journals the write with the store's record of it (`.pending.json`) before any
other file; the next `apply` completes the write (spec written) or rolls it back (not written),
records the approval a killed apply did not, and removes temporary files, so the registry never
holds a record without a spec, a stale `current.json`, or a version the store does not know
about. Registry versions the store has no record of are listed.

Each case runs `apply --yes` in a subprocess whose step hooks (`core.search.registry._step`,
`studio.cli.runs._apply_step`) `os._exit` at one step, then a dry-run `apply` in this process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.ir import parse_topology
from core.search.registry import TopologyRegistry, spec_to_json
from core.storage import DuckDBRunStore
from studio.cli import main
from tests.cli.test_cli_apply_errors import BETTER, RUN, SEED_JSON, _events

REPO = Path(__file__).resolve().parents[2]

KILLED = 77
"""The exit code of the killed apply."""

KILL_AT = """
import os, sys
import core.search.registry as registry
import studio.cli.runs as cli_runs
step = sys.argv[1]
def kill(name):
    if name == step:
        os._exit(77)
registry._step = kill
cli_runs._apply_step = kill
from studio.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    """A run store with run RUN (candidate 1 = BETTER), and a registry whose `letters` has
    version 1 (the seed) written outside any apply, so the store has no record of it."""
    db = tmp_path / "runs.duckdb"
    with DuckDBRunStore(db) as store:
        store.record_events(_events())
    reg = tmp_path / "reg"
    TopologyRegistry(reg).write("letters", parse_topology(SEED_JSON), None)
    return db, reg


def _proposals(db: Path) -> list[dict[str, Any]]:
    with DuckDBRunStore(db) as store:
        rows = store.list_proposals().to_dict("records")
    return [
        {
            k: r[k]
            for k in ("target", "run_id", "candidate_idx", "decision", "who", "applied_version")
        }
        for r in rows
    ]


def _files(reg: Path) -> list[str]:
    return sorted(p.name for p in (reg / "letters").iterdir())


@pytest.mark.parametrize(
    ("step", "written"),
    [
        ("pending", False),  # the journal entry only
        ("meta", False),  # + the record file, no spec: rolled back
        ("spec", True),  # + the spec (committed): completed, current.json refreshed
        ("current", True),  # + current.json, nothing recorded in the store yet
        ("proposal", True),  # the store has the proposal, not its approval
        ("settle", True),  # the store has both, the journal entry is still there
    ],
)
def test_a_killed_apply_is_completed_or_rolled_back_by_the_next(
    setup: tuple[Path, Path], capsys: pytest.CaptureFixture[str], step: str, written: bool
) -> None:
    db, reg = setup
    argv = ["apply", RUN, "1", "--db", str(db), "--to", str(reg), "--by", "ann"]
    killed = subprocess.run(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-c", KILL_AT, step, *argv, "--yes", "--comment", "why"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert killed.returncode == KILLED, killed.stderr
    (reg / "letters" / ".v000009.json.k1ll3d.tmp").write_text("{")  # a write cut mid-file

    code = main(argv)  # the next apply (a dry run) opens the registry and recovers
    out, err = capsys.readouterr()
    assert code == 0
    target = f"{reg}/letters"
    registry = TopologyRegistry(reg)
    approved = {
        "target": target, "run_id": RUN, "candidate_idx": 1, "decision": "approved",
        "who": "ann", "applied_version": 2,
    }  # fmt: skip
    if written:
        assert _files(reg) == [
            ".lock", "current.json", "v000001.json", "v000001.meta.json", "v000002.json",
            "v000002.meta.json",
        ]  # fmt: skip
        assert registry.current("letters") == (2, BETTER)
        assert (reg / "letters" / "current.json").read_text() == spec_to_json(BETTER)
        assert registry.record("letters", 2).approval is not None
        assert _proposals(db) == [approved]  # once, never twice
        recorded = [] if step == "settle" else [
            f"note: recorded the approval of {target} version 2 (an interrupted apply wrote it)"
        ]  # fmt: skip
        assert err.splitlines() == [
            *recorded,
            f"note: versions of {target} with no record in the run store: 1 (written by another "
            "tool or before the store recorded applies; each keeps its approval in its "
            "v*.meta.json)",
        ]
        assert out.splitlines()[-1] == "nothing to write: the registry already holds this topology"
    else:
        assert _files(reg) == [".lock", "current.json", "v000001.json", "v000001.meta.json"]
        assert registry.current_version("letters") == 1
        assert (reg / "letters" / "current.json").read_text() == spec_to_json(
            parse_topology(SEED_JSON)
        )
        assert _proposals(db) == []
        assert err.splitlines() == [
            f"note: rolled back an interrupted write of {target} version 2 (its spec was never "
            "written)",
            f"note: versions of {target} with no record in the run store: 1 (written by another "
            "tool or before the store recorded applies; each keeps its approval in its "
            "v*.meta.json)",
        ]
        assert out.splitlines()[-1] == "dry run: nothing was written (add --yes to write it)"
        # and the apply can be made again, in full
        assert main([*argv, "--yes"]) == 0
        capsys.readouterr()
        assert registry.current("letters") == (2, BETTER)
        assert _proposals(db) == [approved]
