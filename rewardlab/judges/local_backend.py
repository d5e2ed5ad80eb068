"""The in-process backend: a local transformers model (the embedded SmolLM2 by default), run in
a worker thread so that the event loop stays free while it generates."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from rewardlab.judges.backend import Backend, BackendError, ChatRequest, ChatResponse
from rewardlab.judges.default_model import default_model_path
from rewardlab.judges.local_model import LocalChatModel, load_local_model


class LocalBackend(Backend):
    """Chat completions from a model loaded in this process.

    Args:
        model: A transformers model folder or a ``.gguf`` file; by default the embedded
            SmolLM2-135M-Instruct (see `rewardlab.judges.default_model`).
        dtype: Torch dtype of the weights.
        device: Torch device.

    The model loads on the first call, once per process, and is shared by every backend that
    names the same file; a pickled backend carries only these arguments.
    """

    supports_logprobs = True
    supports_choices = True

    def __init__(self, model: str | Path | None = None, *, dtype: str = "float32", device: str = "cpu"):
        self.path = Path(model).expanduser() if model is not None else default_model_path()
        self.dtype = dtype
        self.device = device
        self.name = f"local:{self.path.name}"
        self._model: LocalChatModel | None = None

    def loaded(self) -> LocalChatModel:
        """The model, loaded on first use (blocking)."""
        if self._model is None:
            self._model = load_local_model(self.path, dtype=self.dtype, device=self.device)
        return self._model

    async def complete(self, request: ChatRequest) -> ChatResponse:
        try:
            return await asyncio.to_thread(lambda: self.loaded().complete(request))
        except BackendError:
            raise
        except Exception as error:
            raise BackendError(
                f"local model {self.path.name}: {type(error).__name__}: {error}", retryable=False
            ) from error

    def __getstate__(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "dtype": self.dtype,
            "device": self.device,
            "name": self.name,
            "_model": None,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
