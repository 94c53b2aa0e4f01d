"""The fast path of `parse_topology` (parse + validate at most 1.2x the reference library's plain
validation, every limit still enforced): a cheap bound, then `validate_json`.

Three things are pinned: `within_limits` never vouches for text over a limit (tables of exact
cases, and a property over random specs and their corruptions); whatever the fast path
returns equals what the full path returns; and every error, limit errors with their limit
name and JSON path included, is exactly the full path's.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import SpecError, SpecLimitError
from core.ir import SpecLimits, parse_operation, parse_topology
from core.ir._bound import within_limits
from core.ir.limits import _parse  # pyright: ignore[reportPrivateUsage]
from core.ir.models import walk
from core.ir.testing import corrupted_spec_texts, topology_specs

FN: dict[str, Any] = {"kind": "function_step", "callable_name": "f"}


def pipe(*ops: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "pipeline", "steps": [{"operation": op} for op in ops]}


def loops(depth: int, leaf: dict[str, Any] = FN) -> dict[str, Any]:
    """`depth` nested refinement loops around `leaf` (one container per level)."""
    node = leaf
    for _ in range(depth):
        node = {
            "kind": "refinement_loop",
            "step": node,
            "evaluator": "e",
            "state_updater_name": "u",
        }
    return node


def pipes(depth: int) -> dict[str, Any]:
    """`depth` nested pipelines (three containers per level)."""
    node = FN
    for _ in range(depth):
        node = pipe(node)
    return node


def kind_last(node: dict[str, Any]) -> dict[str, Any]:
    """The same spec with `kind` written after every other key, at every level."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "kind":
            continue
        if isinstance(value, dict):
            value = kind_last(value)  # pyright: ignore[reportUnknownArgumentType]
        elif isinstance(value, list):
            value = [kind_last(v) if isinstance(v, dict) else v for v in value]  # pyright: ignore
        out[key] = value
    if "kind" in node:
        out["kind"] = node["kind"]
    return out


def _outcome(run: Any) -> tuple[str, Any]:
    """What a parse gives: the spec, or the error's type, message, limit, path and errors."""
    try:
        return ("ok", run())
    except SpecLimitError as exc:
        return ("limit", (str(exc), exc.limit, exc.value, exc.path))
    except SpecError as exc:
        return ("error", (str(exc), exc.errors))


def _same_as_full(data: Any, limits: SpecLimits | None = None, *, topology: bool = True) -> Any:
    fast = _outcome(lambda: _parse(data, limits, topology=topology))
    full = _outcome(lambda: _parse(data, limits, topology=topology, fast=False))
    assert fast == full
    return fast


D8 = SpecLimits()  # depth 8, 200 nodes, 26 nested containers


@pytest.mark.parametrize(
    ("label", "node", "limits", "expected"),
    [
        ("one pipeline", pipe(FN), D8, True),
        ("loops at the depth limit", loops(8), D8, True),
        ("loops one past the depth limit", loops(9), D8, False),
        ("kind last, at the limit", kind_last(loops(8)), D8, True),
        ("kind last, one past the limit", kind_last(loops(9)), D8, False),
        ("pipelines at depth 8 nest 26 containers", pipes(8), D8, True),
        (
            "a list nested past 26 containers",
            pipe({**FN, "name": [[[[[[[[[1]]]]]]]]]}),
            SpecLimits(max_depth=2),
            False,
        ),
        ("200 nodes", pipe(*[FN] * 199), D8, True),
        ("201 nodes", pipe(*[FN] * 200), D8, False),
        ("101 nodes in 201 objects", pipe(*[FN] * 100), SpecLimits(max_nodes=101), True),
        (
            "a name 'kind' counts as a node (a bound)",
            pipe({**FN, "name": "kind"}),
            SpecLimits(max_nodes=2),
            False,
        ),
        (
            "a route named after a composite kind",
            {"kind": "router", "routes": [{"name": "router", "step": FN, "condition_name": "c"}]},
            SpecLimits(max_depth=1),
            False,
        ),
        (
            "braces and kinds inside strings",
            pipe({**FN, "name": '{[{"pipeline"}]} \\"router\\"'}),
            SpecLimits(max_depth=1),
            True,
        ),
        (
            "an escaped quote before a kind name",
            pipe({**FN, "name": 'say "pipeline'}),
            SpecLimits(max_depth=1),
            True,
        ),
    ],
)
def test_within_limits_table(label: str, node: Any, limits: SpecLimits, expected: bool) -> None:
    text = json.dumps(node)
    assert within_limits(text, max_depth=limits.max_depth, max_nodes=limits.max_nodes) is expected
    outcome = _same_as_full(text, limits)
    if expected:  # vouched for: the full path accepts it too
        assert outcome[0] == "ok"


@pytest.mark.parametrize(
    ("label", "text", "expected"),
    [
        ("kind spelled with a letter escape", '{"kind": "pipelin\\u0065", "steps": []}', False),
        (
            "a non-letter escape is fine",
            '{"kind": "pipeline", "name": "caf\\u00e9", "steps": []}',
            True,
        ),
        ("non-ASCII outside strings", '{"kind": "pipeline"}\u00e9', False),
        ("unbalanced close", '{"kind": "pipeline"}}', False),
        ("unclosed", '{"kind": "pipeline"', False),
        (
            "an integer longer than int_max_str_digits",
            '{"kind": "pipeline", "x": ' + "9" * 4301 + "}",
            False,
        ),
    ],
)
def test_within_limits_on_odd_text(label: str, text: str, expected: bool) -> None:
    assert within_limits(text, max_depth=8, max_nodes=200) is expected
    _same_as_full(text)


@pytest.mark.parametrize(
    ("label", "data"),
    [
        ("str", json.dumps(pipe(FN, loops(2)))),
        ("bytes", json.dumps(pipe(FN, loops(2))).encode()),
        ("bytearray", bytearray(json.dumps(pipe(FN)).encode())),
        ("bytes with a BOM", b"\xef\xbb\xbf" + json.dumps(pipe(FN)).encode()),
        ("str with a BOM", "\ufeff" + json.dumps(pipe(FN))),
        ("invalid UTF-8", b'{"kind": "pipeline", "name": "\xff"}'),
        ("a lone surrogate escape", json.dumps(pipe({**FN, "name": "a\ud800"}))),
        (
            "a lone surrogate character",
            json.dumps(pipe({**FN, "name": "a\ud800"}), ensure_ascii=False),
        ),
        (
            "duplicate keys: the last wins",
            '{"kind": "pipeline", "name": "x", "name": "y", "steps": [{"operation": {"kind": "function_step", "callable_name": "f"}}]}',
        ),
        (
            "NaN",
            '{"kind": "parallel", "steps": [{"kind": "function_step", "callable_name": "f"}], "timeout": NaN}',
        ),
        (
            "a string for a number",
            '{"kind": "parallel", "steps": [{"kind": "function_step", "callable_name": "f"}], "timeout": "2.5"}',
        ),
        ("an atomic root", json.dumps(FN)),
        ("an unknown kind", '{"kind": "pipelines", "steps": []}'),
        ("a control character in a string", '{"kind": "pipeline", "name": "a\tb", "steps": []}'),
        ("trailing text", json.dumps(pipe(FN)) + " x"),
        ("not an object", "[1, 2]"),
        (
            "a 4300-digit integer",
            '{"kind": "refinement_loop", "step": {"kind": "function_step", "callable_name": "f"}, "evaluator": "e", "state_updater_name": "u", "max_iterations": '
            + "9" * 4300
            + "}",
        ),
    ],
)
def test_odd_inputs_give_what_the_full_path_gives(label: str, data: Any) -> None:
    _same_as_full(data)
    _same_as_full(data, topology=False)


def test_duplicate_keys_and_lax_numbers_keep_their_values() -> None:
    text = '{"kind": "pipeline", "name": "x", "name": "y", "steps": [{"operation": {"kind": "function_step", "callable_name": "f"}}]}'
    assert parse_topology(text).name == "y"
    spec = parse_operation(
        '{"kind": "parallel", "steps": [{"kind": "function_step", "callable_name": "f"}], "timeout": "2.5"}'
    )
    assert spec.timeout == 2.5  # pyright: ignore[reportAttributeAccessIssue]


@pytest.mark.parametrize(
    ("node", "limits", "limit", "path"),
    [
        (loops(9), D8, "max_depth", "$.step.step.step.step.step.step.step.step"),
        (kind_last(loops(9)), D8, "max_depth", "$.step.step.step.step.step.step.step.step"),
        (pipes(3), SpecLimits(max_depth=2), "max_depth", "$.steps[0].operation.steps[0].operation"),
        (pipe(*[FN] * 200), D8, "max_nodes", "$.steps[199].operation"),
        (pipe(*[FN] * 4), SpecLimits(max_nodes=3), "max_nodes", "$.steps[2].operation"),
        (pipe(*[FN] * 4), SpecLimits(max_text_bytes=50), "max_text_bytes", "$"),
    ],
)
def test_limit_errors_name_their_limit_and_path(
    node: Any, limits: SpecLimits, limit: str, path: str
) -> None:
    text = json.dumps(node)
    with pytest.raises(SpecLimitError) as caught:
        parse_topology(text, limits)
    assert (caught.value.limit, caught.value.path) == (limit, path)
    _same_as_full(text, limits)
    _same_as_full(text.encode(), limits)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=topology_specs(max_depth=4), depth=st.integers(1, 4), nodes=st.integers(1, 40))
def test_a_vouched_spec_is_within_the_limits(spec: Any, depth: int, nodes: int) -> None:
    limits = SpecLimits(max_depth=depth, max_nodes=nodes)
    text = spec.model_dump_json()
    outcome = _same_as_full(text, limits)
    if within_limits(text, max_depth=depth, max_nodes=nodes):
        assert outcome == ("ok", spec)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=corrupted_spec_texts(max_depth=3))
def test_corrupted_texts_give_what_the_full_path_gives(text: str) -> None:
    _same_as_full(text, SpecLimits(max_depth=2, max_nodes=12))


def _with_id(node: dict[str, Any], node_id: str) -> dict[str, Any]:
    return {**node, "id": node_id}


DUPLICATES: list[tuple[str, dict[str, Any], str]] = [
    (
        "two siblings",
        pipe(_with_id(FN, "x"), _with_id(FN, "x")),
        "duplicate node id 'x' at $.steps[0].operation and $.steps[1].operation",
    ),
    (
        "a composite and its descendant",
        _with_id(pipe(loops(2, _with_id(FN, "x"))), "x"),
        "duplicate node id 'x' at $ and $.steps[0].operation.step.step",
    ),
    (
        "across two nested composites",
        pipe(loops(1, _with_id(FN, "x")), {"kind": "parallel", "steps": [_with_id(FN, "x")]}),
        "duplicate node id 'x' at $.steps[0].operation.step and $.steps[1].operation.steps[0]",
    ),
    (
        "a route step and the fallback",
        {
            "kind": "router",
            "classifier": "c",
            "routes": [{"name": "a", "step": _with_id(FN, "x")}],
            "fallback_step": loops(1, _with_id(FN, "x")),
        },
        "duplicate node id 'x' at $.routes[0].step and $.fallback_step.step",
    ),
]


@pytest.mark.parametrize(("label", "node", "message"), DUPLICATES, ids=[d[0] for d in DUPLICATES])
def test_duplicate_ids_are_the_same_error_with_and_without_the_memo(
    label: str, node: dict[str, Any], message: str
) -> None:
    from pydantic import TypeAdapter, ValidationError

    from core.ir import TopologySpec

    text = json.dumps(node)
    kind, (text_message, errors) = _same_as_full(text)  # through the memo
    assert kind == "error" and [m for _, m in errors] == [message + _TAIL]
    assert _outcome(lambda: parse_topology(node)) == ("error", (text_message, errors))
    with pytest.raises(ValidationError, match=re.escape(message)):  # no memo: walked
        TypeAdapter(TopologySpec).validate_json(text)


_TAIL = " (ids must be unique within a topology)"


def test_a_prebuilt_child_is_walked_for_ids() -> None:
    child = parse_topology(json.dumps(loops(1, _with_id(FN, "x"))))
    data = {"kind": "pipeline", "steps": [{"operation": child}, {"operation": _with_id(FN, "x")}]}
    kind, (_, errors) = _outcome(lambda: parse_topology(data))
    assert (kind, errors) == (
        "error",
        [
            (
                "$",
                "duplicate node id 'x' at $.steps[0].operation.step and $.steps[1].operation"
                + _TAIL,
            )
        ],
    )
    unique = {"kind": "pipeline", "steps": [{"operation": child}, {"operation": _with_id(FN, "y")}]}
    assert _outcome(lambda: parse_topology(unique))[0] == "ok"


# The fast schema (`core.ir._fast`): pydantic-core enforces the depth, and the rules a text
# cannot need are left out; it must accept exactly what the models accept, within the limits.

AGENT: dict[str, Any] = {"kind": "agent_step", "agent_name": "a"}
INLINE: dict[str, Any] = {"name": "judge", "output_schema": {"type": "string"}}


def _fast(data: Any, limits: SpecLimits = D8, *, topology: bool = True) -> Any:
    from core.ir.limits import _validate_fast  # pyright: ignore[reportPrivateUsage]

    return _validate_fast(data, limits, topology=topology)


@pytest.mark.parametrize("depth", [1, 2, 5, 8])
def test_the_fast_schema_takes_specs_up_to_the_depth_limit_only(depth: int) -> None:
    limits = SpecLimits(max_depth=depth)
    assert _fast(json.dumps(loops(depth)), limits) is not None
    assert _fast(json.dumps(pipes(depth)), limits) is not None
    assert _fast(json.dumps(loops(depth + 1)), limits) is None
    assert _fast(json.dumps(pipes(depth + 1)), limits) is None
    assert _fast(json.dumps(loops(depth + 1)), limits, topology=False) is None
    _same_as_full(json.dumps(loops(depth + 1)), limits)


@pytest.mark.parametrize(
    ("label", "node"),
    [
        ("an agent step with neither source", pipe({"kind": "agent_step"})),
        ("an agent step with a null name", pipe({"kind": "agent_step", "agent_name": None})),
        ("an agent step with both sources", pipe({**AGENT, "inline_spec": INLINE})),
        ("an inline agent step", pipe({"kind": "agent_step", "inline_spec": INLINE})),
        (
            "an inline classifier",
            {"kind": "router", "routes": [{"name": "x", "step": FN}], "classifier": INLINE},
        ),
        ("an inline evaluator", loops(1, AGENT) | {"evaluator": INLINE}),
        ("a name blank by str.strip only", pipe({**FN, "callable_name": "\x1c"})),
        ("a name of spaces", pipe({**FN, "callable_name": "   "})),
        ("an empty name", pipe({**FN, "callable_name": ""})),
        (
            "duplicate route names",
            {
                "kind": "router",
                "routes": [
                    {"name": "x", "step": FN, "condition_name": "c"},
                    {"name": " X", "step": FN, "condition_name": "c"},
                ],
            },
        ),
        (
            "a router with no classifier nor condition",
            {"kind": "router", "routes": [{"name": "x", "step": FN}]},
        ),
        (
            "duplicate ids in two branches",
            {"kind": "parallel", "steps": [{**FN, "id": "n"}, pipe({**AGENT, "id": "n"})]},
        ),
        (
            "unique ids",
            {"kind": "parallel", "steps": [{**FN, "id": "n"}, pipe({**AGENT, "id": "m"})]},
        ),
    ],
)
def test_the_fast_schema_keeps_every_model_rule(label: str, node: dict[str, Any]) -> None:
    text = json.dumps(node)
    _same_as_full(text)
    _same_as_full(text, topology=False)
    full = _outcome(lambda: _parse(text, None, topology=True, fast=False))
    assert (_fast(text) is not None) == (full[0] == "ok")


def test_an_inline_agent_deep_in_a_spec_is_checked_for_nesting() -> None:
    """With an inline AgentSpec the container nesting does not follow from the depth: a leaf
    agent with tools at the depth limit nests past `json_nesting_cap` (the full path refuses)."""
    agent = {"kind": "agent_step", "inline_spec": {**INLINE, "tools": [{"name": "t"}]}}
    outcomes: list[str] = []
    for depth in (2, 8):
        node = pipe(agent)
        for _ in range(depth - 1):
            node = pipe(node)
        text = json.dumps(node)
        outcomes.append(_same_as_full(text, SpecLimits(max_depth=depth))[0])
        outcomes.append(_same_as_full(text, SpecLimits(max_depth=depth + 1))[0])
    assert outcomes == ["limit", "ok", "limit", "ok"]  # refused by nesting, not by depth


def test_building_the_fast_schema_leaves_the_models_as_they_were() -> None:
    from core.ir._fast import NODE_HELPER_TYPES, fast_validator
    from core.ir.models import ParallelSpec

    fast_validator(3, topology=True)
    assert all(cls.__pydantic_complete__ for cls in NODE_HELPER_TYPES)
    with pytest.raises(ValueError, match="duplicate node id"):
        ParallelSpec.model_validate({"steps": [{**FN, "id": "n"}, {**FN, "id": "n"}]})


def test_a_fast_schema_built_while_another_builds_keeps_its_depth_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Thread B asks for a fast schema while thread A is building one (the node classes marked
    incomplete). B must not build until A has restored the classes and B has marked them again:
    a build that sees complete classes takes the models' own validators, depth limit lifted."""
    import threading

    from pydantic_core import SchemaValidator, ValidationError

    import core.ir._fast as fast

    fast.fast_validator.cache_clear()
    b_reached, a_restored = threading.Event(), threading.Event()
    built: dict[str, Any] = {}

    def b() -> None:
        built["b"] = fast.fast_validator(4, topology=True)

    thread_b = threading.Thread(target=b)

    def build(schema: Any) -> SchemaValidator:
        if threading.current_thread() is thread_b:
            b_reached.set()
            a_restored.wait(2.0)  # without the lock: A has restored the classes by now
        else:
            thread_b.start()
            b_reached.wait(0.3)  # with the lock B cannot get here while A builds
        return SchemaValidator(schema)

    monkeypatch.setattr(fast, "SchemaValidator", build)
    built["a"] = fast.fast_validator(3, topology=True)
    a_restored.set()
    thread_b.join(5.0)
    fast.fast_validator.cache_clear()  # the patched builds are not kept for other tests
    assert all(cls.__pydantic_complete__ for cls in fast.NODE_HELPER_TYPES)
    refused: list[int] = []
    for depth in (3, 4):
        validator = built["a" if depth == 3 else "b"]
        validator.validate_json(json.dumps(pipes(depth)))  # at the limit: taken
        try:
            validator.validate_json(json.dumps(pipes(depth + 1)))
        except ValidationError:
            refused.append(depth)
    assert refused == [3, 4]


def _routers(depth: int, *, fallback: bool) -> dict[str, Any]:
    node = FN
    for _ in range(depth):
        route = {"name": "x", "step": FN if fallback else node, "condition_name": "c"}
        node = {"kind": "router", "routes": [route]} | ({"fallback_step": node} if fallback else {})
    return node


def _parallels(depth: int) -> dict[str, Any]:
    node = FN
    for _ in range(depth):
        node = {"kind": "parallel", "steps": [FN, node]}
    return node


@pytest.mark.parametrize("depth", [1, 3, 8])
@pytest.mark.parametrize(
    "build",
    [
        lambda d: _routers(d, fallback=False),
        lambda d: _routers(d, fallback=True),
        _parallels,
    ],
    ids=["route steps", "fallback steps", "parallel branches"],
)
def test_every_step_position_counts_for_the_fast_schemas_depth(depth: int, build: Any) -> None:
    text = json.dumps(build(depth))
    assert _fast(text, SpecLimits(max_depth=depth)) is not None
    if depth > 1:
        assert _fast(text, SpecLimits(max_depth=depth - 1)) is None
        _same_as_full(text, SpecLimits(max_depth=depth - 1))


def test_the_not_blank_pattern_is_str_strip_over_every_code_point() -> None:
    """The fast schema checks names with `NOT_BLANK_PATTERN` (pydantic-core's Rust regex) in
    place of `_not_blank`'s `value.strip()`: one character each, every code point but the
    surrogates (which no JSON text pydantic-core reads can hold), refused exactly when
    `str.strip()` removes it."""
    from pydantic_core import SchemaValidator, ValidationError

    from core.ir._fast import NOT_BLANK_PATTERN

    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    validator = SchemaValidator(
        {"type": "list", "items_schema": {"type": "str", "pattern": NOT_BLANK_PATTERN}}
    )
    with pytest.raises(ValidationError) as caught:
        validator.validate_python(chars)
    refused = {chars[cast(int, e["loc"][0])] for e in caught.value.errors()}
    assert refused == {c for c in chars if not c.strip()}
    assert len(refused) == 29  # Unicode's 25 White_Space characters and U+001C..U+001F
    assert validator.validate_python(["\x1c a\u3000", "\u200b"]) == ["\x1c a\u3000", "\u200b"]
    with pytest.raises(ValidationError):
        validator.validate_python(["\x1c\u3000 \x85"])


def test_every_blank_name_takes_the_full_path() -> None:
    for char in sorted({chr(c) for c in range(0x3001) if not chr(c).strip()}):
        for node in (pipe({**FN, "callable_name": char}), pipe(_with_id(FN, char + char))):
            text = json.dumps(node)
            assert _fast(text) is None
            assert _same_as_full(text)[0] == "error"


def _renamed(node: Any, old: str, new: str, *, last: bool) -> Any:
    """`node` with the last (or first) `"id": old` renamed `new` (a JSON round trip)."""
    text = json.dumps(node)
    token, at = f'"id": "{old}"', 0
    at = text.rindex(token) if last else text.index(token)
    return json.loads(text[:at] + f'"id": "{new}"' + text[at + len(token) :])


@pytest.mark.parametrize(("label", "node", "message"), DUPLICATES, ids=[d[0] for d in DUPLICATES])
def test_the_fast_schema_takes_unique_ids_and_leaves_a_repeat_to_the_full_path(
    label: str, node: dict[str, Any], message: str
) -> None:
    """Ids are noted in the validation context and checked once for repeats: a repeat anywhere
    (a composite's subtree) is refused, unique ids are taken, with the full path's result."""
    assert _fast(json.dumps(node)) is None
    unique = _renamed(node, "x", "y", last=True)
    full = _outcome(lambda: _parse(json.dumps(unique), None, topology=True, fast=False))
    assert full[0] == "ok"
    assert _fast(json.dumps(unique)) == full[1]
    assert _fast(json.dumps(_renamed(node, "x", "y", last=False))) is not None


def test_ids_of_a_spec_with_an_inline_agent_step_are_noted_once() -> None:
    """An inline agent step fails the union's first form (after its id was noted) and is taken
    by the second, which does not note it again."""
    inline = {"kind": "agent_step", "inline_spec": INLINE, "id": "a"}
    text = json.dumps(pipe(_with_id(FN, "f"), inline))
    spec = _fast(text)
    assert spec is not None and spec == parse_topology(text)
    assert [n.id for _, n in walk(spec)] == [None, "f", "a"]
    assert _fast(json.dumps(pipe(_with_id(FN, "a"), inline))) is None
    assert _same_as_full(json.dumps(pipe(_with_id(FN, "a"), inline)))[0] == "error"


def test_a_fast_validator_without_a_context_refuses_ids() -> None:
    """Without a context dict the ids could not be noted, so a spec with one is refused."""
    from pydantic_core import ValidationError

    from core.ir._fast import fast_validator

    validator = fast_validator(8, topology=True)
    assert validator.validate_json(json.dumps(pipe(FN))) == parse_topology(pipe(FN))
    with pytest.raises(ValidationError, match="only with a validation context"):
        validator.validate_json(json.dumps(pipe(_with_id(FN, "x"))))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=topology_specs(max_depth=4, max_children=4, ids="none"))
def test_every_node_takes_at_least_the_node_min_chars(spec: Any) -> None:
    """The node count is skipped for a text shorter than `17 * (max_nodes + 1)`: no spec
    without an inline AgentSpec, however compactly written, has more than `len(text) // 17`
    nodes, and with `max_nodes` one below its count it is refused as the full path does."""
    from core.ir.limits import _NODE_MIN_CHARS  # pyright: ignore[reportPrivateUsage]

    text = json.dumps(spec.model_dump(mode="json", exclude_defaults=True), separators=(",", ":"))
    nodes = len(list(walk(spec)))
    assert len(text) >= _NODE_MIN_CHARS * nodes
    if nodes > 1:
        outcome = _same_as_full(text, SpecLimits(max_nodes=nodes - 1, max_depth=4))
        assert outcome[0] == "limit" and outcome[1][1] == "max_nodes"
    assert _same_as_full(text, SpecLimits(max_nodes=nodes, max_depth=4)) == ("ok", spec)


@pytest.mark.parametrize(
    ("step", "fields_set"),
    [
        (AGENT, {"kind", "agent_name"}),
        ({**AGENT, "inline_spec": None}, {"kind", "agent_name", "inline_spec"}),
        ({"kind": "agent_step", "inline_spec": INLINE}, {"kind", "inline_spec"}),
        (
            {"kind": "agent_step", "agent_name": None, "inline_spec": INLINE, "id": "q"},
            {"kind", "agent_name", "inline_spec", "id"},
        ),
    ],
)
def test_both_forms_of_an_agent_step_build_the_models_instance(
    step: dict[str, Any], fields_set: set[str]
) -> None:
    """The union standing for "exactly one of agent_name and inline_spec" gives the models'
    own instance, with the same fields set (what `exclude_unset` dumps)."""
    text = json.dumps(pipe(step))
    fast, full = _fast(text), _parse(text, None, topology=True, fast=False)
    assert fast is not None and fast == full
    assert fast.steps[0].operation.model_fields_set == fields_set
    assert fast.model_dump(exclude_unset=True) == full.model_dump(exclude_unset=True)
