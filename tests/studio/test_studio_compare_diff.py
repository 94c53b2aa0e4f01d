"""Compare and Diff & apply: labels that name what is compared, graphs that do not inherit each
other's shapes, formatted metrics, default pairs, stale pickers and registry-moved warnings."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from core.ir import parse_topology
from core.search.registry import TopologyRegistry
from studio.manager import StudioManager
from studio.views.compare import (
    compare_metrics,
    default_candidates,
    distinct_dot,
    format_metric,
)
from studio.views.diffs import diff_view, registry_moved_note

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "studio" / "app.py")
RUN_ID = "20250101-120000-abc123"

SEED = (
    '{"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", '
    '"agent_name": "6b_finetuning"}}]}'
)


# ---- pure functions ----------------------------------------------------------------------


def test_format_metric_gives_units_and_readable_figures() -> None:
    assert format_metric("accuracy", 0.37333333333333335) == "37.33%"
    assert format_metric("error_rate", 0.0) == "0.00%"
    assert format_metric("cost_usd", 0.15611134) == "$0.1561"
    assert format_metric("cost_usd", 1.0572128) == "$1.0572"
    assert format_metric("latency_ms", 2718.6666666666665) == "2.72 s"
    assert format_metric("latency_ms", 850.4) == "850 ms"
    assert format_metric("aggregate_score", 0.3550035326666666) == "0.3550"
    assert format_metric("n_agents", 2) == "2"
    assert format_metric("n_examples", 300.0) == "300"
    assert format_metric("valid", True) == "yes"
    assert format_metric("on_front", False) == "no"
    assert format_metric("objective_split", "validation") == "validation"
    assert format_metric("accuracy", float("nan")) == "-"
    assert format_metric("accuracy", None) == "-"


def test_compare_metrics_is_one_text_type_per_column_and_converts_to_arrow() -> None:
    rows = [
        {"accuracy": 0.49, "cost_usd": 1.0572128, "latency_ms": 6211.0, "valid": True},
        {"accuracy": float("nan"), "objective_split": "validation", "on_front": False},
    ]
    table = compare_metrics(rows, ["1: #28 (1929ae)", "2: #24 (1929ae)"])
    assert table["1: #28 (1929ae)"].tolist()[:3] == ["49.00%", "$1.0572", "6.21 s"]
    assert table.loc["valid"].tolist() == ["yes", "-"]
    assert table.loc["objective_split"].tolist() == ["-", "validation"]
    assert table.loc["on_front"].tolist() == ["-", "no"]
    assert {type(v) for v in table.to_numpy().ravel()} == {str}
    # what st.dataframe does; mixed types in a column made this fall back with a traceback
    assert pa.Table.from_pandas(table).num_rows == 11


def _archive(*rows: tuple[int, str, bool, bool, float, float, float, float]) -> pd.DataFrame:
    cols = ["candidate_idx", "operator", "is_best", "on_front", "aggregate_score"]
    cols += ["accuracy", "cost_usd", "latency_ms"]
    return pd.DataFrame(rows, columns=cols)


def test_default_candidates_best_then_seed_then_distinct_figures() -> None:
    arch = _archive(
        (0, "seed", False, True, 0.30, 0.30, 0.01, 1000.0),
        (5, "mutate:a", True, True, 0.40, 0.50, 0.02, 2000.0),
        (7, "mutate:b", False, False, 0.35, 0.45, 0.01, 1500.0),
    )
    assert default_candidates(arch, 2) == [5, 0]
    assert default_candidates(arch, 3) == [5, 0, 7]
    assert default_candidates(arch, 9) == [5, 0, 7]
    # the best has the seed's very figures (0 flips): the next distinct one instead
    same = _archive(
        (0, "seed", False, True, 0.30, 0.30, 0.01, 1000.0),
        (3, "mutate:a", True, True, 0.30, 0.30, 0.01, 1000.0),
        (7, "mutate:b", False, False, 0.20, 0.25, 0.01, 900.0),
    )
    assert default_candidates(same, 2) == [3, 7]
    assert default_candidates(same, 3) == [3, 7, 0]
    assert default_candidates(_archive(), 2) == []


def test_distinct_dot_salts_node_and_cluster_names_but_not_labels() -> None:
    dot = (
        "digraph topology {\n"
        '  subgraph cluster_1 {\n    n0 [label="n0 [x]", tooltip="n1"];\n'
        '    n1 [label="b"];\n  }\n  n0 -> n1 [label="n10"];\n}\n'
    )
    out = distinct_dot(dot)
    salt = re.search(r'id="(g[0-9a-f]{8})";', out)
    assert salt is not None
    g = salt.group(1)
    assert out == (
        f'digraph topology {{\n  id="{g}";\n'
        f'  subgraph cluster_{g}_1 {{\n    {g}_n0 [label="n0 [x]", tooltip="n1"];\n'
        f'    {g}_n1 [label="b"];\n  }}\n  {g}_n0 -> {g}_n1 [label="n10"];\n}}\n'
    )
    other = distinct_dot(dot.replace('"b"', '"c"'))
    assert g not in other  # another graph: no shared node name, no shared SVG id
    assert distinct_dot(dot) == out  # stable for the same graph
    assert distinct_dot("") == ""


def test_registry_moved_note_names_the_move_including_from_nothing() -> None:
    assert registry_moved_note("solver", 1, 1) is None
    assert registry_moved_note("solver", None, None) is None
    assert registry_moved_note("solver", None, 1) == (
        "The registry had no solver when this was proposed; it is now at version 1: the diff "
        "below is against version 1, not against nothing."
    )
    assert registry_moved_note("solver", 1, 3) == (
        "The registry moved from version 1 (when proposed) to 3: the diff below is against "
        "the current version."
    )
    assert registry_moved_note("solver", 2, None) == (
        "This was proposed against solver version 2, but the registry has no solver now: "
        "applying it creates the topology."
    )


def test_diff_view_separates_id_lines_from_the_real_change() -> None:
    before = parse_topology(SEED)
    with_ids = parse_topology(
        '{"kind": "pipeline", "id": "pipeline_1", "steps": [{"operation": {"kind": "agent_step", '
        '"id": "agent_step_1", "agent_name": "6b_finetuning"}}]}'
    )
    only_ids = diff_view(before, with_ids)
    assert only_ids.unified_no_ids == ""
    assert only_ids.id_lines == 2
    assert only_ids.counts == {"added": 0, "removed": 0, "changed": 0, "moved": 0}
    changed = diff_view(before, parse_topology(with_ids.model_dump_json().replace("6b_", "175b_")))
    assert changed.id_lines == 2
    assert [line for line in changed.unified_no_ids.splitlines() if line[:1] in "+-"] == [
        "--- current",
        "+++ proposed",
        '-        "agent_name": "6b_finetuning",',
        '+        "agent_name": "175b_finetuning",',
    ]
    assert diff_view(before, before).unified_no_ids == ""
    assert diff_view(before, before).id_lines == 0
    # the two graphs of one diff share no node name
    names_b = set(re.findall(r"\b(g[0-9a-f]{8})_n\d+", changed.before_dot))
    names_a = set(re.findall(r"\b(g[0-9a-f]{8})_n\d+", changed.after_dot))
    assert len(names_b) == 1 and len(names_a) == 1 and names_a != names_b


# ---- pages ---------------------------------------------------------------------------------


@pytest.fixture
def app(studio_env: Path) -> Iterator[AppTest]:
    from studio._st_common import _manager

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    yield at
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def _open(at: AppTest, name: str, **params: str) -> AppTest:
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(str(REPO / "pages" / f"{name}.py"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _box(at: AppTest, label: str):  # noqa: ANN202 (AppTest's Selectbox)
    [box] = [s for s in at.selectbox if s.label == label]
    return box


def _texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [w.value for w in at.warning] + [s.value for s in at.success]
    parts += [i.value for i in at.info]
    return "\n".join(str(p) for p in parts)


def test_compare_defaults_to_best_vs_seed_and_flip_labels_follow_the_candidates(
    app: AppTest,
) -> None:
    at = _open(app, "compare", run=RUN_ID)
    table = [d.value for d in at.dataframe if "accuracy" in d.value.index][0]
    assert list(table.columns) == ["1: #1 (abc123)", "2: #0 (abc123)"]
    assert table.loc["accuracy"].tolist() == ["60.00%", "25.00%"]
    assert table.loc["cost_usd"].tolist() == ["$0.5000", "$0.0010"]
    assert table.loc["latency_ms"].tolist() == ["9.00 s", "1.00 s"]
    assert _box(at, "B").value == "2: #0 (abc123)"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["right in #1, wrong in #0"] == "2"
    # candidate 2 changes from #0 to #2: box B and the counts name #2
    _box(at, "Candidate 2").set_value(2).run()
    assert not at.exception
    assert _box(at, "A").value == "1: #1 (abc123)"
    assert _box(at, "B").value == "2: #2 (abc123)"
    assert _box(at, "B").options == ["1: #1 (abc123)", "2: #2 (abc123)"]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {
        "right in #1, wrong in #2": "2",
        "wrong in #1, right in #2": "0",
        "both right": "1",
        "both wrong": "1",
    }
    assert "A = 1: #1 (abc123), B = 2: #2 (abc123)" in _texts(at)
    assert at.query_params["items"] == f"{RUN_ID}:1,{RUN_ID}:2"


def test_compare_graphs_have_distinct_names_and_stretch(app: AppTest) -> None:
    at = _open(app, "compare", items=f"{RUN_ID}:0,{RUN_ID}:3")
    charts = at.get("graphviz_chart")
    assert len(charts) == 2
    specs = [c.proto.spec for c in charts]
    salts = [set(re.findall(r"\b(g[0-9a-f]{8})_n\d+", s)) for s in specs]
    assert all(len(s) == 1 for s in salts) and salts[0] != salts[1]
    assert "parallel [vote]" in specs[1]
    at.toggle(key="cmp_side").set_value(True).run()
    assert not at.exception
    assert [c.proto.spec for c in at.get("graphviz_chart")] == specs


def test_diff_picker_relabels_after_approval_and_warns_the_registry_moved(
    app: AppTest, studio_env: Path, tmp_path: Path
) -> None:
    from studio._st_common import _manager

    manager: StudioManager = _manager(str(studio_env.resolve()))
    seed = parse_topology(SEED)
    proposed = parse_topology(
        '{"kind": "pipeline", "id": "pipeline_1", "steps": [{"operation": {"kind": "agent_step", '
        '"id": "agent_step_1", "agent_name": "175b_finetuning"}}]}'
    )
    pid = manager.propose("solver", proposed, who="ann")  # the registry is empty
    TopologyRegistry(tmp_path / "registry").write("solver", seed, None)  # then gets v1
    at = _open(app, "diff", proposal=str(pid))
    assert (
        "The registry had no solver when this was proposed; it is now at version 1: the diff "
        "below is against version 1, not against nothing."
    ) in _texts(at)
    # the id lines the editor added are apart; the main diff is the agent change only
    codes = [c.value for c in at.code]
    assert '+        "agent_name": "175b_finetuning",' in codes[0]
    assert '"id"' not in codes[0]
    assert '+  "id": "pipeline_1",' in codes[1]
    assert "With node ids (2 more changed line(s))" in [e.label for e in at.expander]
    picker = _box(at, "Proposal")
    assert picker.options == [f"#{pid} solver (pending, from editor, by ann)"]
    at.button(key="df_approve").click().run()
    assert not at.exception
    assert "Applied: solver is now version 2." in _texts(at)
    picker = _box(at, "Proposal")
    assert picker.options == [f"#{pid} solver (approved, from editor, by ann)"]
    assert picker.value == pid
    assert "Approved by tester" in "\n".join(str(i.value) for i in at.info)
