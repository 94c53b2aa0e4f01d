"""The on-disk topology registry: versions, atomic checked writes, history and rollback."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from core.errors import ApplyError, StaleTargetError
from core.ir import TopologySpec, parse_topology
from core.ir.canonical import spec_hash
from core.search.registry import Approval, TopologyRegistry


def _spec(agent: str) -> TopologySpec:
    return parse_topology(
        {
            "kind": "pipeline",
            "id": "root",
            "steps": [{"operation": {"kind": "agent_step", "id": "solve", "agent_name": agent}}],
        }
    )


V1 = _spec("6b_finetuning")
V2 = _spec("175b_finetuning")
V3 = _spec("175b_verification")


def test_empty_registry(tmp_path: Path) -> None:
    reg = TopologyRegistry(tmp_path / "reg")
    assert reg.names() == []
    assert reg.current_version("math") is None
    assert reg.history("math") == []
    with pytest.raises(ApplyError, match="no topology named 'math'"):
        reg.current("math")


def test_write_then_read_back_with_records(tmp_path: Path) -> None:
    reg = TopologyRegistry(tmp_path)
    approval = Approval(by="alice", at="2025-01-31T12:00:00+00:00", comment="looks good")
    r1 = reg.write("math", V1, None, approval=approval, note="seed")
    r2 = reg.write("math", V2, 1, note="run r1 candidate 3")
    assert (r1.version, r1.base_version, r2.version, r2.base_version) == (1, None, 2, 1)
    assert reg.current("math") == (2, V2)
    assert reg.get("math", 1) == V1
    assert reg.names() == ["math"]
    hist = reg.history("math")
    assert [(h.version, h.note, h.spec_hash) for h in hist] == [
        (1, "seed", spec_hash(V1)),
        (2, "run r1 candidate 3", spec_hash(V2)),
    ]
    assert hist[0].approval == approval
    assert hist[1].approval is None
    # plain spec JSON on disk, loadable without the registry; current.json mirrors the current
    files = sorted(p.name for p in (tmp_path / "math").iterdir())
    assert files == [
        ".lock",
        "current.json",
        "v000001.json",
        "v000001.meta.json",
        "v000002.json",
        "v000002.meta.json",
    ]
    assert parse_topology((tmp_path / "math" / "current.json").read_text()) == V2
    assert json.loads((tmp_path / "math" / "v000001.json").read_text())["id"] == "root"


def test_stale_base_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    reg = TopologyRegistry(tmp_path)
    reg.write("math", V1, None)
    reg.write("math", V2, 1)
    before = sorted(p.name for p in (tmp_path / "math").iterdir())
    with pytest.raises(StaleTargetError, match="at version 2, not 1"):
        reg.write("math", V3, 1)
    with pytest.raises(StaleTargetError, match="at version 2, not None"):
        reg.write("math", V3, None)
    assert sorted(p.name for p in (tmp_path / "math").iterdir()) == before
    assert reg.current("math") == (2, V2)


def test_racing_writers_from_one_base_only_one_wins(tmp_path: Path) -> None:
    reg = TopologyRegistry(tmp_path)
    reg.write("math", V1, None)
    outcomes: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def writer(i: int) -> None:
        start.wait()
        try:
            TopologyRegistry(tmp_path).write("math", _spec(f"agent_{i}"), 1)
            result = "won"
        except StaleTargetError:
            result = "stale"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["stale"] * 7 + ["won"]
    assert [h.version for h in reg.history("math")] == [1, 2]


def test_rollback_is_a_new_version_with_the_old_spec(tmp_path: Path) -> None:
    reg = TopologyRegistry(tmp_path)
    reg.write("math", V1, None)
    reg.write("math", V2, 1)
    rec = reg.rollback("math", 1, approval=Approval(by="bob"))
    assert (rec.version, rec.base_version, rec.note) == (3, 2, "rollback to v1")
    assert reg.current("math") == (3, V1)
    assert [h.version for h in reg.history("math")] == [1, 2, 3]
    with pytest.raises(StaleTargetError):
        reg.rollback("math", 2, base_version=2)
    with pytest.raises(ApplyError, match="no version 9"):
        reg.rollback("math", 9)


def test_no_temporary_files_are_left_behind(tmp_path: Path) -> None:
    reg = TopologyRegistry(tmp_path)
    reg.write("math", V1, None)
    assert not [p for p in (tmp_path / "math").iterdir() if p.name.endswith(".tmp")]


def test_invalid_names_and_corrupt_files(tmp_path: Path) -> None:
    reg = TopologyRegistry(tmp_path)
    for bad in ("", "../x", ".hidden", "a/b", "-x"):
        with pytest.raises(ValueError, match="invalid topology name"):
            reg.write(bad, V1, None)
    reg.write("math", V1, None)
    (tmp_path / "math" / "v000002.json").write_text('{"kind": "pipeline", "steps": []}')
    with pytest.raises(ApplyError, match=r"v000002\.json: not a valid topology spec"):
        reg.current("math")
