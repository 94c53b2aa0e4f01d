"""Where the studio and the command line keep the topology registry (`core.search.registry`).

Its own module because both the studio's manager and the CLI's `apply` need it, and neither
should import the other for it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["REGISTRY_ENV", "default_registry_root"]

REGISTRY_ENV = "TOPOLOGY_STUDIO_REGISTRY"
"""The environment variable naming the topology registry directory (wins over the default)."""


def default_registry_root(db_path: str | os.PathLike[str]) -> Path:
    """`$TOPOLOGY_STUDIO_REGISTRY`, else `topologies/` beside the database file."""
    env = os.environ.get(REGISTRY_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    return Path(os.fspath(db_path)).expanduser().resolve().parent / "topologies"
