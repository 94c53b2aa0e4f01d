"""The four reference examples that the other reference tests run in an adapted form, here as
written, with only the import changed (`from orqest... import X` -> `from core import X`):

- the meta agent search loop, on `meta_agent_model="openai:gpt-4.1"` with an `api_key`: the
  documented form runs unchanged; its OpenAI calls go to a local OpenAI-compatible stand-in
  (`OPENAI_BASE_URL`, which the OpenAI client reads), so no key or network is needed;
- the memory store cache over `LocalMemoryStore`, and the dynamic tool factory over
  `SubprocessSandbox`: both names are deliberately not provided (docs/reference-compat.md says
  why), and the documented import fails with an `ImportError` naming the replacement; with the
  name replaced, the rest of the example runs as written;
- `BaseAgent.add_tool` with the pydantic-ai tool the dynamic tool factory made: the next
  access to `agent.agent` has the tool, and a run calls it in its sandbox.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pydantic_ai.models
import pytest
from pydantic import TypeAdapter
from pydantic_ai.models.test import TestModel
from test_autonomy_guide import extract_dois_spec
from test_topology_optimization_guide import WINNER, _world, score_fn

from core import TopologySpec


class _OpenAIStandIn(BaseHTTPRequestHandler):
    """Answers `POST /v1/responses` (the OpenAI Responses API, which pydantic-ai uses for an
    `openai:` model) as OpenAI does, with a call of the request's output tool carrying
    `design` (one `TopologyDesign`); keeps the requests."""

    design: str = ""
    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        assert self.path == "/v1/responses", self.path
        n = len(self.requests)
        reply = {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": 0,
            "model": body["model"],
            "status": "completed",
            "output": [
                {
                    "type": "function_call",
                    "id": f"fc_{n}",
                    "call_id": f"call_{n}",
                    "name": body["tools"][0]["name"],
                    "arguments": self.design,
                    "status": "completed",
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "required",
            "tools": [],
            "usage": {
                "input_tokens": 100,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 20,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 120,
            },
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        pass


@pytest.fixture
def openai_stand_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_OpenAIStandIn]]:
    handler = type("Handler", (_OpenAIStandIn,), {"requests": []})
    handler.design = json.dumps({"thought": "abstain at the end", "spec": WINNER})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_port}/v1")
    # the suite forbids real model requests; these go to the stand-in on 127.0.0.1 only
    monkeypatch.setattr(pydantic_ai.models, "ALLOW_MODEL_REQUESTS", True)
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_meta_agent_search_loop_as_written(openai_stand_in: type[_OpenAIStandIn]) -> None:
    callable_registry, agent_registry, gold_set = _world()
    api_key = "sk-not-a-real-key"
    # --- the example, as written (topology-optimization-guide.txt) ---
    from core import (
        AgentStepSpec,
        MetaAgentConfig,
        MetaAgentSearch,
        PipelineSpec,
        PipelineStepEntry,
        TopologyEvaluator,
        TopologyGene,
    )

    seed = PipelineSpec(steps=[PipelineStepEntry(operation=AgentStepSpec(agent_name="cot"))])
    gene = TopologyGene(
        name="main",
        initial=seed,
        constraints="Must end with an agent capable of abstaining for off-topic inputs.",
    )

    search = MetaAgentSearch(
        MetaAgentConfig(n_generations=10, archive_strategy="top_k", archive_size=5),
        gene=gene,
        evaluator=TopologyEvaluator(
            score_fn=score_fn,
            callable_registry=callable_registry,
            agent_registry=agent_registry,
        ),
        meta_agent_model="openai:gpt-4.1",
        api_key=api_key,
    )
    result = asyncio.run(search.run(trainset=gold_set))  # the docs' `await search.run(...)`
    # --- what it found ---
    winner = TypeAdapter(TopologySpec).validate_python(WINNER)
    assert result.best_decoded["main"] == winner
    assert [r.status for r in result.history] == [
        "evaluated", "evaluated", "duplicate", "duplicate", "duplicate",
    ]  # fmt: skip
    assert [r.accuracy for r in result.history[:2]] == [0.5, 1.0]
    # 4 generations x (design + 2 reflexion passes), every one an OpenAI request with the key
    assert len(openai_stand_in.requests) == 12
    assert {r["model"] for r in openai_stand_in.requests} == {"gpt-4.1"}


def test_the_memory_store_cache_as_written_names_its_replacement(tmp_path: Path) -> None:
    with pytest.raises(ImportError) as caught:
        from core import LocalMemoryStore  # noqa: F401 (the docs' `from orqest.memory import`)
    assert str(caught.value) == (
        "cannot import name 'LocalMemoryStore' from 'core': memory lives in the run store's "
        "DuckDB file (runtime.md, decision 5): use core.DuckDBMemoryStore"
    )
    # the rest of the example as written, with the replacement's name
    from core import DuckDBMemoryStore as LocalMemoryStore
    from core import HashedNgramEmbedder, MemoryStoreCache

    my_embedder = HashedNgramEmbedder()
    store = LocalMemoryStore(str(tmp_path / "topology_cache.db"), embedder=my_embedder)
    cache = MemoryStoreCache(store, threshold=0.85, namespace="topology_cache")
    spec = TypeAdapter(TopologySpec).validate_python(WINNER)
    asyncio.run(cache.store("weather today", spec, success=True))
    assert asyncio.run(cache.lookup("Weather today")) == spec
    store.close()


def test_the_dynamic_tool_factory_as_written_names_its_replacement() -> None:
    with pytest.raises(ImportError) as caught:
        from core import SubprocessSandbox  # noqa: F401 (the docs' `from orqest.sandbox import`)
    assert str(caught.value) == (
        "cannot import name 'SubprocessSandbox' from 'core': generated tools run only in a "
        "real sandbox (runtime.md, decision 7): use core.BubblewrapSandbox"
    )


def test_add_tool_with_the_factory_s_pydantic_ai_tool() -> None:
    from core import BaseAgent, BubblewrapSandbox, DynamicToolFactory

    tool_factory = DynamicToolFactory(BubblewrapSandbox())
    doi_tool = asyncio.run(tool_factory.spawn(extract_dois_spec()))  # pydantic_ai.Tool
    agent = BaseAgent(model=TestModel(call_tools=["extract_dois"]))
    before = agent.agent
    # --- the example, as written (autonomy-guide.txt) ---
    agent.add_tool(doi_tool)  # appends + invalidates _agent cache
    # --- the next access rebuilds with the new tool, and a run calls it in the sandbox ---
    assert agent.agent is not before
    assert [t.name for t in agent.tools] == ["extract_dois"]
    result = asyncio.run(agent.agent.run("see 10.1000/xyz123"))
    returns = [
        part.content
        for message in result.all_messages()
        for part in message.parts
        if part.part_kind == "tool-return"
    ]
    assert returns == [{"dois": [], "count": 0}]
