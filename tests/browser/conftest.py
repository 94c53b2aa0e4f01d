"""Browser-test plumbing: the session's replay store, studio and Chromium (shared by every
browser test module, so the search that fills the store runs once), and each test's outcome kept
on its node, so the page fixture can screenshot a failing page to `test-artifacts/`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from studio_harness import REPO, launch_chromium, serve_studio, shot

from core.ir import parse_topology
from core.search.registry import TopologyRegistry
from core.storage import DuckDBRunStore
from studio.views.tables import ARCHIVE_SORTS, archive_table, full_split

DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[Any]:
    del call
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def replay_store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A database with a finished GSM8K replay search, and a registry holding its seed."""
    root = tmp_path_factory.mktemp("studio_browser")
    db = root / "runs.duckdb"
    env = dict(
        os.environ, TOPOLOGY_STUDIO_DATASETS=DATASETS, TOPOLOGY_STUDIO_CACHE=str(root / "cache")
    )
    proc = subprocess.run(
        [sys.executable, "-m", "studio.cli", "search", "gsm8k_replay", "--strategy", "evolutionary",
         "--seed", "1", "--db", str(db), "--max-evaluations", "10", "--time-scale", "0", "--no-test", "--traces",
         "--set", "gold.validation_size=40", "--minibatch-size", "8"],
        cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id = re.search(r"^run:\s+(\S+)", proc.stdout, re.MULTILINE)
    assert run_id is not None, proc.stdout[-2000:]
    with DuckDBRunStore(db) as store:
        archive = store.archive(run_id.group(1))
        seed_json = store.get_spec(str(archive["spec_hash"].tolist()[0]))
        # the first evaluated router candidate (the drill-down shows its route)
        routers = [
            int(i)
            for i, h, n in zip(
                archive["candidate_idx"], archive["spec_hash"], archive["n_examples"], strict=True
            )
            if n == n and n > 0 and '"router"' in (store.get_spec(str(h)) or "")
        ]
        # the Live page's archive table in its default order (sorted by ARCHIVE_SORTS[0],
        # descending): the candidate of each row, as shown
        table = archive_table(
            store.archive(run_id.group(1), include_unevaluated=True).pipe(
                lambda a: a.assign(comparable=full_split(a))
            ),
            sort_by=ARCHIVE_SORTS[0],
        )
        archive_order = [int(i) for i in table["candidate_idx"].tolist()]
    registry = root / "registry"
    seed = parse_topology(seed_json or "")
    TopologyRegistry(registry).write("gsm8k_replay", seed, None, note="seed")
    return {
        "db": db,
        "run_id": run_id.group(1),
        "registry": registry,
        "root": root,
        "router_candidate": routers[0] if routers else None,
        "archive_order": archive_order,
    }


@pytest.fixture(scope="session")
def studio(replay_store: dict[str, Any]) -> Iterator[str]:
    env = {"TOPOLOGY_STUDIO_DATASETS": DATASETS, "TOPOLOGY_STUDIO_USER": "browser-tester"}
    with serve_studio(replay_store["db"], registry=replay_store["registry"], env=env) as url:
        yield url


# Module scope, not session: while Playwright's sync API is open, its event loop counts as
# running in the main thread, and every later test's asyncio.run() failed ("cannot be called
# from a running event loop": 429 failures in one CI run after a browser test failed).
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch_chromium(p)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, studio: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A page that records every request leaving 127.0.0.1 (there must be none), and every
    response with an error status in `pg.studio_bad_responses`."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    outside: list[str] = []

    def watch(request: Any) -> None:
        url = str(request.url)
        if not url.startswith(("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:", "about:")):
            outside.append(url)

    pg.on("request", watch)
    # every failed response of the studio itself (it once logged two 404s on each page load:
    # `_stcore/health` and `host-config` fetched relative to the page's path)
    bad: list[str] = []
    pg.on("response", lambda r: bad.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    pg.studio_bad_responses = bad
    yield pg
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        shot(pg, f"FAILED-{request.node.name}")
    context.close()
    assert outside == [], f"requests left 127.0.0.1: {outside[:5]}"
