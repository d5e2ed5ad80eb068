"""Small JSON settings files (calibrations) read with errors that name the file and the key."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def read_json_object(path: str | Path, shape: str) -> dict[str, Any]:
    """The JSON object in ``path``; a `ValueError` naming the file otherwise (unreadable, not
    JSON, or not an object: ``shape`` says what it should hold)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror or error}") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not JSON: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} should hold {shape}")
    return data


def finite_number(data: Mapping[str, Any], key: str, path: str | Path) -> float:
    """``data[key]`` as a float; a `ValueError` naming the file and the key unless it is a finite
    number (booleans are not numbers here)."""
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{path}: {key!r} should be a finite number, got {value!r}")
    return float(value)
