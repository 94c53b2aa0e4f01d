"""Starting the studio and Chromium for the browser tests (not a test module itself).

- `serve_studio(db, ...)`: `streamlit run studio/server.py --server.headless true --server.address
  127.0.0.1 --server.port <free port>` as a subprocess (from the checkout, so its
  `.streamlit/config.toml` applies), waits for `/_stcore/health`, and stops it at the end.
- `launch_chromium(playwright)`: Debian's `/usr/bin/chromium` through Playwright's
  `executable_path` (never `playwright install`), with no background networking.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("TOPOLOGY_STUDIO_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ARTIFACTS = REPO / "test-artifacts"


def chromium_missing_reason() -> str | None:
    """Why the browser tests cannot run here, or None when Chromium is installed."""
    if Path(CHROMIUM).exists() or shutil.which(CHROMIUM):
        return None
    return f"{CHROMIUM} is missing (apt-get install chromium); .ci/run installs it in CI"


def require_chromium() -> None:
    """Called at a browser test module's top: skips the module when Chromium is missing, except
    in CI (`CI=true`), where that fails it."""
    import pytest

    missing = chromium_missing_reason()
    if missing is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the browser tests need Chromium in CI: {missing}", pytrace=False)
    pytest.skip(missing, allow_module_level=True)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve_studio(
    db: Path,
    *,
    registry: Path | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = 90.0,
) -> Iterator[str]:
    """Serve the studio over `db`; yields its base URL, e.g. `http://127.0.0.1:40123`."""
    port = free_port()
    full_env = dict(os.environ)
    full_env["TOPOLOGY_STUDIO_DB"] = str(db)
    if registry is not None:
        full_env["TOPOLOGY_STUDIO_REGISTRY"] = str(registry)
    full_env.update(env or {})
    log = (db.parent / f"streamlit-{port}.log").open("w")
    proc = subprocess.Popen(  # noqa: S603 (fixed argv)
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(REPO / "studio" / "server.py"),
            "--server.headless",
            "true",
            "--server.address",
            "127.0.0.1",
            "--server.port",
            str(port),
        ],
        cwd=REPO,
        env=full_env,
        stdout=log,
        stderr=subprocess.STDOUT,
        process_group=0,  # its own group; default SIGINT even when pytest runs with it ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the studio exited with {proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:  # noqa: S310
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the studio did not answer within {timeout_s:g} s")
            time.sleep(0.2)
        yield url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def launch_chromium(playwright: Any) -> Any:
    """Debian's Chromium, headless, through Playwright."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def shot(pg: Any, name: str) -> None:
    """Screenshot the whole page: Streamlit scrolls inside its main block, so the viewport is
    made as tall as that block for the picture (and set back after)."""
    ARTIFACTS.mkdir(exist_ok=True)
    size = pg.viewport_size or {"width": 1400, "height": 1000}
    height = pg.evaluate(
        "() => { const m = document.querySelector('[data-testid=\"stMain\"]');"
        " return m ? m.scrollHeight : document.body.scrollHeight; }"
    )
    pg.set_viewport_size({"width": size["width"], "height": max(size["height"], int(height) + 40)})
    pg.wait_for_timeout(500)
    pg.screenshot(path=str(ARTIFACTS / f"studio-{name}.png"), full_page=True)
    pg.set_viewport_size(size)


DOC_IMAGES = REPO / "docs" / "images"


def doc_shot(pg: Any, name: str) -> None:
    """The README's and the docs' picture of what the page shows now: the viewport (1400 x
    1000 px, not the whole page, so the picture reads at a glance) written to
    `docs/images/<name>.png`, committed; every run of the browser tests makes it again, so it
    shows the studio as it is."""
    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
    pg.wait_for_timeout(500)
    pg.screenshot(path=str(DOC_IMAGES / f"{name}.png"))


def settle(pg: Any, title: str, timeout_ms: int = 60_000) -> None:
    """Wait for the page's title and for Streamlit to finish running the script."""
    pg.get_by_role("heading", name=title, exact=True).first.wait_for(timeout=timeout_ms)
    idle(pg, timeout_ms)


def idle(pg: Any, timeout_ms: int = 60_000) -> None:
    pg.wait_for_timeout(300)
    pg.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " || !document.querySelector('[data-testid=\"stStatusWidget\"]').innerText.includes('Running')",
        timeout=timeout_ms,
    )
    pg.wait_for_timeout(300)


def no_errors(pg: Any) -> None:
    assert pg.locator('[data-testid="stException"]').count() == 0
    errors = pg.locator('[data-testid="stAlertContentError"]').all_inner_texts()
    assert errors == [], errors


def select(pg: Any, label: str, option: str) -> None:
    """Choose `option` in the selectbox labelled `label` (retried: a rerun may close the list)."""
    box = pg.get_by_role("combobox", name=label, exact=True).first
    for _ in range(5):
        idle(pg)
        box.click()
        try:
            pg.get_by_role("option", name=option, exact=True).first.click(timeout=5_000)
        except Exception:  # noqa: BLE001 (the list closed under a rerun: try again)
            pg.keyboard.press("Escape")
            continue
        idle(pg)
        if box.input_value() == option:
            return
    raise AssertionError(f"could not choose {option!r} in {label!r}")


def studio_pages(run_id: str) -> list[tuple[str, str]]:
    """`(path, title)` of every page of the studio's menu (`PAGE_SPECS`, so a new page is never
    left out), with `?run=` for those that show one run."""
    from studio._st_common import PAGE_SPECS

    with_run = {"live", "compare", "runtime"}
    return [
        (
            "/" if name == "runs" else f"/{name}" + (f"?run={run_id}" if name in with_run else ""),
            title,
        )
        for name, title in PAGE_SPECS.items()
    ]


def open_drawn(pg: Any, url: str, title: str) -> None:
    """Open a page and wait for its script and its drawings: the Live page's chart points, the
    editor's and Compare's graphs, the overlay's charts."""
    pg.goto(url)
    settle(pg, title)
    if title == "Live search":
        pg.locator(".js-plotly-plot .scatterlayer .points path").first.wait_for(timeout=60_000)
    if title == "Run overlay":
        pg.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    if title in ("Topology editor", "Compare"):
        pg.locator('[data-testid="stGraphVizChart"] svg').first.wait_for(timeout=60_000)


def page_shot_name(title: str) -> str:
    """A page title as a screenshot's name: `Diff & apply` -> `diff-apply`."""
    return title.lower().replace(" & ", "-").replace(" ", "-")
