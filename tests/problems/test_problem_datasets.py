"""Dataset files: configured directory, then cache, then download; sha256 always checked.

No test touches the internet: downloads come from a local HTTP server on 127.0.0.1, and "no
network" is a closed local port (`http://127.0.0.1:9/`).
"""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.errors import DatasetError
from core.problems import (
    CACHE_ENV,
    DATASETS_ENV,
    default_cache_root,
    fetch_dataset_file,
    sha256_file,
)

CONTENT = b'{"question": "1+1?", "answer": "#### 2"}\n'
SHA = hashlib.sha256(CONTENT).hexdigest()
CLOSED = "http://127.0.0.1:9/{file}"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A local HTTP server serving `tmp_path/served/` ; yields its `{file}` URL pattern."""
    served = tmp_path / "served"
    served.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            super().__init__(*args, directory=str(served), **kwargs)

        def log_message(self, format, *args):  # type: ignore[no-untyped-def]  # noqa: A002
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/{{file}}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def put(
    directory: Path, content: bytes = CONTENT, dataset: str = "toy", file: str = "data.jsonl"
) -> Path:
    path = directory / dataset / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def test_a_configured_directory_comes_first(tmp_path: Path) -> None:
    good = put(tmp_path / "configured")
    got = fetch_dataset_file(
        "toy",
        "data.jsonl",
        sha256=SHA,
        url=CLOSED,
        datasets_dir=tmp_path / "configured",
        cache_root=tmp_path / "c",
    )
    assert got == good
    # and a verified copy goes into the cache, so a later load needs no configured directory
    cached = tmp_path / "c" / "datasets" / "toy" / "data.jsonl"
    assert cached.read_bytes() == CONTENT
    again = fetch_dataset_file(
        "toy", "data.jsonl", sha256=SHA, url=CLOSED, datasets_dir=[], cache_root=tmp_path / "c"
    )
    assert again == cached


def test_a_cache_copy_already_there_is_not_replaced(tmp_path: Path) -> None:
    """The cache is filled only when it lacks the file: a tampered copy stays, and fails its
    checksum once the configured directory is gone (never silently repaired or used)."""
    put(tmp_path / "configured")
    tampered = put(tmp_path / "c" / "datasets", content=b"tampered\n")
    fetch_dataset_file(
        "toy",
        "data.jsonl",
        sha256=SHA,
        url=CLOSED,
        datasets_dir=tmp_path / "configured",
        cache_root=tmp_path / "c",
    )
    assert tampered.read_bytes() == b"tampered\n"
    with pytest.raises(DatasetError) as info:
        fetch_dataset_file(
            "toy", "data.jsonl", sha256=SHA, url=CLOSED, datasets_dir=[], cache_root=tmp_path / "c"
        )
    assert str(info.value).startswith(
        f"{tampered} (cache) fails its checksum: expected sha256 {SHA}, actual sha256 "
        f"{sha256_file(tampered)}."
    )


def test_an_unwritable_cache_still_gives_the_configured_file(tmp_path: Path) -> None:
    good = put(tmp_path / "configured")
    blocker = tmp_path / "c"
    blocker.write_text("a file where the cache folder would be")
    got = fetch_dataset_file(
        "toy",
        "data.jsonl",
        sha256=SHA,
        url=CLOSED,
        datasets_dir=tmp_path / "configured",
        cache_root=blocker,
    )
    assert got == good


def test_the_env_var_names_the_configured_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = put(tmp_path / "second")
    monkeypatch.setenv(DATASETS_ENV, f"{tmp_path / 'first'}:{tmp_path / 'second'}")
    got = fetch_dataset_file("toy", "data.jsonl", sha256=SHA, url=CLOSED, cache_root=tmp_path / "c")
    assert got == good


def test_a_wrong_checksum_in_the_configured_directory_is_an_error(tmp_path: Path) -> None:
    bad = put(tmp_path / "configured", content=CONTENT + b"corrupted\n")
    with pytest.raises(DatasetError) as info:
        fetch_dataset_file(
            "toy",
            "data.jsonl",
            sha256=SHA,
            url=CLOSED,
            datasets_dir=tmp_path / "configured",
            cache_root=tmp_path / "c",
        )
    msg = str(info.value)
    assert str(bad) in msg
    assert f"expected sha256 {SHA}" in msg
    assert f"actual sha256 {sha256_file(bad)}" in msg
    assert DATASETS_ENV in msg


def test_the_cache_comes_second(tmp_path: Path) -> None:
    cached = put(tmp_path / "cache" / "datasets")
    got = fetch_dataset_file(
        "toy",
        "data.jsonl",
        sha256=SHA,
        url=CLOSED,
        datasets_dir=tmp_path / "empty",
        cache_root=tmp_path / "cache",
    )
    assert got == cached


def test_a_corrupted_cache_copy_is_an_error(tmp_path: Path) -> None:
    put(tmp_path / "cache" / "datasets", content=b"partial")
    with pytest.raises(DatasetError, match="fails its checksum"):
        fetch_dataset_file(
            "toy",
            "data.jsonl",
            sha256=SHA,
            url=CLOSED,
            datasets_dir=tmp_path / "empty",
            cache_root=tmp_path / "cache",
        )


def test_missing_with_no_network_says_where_it_looked_and_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(DatasetError) as info:
        fetch_dataset_file(
            "toy",
            "data.jsonl",
            sha256=SHA,
            url=CLOSED,
            datasets_dir=tmp_path / "empty",
            cache_root=tmp_path / "cache",
            timeout_s=2.0,
        )
    msg = str(info.value)
    assert "dataset 'toy' file 'data.jsonl' is not available" in msg
    assert str(tmp_path / "empty" / "toy" / "data.jsonl") in msg
    assert str(tmp_path / "cache" / "datasets" / "toy" / "data.jsonl") in msg
    assert "download http://127.0.0.1:9/data.jsonl: failed" in msg
    assert f"Set {DATASETS_ENV}" in msg
    assert not (tmp_path / "cache" / "datasets" / "toy" / "data.jsonl").exists()


def test_download_fills_the_cache_then_the_cache_is_used(tmp_path: Path, server: str) -> None:
    put(tmp_path / "served", dataset="", file="data.jsonl")
    got = fetch_dataset_file(
        "toy",
        "data.jsonl",
        sha256=SHA,
        url=server,
        datasets_dir=tmp_path / "empty",
        cache_root=tmp_path / "cache",
    )
    assert got == tmp_path / "cache" / "datasets" / "toy" / "data.jsonl"
    assert got.read_bytes() == CONTENT
    assert [p.name for p in got.parent.iterdir()] == ["data.jsonl"]  # no temp files left
    # the server is not needed any more
    again = fetch_dataset_file(
        "toy",
        "data.jsonl",
        sha256=SHA,
        url=CLOSED,
        datasets_dir=tmp_path / "empty",
        cache_root=tmp_path / "cache",
    )
    assert again == got


def test_a_download_with_the_wrong_checksum_writes_nothing(tmp_path: Path, server: str) -> None:
    other = b"something else\n"
    put(tmp_path / "served", content=other, dataset="", file="data.jsonl")
    with pytest.raises(DatasetError) as info:
        fetch_dataset_file(
            "toy",
            "data.jsonl",
            sha256=SHA,
            url=server,
            datasets_dir=tmp_path / "empty",
            cache_root=tmp_path / "cache",
        )
    assert f"expected sha256 {SHA}" in str(info.value)
    assert f"actual sha256 {hashlib.sha256(other).hexdigest()}" in str(info.value)
    cache_dir = tmp_path / "cache" / "datasets" / "toy"
    assert list(cache_dir.iterdir()) == []


def test_the_cache_root_follows_the_env_var(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mycache"))
    assert default_cache_root() == tmp_path / "mycache"
    monkeypatch.delenv(CACHE_ENV)
    # from a source checkout: the git-ignored data/.cache of the checkout
    root = default_cache_root()
    assert root.parts[-2:] == ("data", ".cache")
