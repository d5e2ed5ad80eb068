"""What a call cost, from litellm's bundled price list (never fetched: rewardlab sets
``LITELLM_LOCAL_MODEL_COST_MAP=True`` before litellm is imported). Models it does not list - a
local model, a self-hosted server - cost 0."""

from __future__ import annotations

import functools
import importlib.util
import os
from types import ModuleType

from rewardlab.optional import require


def import_litellm() -> ModuleType:
    """litellm, made to use its bundled cost map instead of downloading one at import."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    litellm = require("litellm", "the litellm judge backend")
    # Failures become Score reasons, not banners on stderr. (Typeshed lets a module's attributes
    # be read as Any, not set.)
    litellm.suppress_debug_info = True  # type: ignore[attr-defined]
    return litellm


@functools.cache
def _prices(model: str) -> tuple[float, float] | None:
    """USD per prompt token and per completion token, or None when litellm does not list it."""
    if importlib.util.find_spec("litellm") is None:
        return None
    litellm = import_litellm()
    try:
        prompt, completion = litellm.cost_per_token(model=model, prompt_tokens=1, completion_tokens=1)
    except Exception:  # noqa: BLE001 - litellm raises several types for "unknown model"
        return None
    return float(prompt), float(completion)


def cost_usd(model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """The price of one call to ``model``; 0.0 for models litellm does not list."""
    prices = _prices(model)
    if prices is None:
        return 0.0
    return prices[0] * prompt_tokens + prices[1] * completion_tokens
