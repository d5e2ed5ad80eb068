"""Where rewardlab keeps files between runs (converted models, the judge cache):
``$REWARDLAB_CACHE_DIR``, else ``$XDG_CACHE_HOME/rewardlab``, else ``~/.cache/rewardlab``."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The cache folder (made if missing)."""
    configured = os.environ.get("REWARDLAB_CACHE_DIR")
    if configured:
        path = Path(configured).expanduser()
    else:
        path = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rewardlab"
    path.mkdir(parents=True, exist_ok=True)
    return path
