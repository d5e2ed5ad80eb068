"""The in-process backend: a local transformers model (the embedded SmolLM2 by default), run in
a worker thread so that the event loop stays free while it generates."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from rewardlab.errors import BackendError
from rewardlab.llm.backend import Backend, ChatRequest, ChatResponse
from rewardlab.llm.default_model import default_model_path
from rewardlab.llm.local_model import LocalChatModel, load_local_model


class LocalBackend(Backend):
    """Chat completions from a model loaded in this process.

    Args:
        model: A transformers model folder or a ``.gguf`` file; by default the embedded
            SmolLM2-135M-Instruct (see `rewardlab.llm.default_model`).
        dtype: Torch dtype of the weights.
        device: Torch device.

    The model loads on the first call, once per process, and is shared by every backend that
    names the same file; a pickled backend carries only these arguments.
    """

    supports_logprobs = True
    supports_choices = True
    continue_final = "prefill"

    def __init__(self, model: str | Path | None = None, *, dtype: str = "float32", device: str = "cpu"):
        self.path = (Path(model).expanduser() if model is not None else default_model_path()).resolve()
        self.dtype = dtype
        self.device = device
        # The cache key's backend identity: the weights (where they are, and when they last
        # changed) and how they are loaded.
        self.name = f"local:{self.path}:{_last_modified(self.path)}:{dtype}"
        self._model: LocalChatModel | None = None

    def loaded(self) -> LocalChatModel:
        """The model, loaded on first use (blocking)."""
        if self._model is None:
            self._model = load_local_model(self.path, dtype=self.dtype, device=self.device)
        return self._model

    async def complete(self, request: ChatRequest) -> ChatResponse:
        # A thread cannot be killed; a cancelled call (past its deadline) tells the generation to
        # stop at its next token instead, so it does not hold the model for the calls after it.
        cancelled = threading.Event()
        try:
            return await asyncio.to_thread(lambda: self.loaded().complete(request, cancelled))
        except asyncio.CancelledError:
            cancelled.set()
            raise
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


def _last_modified(path: Path) -> int:
    """When the weights last changed: the file's mtime, or the newest of a folder's files."""
    if path.is_dir():
        return max((child.stat().st_mtime_ns for child in path.iterdir() if child.is_file()), default=0)
    return path.stat().st_mtime_ns if path.exists() else 0
