"""Fetching a problem's pinned data files: configured directory, then cache, then download.

Every file is named by a dataset (a directory name, e.g. `"gsm8k"`), a file name and its
expected sha256. `fetch_dataset_file` looks, in order:

1. in the **configured directories**: the `datasets_dir` argument, else the environment variable
   `TOPOLOGY_STUDIO_DATASETS` (one or more directories separated by `os.pathsep`), each holding
   `<dataset>/<file>` (CI points it at `../shared/datasets`). A file found there is also copied
   into the cache (below) unless the cache already holds it, so a later command finds it with
   the variable unset (the first `demo` fills the cache this way);
2. in the **cache**: `<cache root>/datasets/<dataset>/<file>`, where the cache root is
   `$TOPOLOGY_STUDIO_CACHE` if set, else the source checkout's git-ignored `data/.cache/` when
   the project runs from a checkout (editable install), else
   `$XDG_CACHE_HOME/topology-studio` (default `~/.cache/topology-studio`);
3. by **download** from the pinned address (`url` with `{file}` replaced) into the cache, with a
   short timeout (urllib; written to a temporary file and moved into place only once its
   checksum matches).

The sha256 is always checked (streamed, 1 MiB at a time; a verified file is remembered for the
process by path, size and modification time); a copy into the cache is checked again before it
is moved into place, and a cache that cannot be written is left as it is (the configured file is
still returned). A file that is found but fails its checksum is an
error, never skipped past: a silently different dataset would make every figure wrong. Errors
are `core.errors.DatasetError` with every place looked at, the expected and actual sha256, and
what to set.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from core.errors import DatasetError

__all__ = [
    "CACHE_ENV",
    "DATASETS_ENV",
    "configured_dataset_dirs",
    "default_cache_root",
    "fetch_dataset_file",
    "sha256_file",
]

DATASETS_ENV = "TOPOLOGY_STUDIO_DATASETS"
"""Environment variable naming the configured dataset directories (`os.pathsep`-separated)."""

CACHE_ENV = "TOPOLOGY_STUDIO_CACHE"
"""Environment variable naming the cache root (datasets go to `<root>/datasets/`)."""

_CHUNK = 1 << 20
_verified: dict[tuple[str, int, int, str], bool] = {}


def sha256_file(path: Path) -> str:
    """The sha256 of a file as 64 lowercase hex digits, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def configured_dataset_dirs(
    datasets_dir: str | Path | Sequence[str | Path] | None = None,
) -> list[Path]:
    """The configured dataset directories: `datasets_dir` if given, else `$TOPOLOGY_STUDIO_DATASETS`.

    Args:
        datasets_dir: one directory, several, or None to read the environment variable.

    Returns:
        The directories in lookup order (possibly empty); they need not exist.
    """
    if datasets_dir is None:
        raw = os.environ.get(DATASETS_ENV, "")
        return [Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip()]
    if isinstance(datasets_dir, (str, Path)):
        return [Path(datasets_dir).expanduser()]
    return [Path(p).expanduser() for p in datasets_dir]


def _checkout_root() -> Path | None:
    """The source checkout holding the `core` package, if the project runs from one."""
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "data").is_dir():
        return root
    return None


def default_cache_root() -> Path:
    """The cache root: `$TOPOLOGY_STUDIO_CACHE`, else `<checkout>/data/.cache` (git-ignored) when
    running from a source checkout, else `$XDG_CACHE_HOME/topology-studio` (default
    `~/.cache/topology-studio`)."""
    env = os.environ.get(CACHE_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    checkout = _checkout_root()
    if checkout is not None:
        return checkout / "data" / ".cache"
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "topology-studio"


def _checksum_error(
    path: Path, *, where: str, expected: str, actual: str, url: str
) -> DatasetError:
    return DatasetError(
        f"{path} ({where}) fails its checksum: expected sha256 {expected}, actual sha256 "
        f"{actual}. The file is corrupted or a different version: replace it with the pinned "
        f"file from {url}, or delete it"
        + (
            f" / point {DATASETS_ENV} elsewhere"
            if where == DATASETS_ENV
            else " (it is re-downloaded)"
        )
        + "."
    )


def _verify(path: Path, *, where: str, expected: str, url: str) -> Path:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, expected)
    if _verified.get(key):
        return path
    actual = sha256_file(path)
    if actual != expected:
        raise _checksum_error(path, where=where, expected=expected, actual=actual, url=url)
    _verified[key] = True
    return path


def _fill_cache(source: Path, target: Path, *, expected: str) -> None:
    """Copy a verified `source` to `target` in the cache, atomically, unless `target` exists.

    The copy's sha256 is checked before it is moved into place; a cache that cannot be written
    (read-only, full) is left as it is, since the caller already has a good file.
    """
    if target.exists():
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=".part"
        )
    except OSError:
        return
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, source.open("rb") as src:
            while chunk := src.read(_CHUNK):
                h.update(chunk)
                out.write(chunk)
        if h.hexdigest() == expected:
            os.replace(tmp, target)
    except OSError:
        pass
    finally:
        tmp.unlink(missing_ok=True)


def _download(url: str, target: Path, *, expected: str, timeout_s: float) -> None:
    """Download `url` to `target` atomically, checking the sha256. Raises DatasetError on a
    checksum mismatch, OSError / URLError on a network failure."""
    target.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout_s) as resp:
            while chunk := resp.read(_CHUNK):
                h.update(chunk)
                out.write(chunk)
        actual = h.hexdigest()
        if actual != expected:
            raise DatasetError(
                f"download {url} fails its checksum: expected sha256 {expected}, actual sha256 "
                f"{actual}; nothing was written to {target}. The pinned address no longer "
                f"serves the pinned file: set {DATASETS_ENV} to a directory holding a good copy."
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def fetch_dataset_file(
    dataset: str,
    file: str,
    *,
    sha256: str,
    url: str,
    datasets_dir: str | Path | Sequence[str | Path] | None = None,
    cache_root: Path | None = None,
    timeout_s: float = 10.0,
) -> Path:
    """A verified local copy of one pinned dataset file (see the module docstring for the order).

    Args:
        dataset: the dataset's directory name, e.g. `"gsm8k"`.
        file: the file name, e.g. `"test.jsonl"`.
        sha256: the expected sha256, 64 lowercase hex digits.
        url: the pinned download address pattern, `{file}` replaced by `file`.
        datasets_dir: configured directories (None: `$TOPOLOGY_STUDIO_DATASETS`).
        cache_root: the cache root (None: `default_cache_root()`).
        timeout_s: network timeout of the download, seconds.

    Returns:
        The path of a file whose sha256 is `sha256`: the configured directory's (then also
        copied into the cache when the cache lacks it) or the cache's.

    Raises:
        DatasetError: a file found fails its checksum, or the file is nowhere and cannot be
            downloaded (the message lists every place looked and what to set).
    """
    looked: list[str] = []
    cache = (cache_root or default_cache_root()) / "datasets" / dataset / file
    address = url.format(file=file)
    for d in configured_dataset_dirs(datasets_dir):
        candidate = d / dataset / file
        if candidate.is_file():
            found = _verify(candidate, where=DATASETS_ENV, expected=sha256, url=address)
            _fill_cache(found, cache, expected=sha256)
            return found
        looked.append(f"  - {candidate} (configured directory): not found")
    if not looked:
        looked.append(f"  - no configured directory ({DATASETS_ENV} is not set)")

    if cache.is_file():
        return _verify(cache, where="cache", expected=sha256, url=address)
    looked.append(f"  - {cache} (cache): not found")

    try:
        _download(address, cache, expected=sha256, timeout_s=timeout_s)
    except DatasetError:
        raise
    except (OSError, urllib.error.URLError, ValueError) as exc:
        looked.append(f"  - download {address}: failed ({type(exc).__name__}: {exc})")
        raise DatasetError(
            f"dataset {dataset!r} file {file!r} is not available.\nLooked in:\n"
            + "\n".join(looked)
            + f"\nSet {DATASETS_ENV} to a directory that contains {dataset}/{file} (e.g. the "
            f"project's ../shared/datasets), or allow network access so it is downloaded into "
            f"the cache ({CACHE_ENV} chooses where)."
        ) from exc
    return _verify(cache, where="cache", expected=sha256, url=address)
