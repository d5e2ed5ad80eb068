"""Backends by name, so that a judge config can say which model answers::

backend: {type: local}                                   # the embedded SmolLM2
backend: {type: local, model: ./my-judge.gguf}
backend: {type: openai, model: qwen, base_url: http://127.0.0.1:8000/v1, guided_choice: true}
backend: {type: http, model: qwen, base_url: http://127.0.0.1:8000/v1}   # lean, for throughput
backend: {type: litellm, model: anthropic/claude-sonnet-4-5}
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from rewardlab.llm.backend import Backend

BACKENDS = {
    "local": "rewardlab.llm.local_backend:LocalBackend",
    "openai": "rewardlab.llm.openai_backend:OpenAIBackend",
    "http": "rewardlab.llm.http_backend:HTTPBackend",
    "litellm": "rewardlab.llm.litellm_backend:LiteLLMBackend",
}


def make_backend(spec: Backend | Mapping[str, Any] | None) -> Backend:
    """A backend from a config mapping (``{"type": ..., **arguments}``); None is the embedded
    default model, and a `Backend` is returned as it is."""
    if isinstance(spec, Backend):
        return spec
    options = dict(spec or {"type": "local"})
    kind = options.pop("type", "local")
    if kind not in BACKENDS:
        raise ValueError(f"unknown backend type {kind!r}; one of: {', '.join(BACKENDS)}")
    module_name, class_name = BACKENDS[kind].split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    try:
        return cls(**options)
    except TypeError as error:
        raise ValueError(f"backend {kind!r}: {error}") from None
