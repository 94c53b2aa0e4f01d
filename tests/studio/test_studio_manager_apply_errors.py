"""The studio manager's approve against a registry that refuses the write: an `ApplyError`
saying so (never a bare `OSError`), nothing written, and the proposal left pending, so it can be
approved once the cause is fixed (or rejected)."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from core.errors import ApplyError, TopologyStudioError
from core.ir import parse_topology
from core.search.registry import TopologyRegistry
from studio.manager import StudioManager

SPEC = parse_topology(
    '{"kind": "pipeline", "id": "seed", "steps": [{"operation": {"kind": "agent_step", '
    '"id": "solve", "agent_name": "175b_verification"}}]}'
)


def _decisions(m: StudioManager) -> list[tuple[int, Any, Any]]:
    rows = m.store.list_proposals().sort_values("proposal_id").to_dict("records")
    return [
        (
            int(r["proposal_id"]),
            None if pd.isna(r["decision"]) else r["decision"],
            None if pd.isna(r["applied_version"]) else int(r["applied_version"]),
        )
        for r in rows
    ]


def test_approve_to_an_unwritable_registry_is_an_apply_error_and_stays_pending(
    tmp_path: Path, small_db: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder\n")
    root = blocker / "reg"
    m = StudioManager(small_db, registry_root=root)
    try:
        pid = m.propose("solver", SPEC, who="ann")
        shown = m.dry_run("solver", SPEC)
        assert (shown.base_version, shown.changed) == (None, True)
        with pytest.raises(ApplyError) as got:
            m.approve(pid, "solver", SPEC, shown, comment="go", who="ann")
        assert isinstance(got.value, TopologyStudioError)
        assert not isinstance(got.value, OSError)
        assert str(got.value) == (f"cannot write registry {root}: Not a directory: {root}/solver")
        assert isinstance(got.value.__cause__, NotADirectoryError)
        assert _decisions(m) == [(pid, None, None)]  # pending: nothing was decided
        assert m.registry.current_version("solver") is None

        blocker.unlink()  # the cause fixed: the same proposal can be approved now
        done = m.approve(pid, "solver", SPEC, shown, comment="go", who="ann")
        assert done.new_version == 1
        assert TopologyRegistry(root).current("solver") == (1, SPEC)
        assert _decisions(m) == [(pid, "approved", 1)]
    finally:
        m.close()


def test_approve_on_a_full_disk_is_an_apply_error_and_writes_nothing(
    tmp_path: Path, small_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.search import registry as registry_mod

    real = registry_mod._atomic_write_text

    def full(path: Path, text: str) -> None:
        if path.name.endswith(".meta.json"):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, text)

    monkeypatch.setattr(registry_mod, "_atomic_write_text", full)
    root = tmp_path / "reg"
    m = StudioManager(small_db, registry_root=root)
    try:
        pid = m.propose("solver", SPEC, who="ann")
        shown = m.dry_run("solver", SPEC)
        with pytest.raises(ApplyError) as got:
            m.approve(pid, "solver", SPEC, shown, who="ann")
        assert str(got.value) == (
            f"cannot write registry {root}: No space left on device: "
            f"{root}/solver/v000001.meta.json"
        )
        assert _decisions(m) == [(pid, None, None)]
        assert sorted(p.name for p in (root / "solver").iterdir()) == [".lock"]
    finally:
        m.close()


def test_a_rollback_the_registry_refuses_records_no_proposal(
    tmp_path: Path, small_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = StudioManager(small_db, registry_root=tmp_path / "reg")
    try:
        pid = m.propose("solver", SPEC, who="ann")
        m.approve(pid, "solver", SPEC, m.dry_run("solver", SPEC), who="ann")
        before = _decisions(m)
        assert before == [(pid, "approved", 1)]

        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise ApplyError(f"cannot write registry {tmp_path / 'reg'}: disk full")

        monkeypatch.setattr(m.registry, "rollback", refuse)
        with pytest.raises(ApplyError, match="disk full"):
            m.rollback("solver", 1, who="bob")
        assert _decisions(m) == before  # no rollback proposal left pending
        monkeypatch.undo()
        assert m.rollback("solver", 1, who="bob") == 2
        assert _decisions(m) == [*before, (pid + 1, "approved", 2)]
    finally:
        m.close()
