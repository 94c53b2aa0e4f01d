"""Diff & apply on a proposal from a phase-2 (prompt) run (one reviewed diff for both parts): the
topology part and each prompt's word diff side by side; both parts, or one alone, applied in one
write."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.ir import TopologySpec, parse_topology, spec_hash
from core.search.events import CandidateProposed, RunFinished, RunStarted, SearchEvent
from core.search.registry import Approval, TopologyRegistry
from core.storage import DuckDBRunStore
from studio.manager import StudioManager
from studio.views.prompt_apply import ADDED_STYLE, REMOVED_STYLE, side_by_side

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "studio" / "app.py")
SEARCH = "20250101-120000-abc123"  # the small store's search (conftest)
PHASE2 = "20250101-130000-bbbbbb"
GENES = ["critic.system_prompt", "judge.system_prompt"]
EVOLVED = "Find the flaw.\nAnswer in upper case."


def _spec(*, judge: bool = True, critic: str = "Find the flaw.") -> TopologySpec:
    def agent(node_id: str, name: str, prompt: str) -> dict[str, object]:
        return {
            "operation": {
                "kind": "agent_step",
                "id": node_id,
                "inline_spec": {
                    "name": name,
                    "system_prompt": prompt,
                    "output_schema": {"type": "string"},
                },
            }
        }

    steps = [agent("critique", "critic", critic)]
    if judge:
        steps.append(agent("judge", "judge", "Judge it & <decide>."))
    return parse_topology({"kind": "pipeline", "id": "root", "steps": steps})


WINNER = _spec()


def phase2_events() -> list[SearchEvent]:
    """A phase-2 run of the small store's search: candidate 1 evolved the critic's prompt."""
    t0 = 1_735_740_000.0
    ev: list[SearchEvent] = [
        RunStarted(
            run_id=PHASE2,
            seq=0,
            ts=t0,
            problem="gsm8k_replay",
            strategy="gepa",
            seed=1,
            config={"phase": "prompts", "parent_run_id": SEARCH, "genes": GENES},
        )
    ]
    for idx, critic in enumerate(("Find the flaw.", EVOLVED)):
        ev.append(
            CandidateProposed(
                run_id=PHASE2,
                seq=len(ev),
                ts=t0 + len(ev),
                candidate_idx=idx,
                generation=idx - 1,
                spec_hash=f"{spec_hash(WINNER)}-p{idx}",
                spec_json=WINNER.model_dump_json(),
                parent_idx=None if idx == 0 else 0,
                operator="seed" if idx == 0 else "gepa_reflection",
                thought=f"critic.system_prompt: {critic}\njudge.system_prompt: Judge it & <decide>.",
            )
        )
    ev.append(RunFinished(run_id=PHASE2, seq=len(ev), ts=t0 + 9, status="completed"))
    return ev


@pytest.fixture
def phase2_app(studio_env: Path, tmp_path: Path) -> Iterator[tuple[AppTest, StudioManager, int]]:
    """The studio on the small store plus a phase-2 run, the registry's `letters` v1 the
    winner without its judge step, and a proposal of phase-2 candidate 1 on Diff & apply."""
    from studio._st_common import _manager

    with DuckDBRunStore(studio_env) as store:
        store.record_events(phase2_events())
    TopologyRegistry(tmp_path / "registry").write(
        "letters", _spec(judge=False), None, approval=Approval(by="ann")
    )
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    manager: StudioManager = _manager(str(studio_env.resolve()))
    pid = manager.propose("letters", WINNER, run_id=PHASE2, candidate_idx=1)
    at.query_params["proposal"] = str(pid)
    at.switch_page(str(REPO / "pages" / "diff.py"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    yield at, manager, pid
    manager.close()
    _manager.clear()


def _prompt_boxes(at: AppTest) -> list[str]:
    return [str(m.value) for m in at.markdown if str(m.value).startswith("<div")]


def test_side_by_side_marks_removed_and_added_words_escaped() -> None:
    left, right = side_by_side("Solve it & stop.", "Solve it <now> & stop.")
    assert left == "Solve it &amp; stop."
    assert right == f'Solve it <span style="{ADDED_STYLE}">&lt;now&gt;</span> &amp; stop.'
    assert side_by_side("a b c", "a c") == (f'a <span style="{REMOVED_STYLE}">b</span> c', "a c")


def test_both_parts_show_the_topology_diff_and_prompts_side_by_side_then_apply_together(
    phase2_app: tuple[AppTest, StudioManager, int], tmp_path: Path
) -> None:
    at, manager, pid = phase2_app
    assert at.radio(key=f"df_part_{pid}").value == "both"
    assert [s.value for s in at.subheader][:2] == [
        "Topology part: the search's winner",
        "Prompt part: the evolved prompts",
    ]
    changes = [d.value for d in at.dataframe if "node_id" in d.value.columns][0]
    assert changes[["change", "node_id"]].values.tolist() == [
        ["changed", "root"],
        ["added", "judge"],
    ]
    box = "border:1px solid #ddd;border-radius:4px;padding:6px 8px;white-space:normal"
    assert _prompt_boxes(at) == [
        f'<div style="{box}">Find the flaw.</div>',
        f'<div style="{box}">Find the flaw. <span style="{ADDED_STYLE}">Answer in upper '
        "case.</span></div>",
    ]  # the judge's prompt is candidate 0's: phase 2 did not change it
    at.text_input(key=f"df_comment_{pid}").set_value("both help").run()
    at.button(key="df_approve").click().run()
    assert not at.exception
    assert "Applied topology and prompts: letters is now version 2." in [
        s.value for s in at.success
    ]
    registry = TopologyRegistry(tmp_path / "registry")
    assert registry.current("letters") == (2, _spec(critic=EVOLVED))
    decided = manager.store.list_proposals()
    assert decided[["decision", "comment", "applied_version"]].values.tolist() == [
        ["approved", "topology and prompts: both help", 2]
    ]


def test_prompts_alone_go_into_the_current_topology_the_topology_part_rejected(
    phase2_app: tuple[AppTest, StudioManager, int], tmp_path: Path
) -> None:
    at, manager, pid = phase2_app
    at.radio(key=f"df_part_{pid}").set_value("prompts").run()
    assert not at.exception
    assert [m.value for m in at.markdown if str(m.value).startswith("**Topology part")] == [
        "**Topology part: rejected** (the registry's topology keeps its structure; only the "
        "prompts below change)"
    ]
    assert not [d for d in at.dataframe if "node_id" in d.value.columns]
    assert len(_prompt_boxes(at)) == 2  # only the critic's prompt changed; v1 has no judge
    at.button(key="df_approve").click().run()
    assert not at.exception
    registry = TopologyRegistry(tmp_path / "registry")
    assert registry.current("letters") == (2, _spec(judge=False, critic=EVOLVED))
    # the decided proposal shows what was written (v1 -> v2: the critic's prompt), not the
    # winner it proposed
    changes = [d.value for d in at.dataframe if "node_id" in d.value.columns][0]
    assert changes[["change", "node_id", "fields_changed"]].values.tolist() == [
        ["changed", "critique", "inline_spec"]
    ]
    decided = manager.store.list_proposals()
    assert decided[["decision", "comment"]].values.tolist() == [
        ["approved", "prompts only (topology rejected)"]
    ]


def test_the_topology_alone_is_the_winner_with_its_starting_prompts(
    phase2_app: tuple[AppTest, StudioManager, int], tmp_path: Path
) -> None:
    at, _manager, pid = phase2_app
    at.radio(key=f"df_part_{pid}").set_value("topology").run()
    assert "**Prompt part: rejected** (the winner keeps the prompts it ran with)" in [
        m.value for m in at.markdown
    ]
    assert _prompt_boxes(at) == []
    at.button(key="df_approve").click().run()
    assert TopologyRegistry(tmp_path / "registry").current("letters") == (2, WINNER)
