"""`apply_result`: per-gene diffs, dry runs that never write, typed writes, stale targets."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from core.errors import ApplyError, StaleTargetError
from core.ir import TopologySpec, parse_topology
from core.search.apply import GeneDiff, apply_result, apply_specs
from core.search.registry import Approval, TopologyRegistry
from core.search.result import OptimizationResult


def _spec(agent: str, extra: bool = False) -> TopologySpec:
    steps: list[dict[str, Any]] = [
        {"operation": {"kind": "agent_step", "id": "solve", "agent_name": agent}}
    ]
    if extra:
        steps.append(
            {"operation": {"kind": "function_step", "id": "check", "callable_name": "check"}}
        )
    return parse_topology({"kind": "pipeline", "id": "root", "steps": steps})


OLD = _spec("6b_finetuning")
NEW = _spec("175b_finetuning", extra=True)


def _result(**specs: TopologySpec) -> OptimizationResult:
    return OptimizationResult(
        best_candidate={k: v.model_dump_json() for k, v in specs.items()},
        best_decoded=dict(specs),
        best_score=0.5,
        pareto_candidates=[],
        history=[],
    )


def _summary(d: GeneDiff) -> list[tuple[str, str]]:
    return [(c.node_id, c.change) for c in d.structural]


# --- mapping targets ------------------------------------------------------------------------


def test_dry_run_diffs_every_gene_and_never_writes() -> None:
    target: dict[str, Any] = {
        "math": OLD.model_dump_json(indent=2),
        "other": OLD.model_dump(mode="json"),
    }
    snapshot = copy.deepcopy(target)
    diffs = apply_result(_result(math=NEW, other=OLD), target)
    assert target == snapshot
    assert [(d.gene_name, d.changed, d.written) for d in diffs] == [
        ("math", True, False),
        ("other", False, False),
    ]
    math = diffs[0]
    assert math.before == OLD
    assert math.after == NEW
    assert _summary(math) == [("root", "changed"), ("solve", "changed"), ("check", "added")]
    assert math.unified.splitlines()[:2] == ["--- math (current)", "+++ math (new)"]
    assert '+        "agent_name": "175b_finetuning",' in math.unified.splitlines()
    assert diffs[1].unified == ""
    assert diffs[1].structural == ()


def test_write_keeps_the_type_each_value_had() -> None:
    target: dict[str, Any] = {
        "text": OLD.model_dump_json(indent=2),
        "compact": OLD.model_dump_json(),
        "mapping": OLD.model_dump(mode="json"),
        "model": OLD,
        "empty": None,
    }
    diffs = apply_result(
        _result(text=NEW, compact=NEW, mapping=NEW, model=NEW, empty=NEW), target, dry_run=False
    )
    assert all(d.written for d in diffs)
    assert target["text"] == NEW.model_dump_json(indent=2)
    assert target["compact"] == NEW.model_dump_json()
    assert target["mapping"] == NEW.model_dump(mode="json")
    assert json.loads(target["compact"]) == target["mapping"]
    assert target["model"] == NEW
    assert target["empty"] == NEW
    assert diffs[4].before is None


def test_unchanged_genes_are_not_written() -> None:
    original = OLD.model_dump_json(indent=4)  # another style: left alone when nothing changes
    target = {"math": original}
    (d,) = apply_result(_result(math=OLD), target, dry_run=False)
    assert (d.changed, d.written) == (False, False)
    assert target["math"] is original


def test_missing_key_and_non_spec_values_are_clear_errors() -> None:
    with pytest.raises(ApplyError, match="gene 'math': the target mapping has no such key"):
        apply_result(_result(math=NEW), {"other": OLD})
    with pytest.raises(ApplyError, match="gene 'math': the target holds a int"):
        apply_result(_result(math=NEW), {"math": 3})
    with pytest.raises(ApplyError, match="gene 'math': the target's current value is not a valid"):
        apply_result(_result(math=NEW), {"math": '{"kind": "pipeline", "steps": []}'})


def test_expected_diff_refuses_a_target_that_changed_since() -> None:
    target: dict[str, Any] = {"math": OLD.model_dump_json()}
    approved = apply_result(_result(math=NEW), target)
    target["math"] = _spec("6b_verification").model_dump_json()  # someone else edited it
    snapshot = dict(target)
    with pytest.raises(StaleTargetError, match="gene 'math': the target changed"):
        apply_result(_result(math=NEW), target, dry_run=False, expected=approved)
    assert target == snapshot


def test_expected_diff_refuses_a_different_result() -> None:
    target: dict[str, Any] = {"math": OLD.model_dump_json()}
    approved = apply_result(_result(math=NEW), target)
    with pytest.raises(ApplyError, match="not the one in the approved diff"):
        apply_result(_result(math=_spec("x")), target, dry_run=False, expected=approved)
    (d,) = apply_result(_result(math=NEW), target, dry_run=False, expected=approved)
    assert d.written
    assert parse_topology(target["math"]) == NEW


def test_a_failed_assignment_restores_what_was_written() -> None:
    class Guarded(dict[str, Any]):
        def __setitem__(self, key: str, value: Any) -> None:
            if key == "b" and value is not OLD_TEXT:
                raise RuntimeError("read-only key")
            super().__setitem__(key, value)

    OLD_TEXT = OLD.model_dump_json()
    target = Guarded(a=OLD_TEXT, b=OLD_TEXT)
    with pytest.raises(ApplyError, match="could not assign to the target: read-only key"):
        apply_result(_result(a=NEW, b=NEW), target, dry_run=False)
    assert dict(target) == {"a": OLD_TEXT, "b": OLD_TEXT}


# --- object targets -------------------------------------------------------------------------


def test_object_target_with_dotted_names() -> None:
    app = SimpleNamespace(
        agents=SimpleNamespace(math=SimpleNamespace(spec=OLD)),
        fallback=OLD.model_dump_json(),
    )
    diffs = apply_result(_result(**{"agents.math.spec": NEW, "fallback": NEW}), app)
    assert app.agents.math.spec is OLD
    assert [d.gene_name for d in diffs] == ["agents.math.spec", "fallback"]
    apply_result(_result(**{"agents.math.spec": NEW, "fallback": NEW}), app, dry_run=False)
    assert app.agents.math.spec == NEW
    assert parse_topology(app.fallback) == NEW


def test_two_names_on_one_attribute_are_refused_naming_both() -> None:
    shared = SimpleNamespace(spec=OLD)
    app = SimpleNamespace(a=shared, b=shared)
    with pytest.raises(ValueError, match="'a.spec' and 'b.spec' resolve onto one attribute"):
        apply_result(_result(**{"a.spec": NEW, "b.spec": NEW}), app)
    assert shared.spec is OLD


def test_a_name_inside_another_names_value_is_refused() -> None:
    inner = SimpleNamespace(spec=OLD)
    app = SimpleNamespace(a=inner)
    with pytest.raises(ValueError, match="'a' and 'a.spec' overlap"):
        apply_specs({"a": NEW, "a.spec": NEW}, app)


def test_object_target_errors() -> None:
    app = SimpleNamespace(agents=SimpleNamespace())
    with pytest.raises(ApplyError, match="the target has no attribute 'agents.math'"):
        apply_result(_result(**{"agents.math.spec": NEW}), app)
    with pytest.raises(ValueError, match="not a dotted attribute path"):
        apply_result(_result(**{"agents..spec": NEW}), app)


# --- registry targets -----------------------------------------------------------------------


def test_registry_dry_run_then_approved_write(tmp_path: Path) -> None:
    reg = TopologyRegistry(tmp_path)
    reg.write("math", OLD, None)
    files = sorted(p.name for p in (tmp_path / "math").iterdir())
    (shown,) = apply_result(
        _result(
            math=NEW,
        ),
        reg,
    )
    assert (shown.base_version, shown.written, shown.new_version) == (1, False, None)
    assert sorted(p.name for p in (tmp_path / "math").iterdir()) == files
    approval = Approval(by="alice", comment="fewer errors")
    (done,) = apply_result(
        _result(math=NEW), reg, dry_run=False, expected=[shown], approval=approval, note="run r1"
    )
    assert (done.written, done.new_version) == (True, 2)
    assert reg.current("math") == (2, NEW)
    rec = reg.history("math")[-1]
    assert (rec.approval, rec.note, rec.base_version) == (approval, "run r1", 1)


def test_registry_write_refuses_when_a_version_appeared_since_the_diff(tmp_path: Path) -> None:
    reg = TopologyRegistry(tmp_path)
    reg.write("math", OLD, None)
    shown = apply_result(_result(math=NEW), reg)
    reg.write("math", _spec("6b_verification"), 1)
    with pytest.raises(StaleTargetError):
        apply_result(_result(math=NEW), reg, dry_run=False, expected=shown)
    assert reg.current_version("math") == 2


def test_registry_creates_a_new_name(tmp_path: Path) -> None:
    reg = TopologyRegistry(tmp_path)
    (d,) = apply_result(_result(math=NEW), reg, dry_run=False)
    assert d.before is None
    assert [c.change for c in d.structural] == ["added", "added", "added"]
    assert reg.current("math") == (1, NEW)
