"""``rewardlab serve-model --runner pooling``: a local sequence-classification model folder served
with vLLM's pooling protocol, so that ``served_reward_model`` (and any vLLM pooling client) can
score with it where there is no vLLM - and so that the protocol is tested against a real model.

It answers what vLLM's pooling runner answers for a sequence classifier (the shapes, and where
they come from, are in `rewardlab.llm.pooling`):

- ``POST /pooling`` and ``POST /classify``: ``input`` (a text, a list of texts, token ids or a
  list of them; special tokens added unless ``add_special_tokens: false``) or ``messages`` (one
  conversation, rendered with the model's chat template, no generation prompt unless
  ``add_generation_prompt``, no special tokens added: vLLM's chat defaults). The outputs are the
  classifier's logits at the last token, after vLLM's default activation unless the request
  says ``"use_activation": false``: the identity for ``problem_type: regression``, a sigmoid for
  ``multi_label_classification`` or one label, else a softmax (``get_classification_act_fn`` and
  ``PoolerClassify`` in vllm/model_executor/layers/pooler).
- ``GET /v1/models`` and ``GET /health``.

What it cannot honour is refused with a 400 rather than ignored: tasks other than ``classify``,
encodings other than ``float``, ``truncate_prompt_tokens``, an input longer than the model's
context (vLLM's message). Errors use vLLM's body, ``{"error": {"message", "type", "code"}}``.

The model runs in this process as ``reward_model`` runs it: loaded from the folder through
`rewardlab.prm.models`, in batches of similar length under ``max_batch_tokens``, right-padded
with an attention mask, under the model's lock in ``torch.inference_mode``.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rewardlab.errors import InvalidInput
from rewardlab.optional import require
from rewardlab.prm.batching import length_batches
from rewardlab.prm.models import load_model, model_lock
from rewardlab.reward_models.placement import Dtype, placement
from rewardlab.reward_models.rendering import render


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class PoolingBody(BaseModel):
    """A ``/pooling`` or ``/classify`` request as this server takes it (unknown fields are
    ignored, as vLLM ignores them)."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    input: str | list[str] | list[int] | list[list[int]] | None = None
    messages: list[_Message] | None = Field(default=None, min_length=1)
    add_special_tokens: bool | None = None
    add_generation_prompt: bool = False
    use_activation: bool | None = None
    task: str | None = None
    encoding_format: str = "float"
    truncate_prompt_tokens: int | None = None

    def refusal(self) -> str | None:
        """Why this request cannot be served as asked, if it cannot."""
        if (self.input is None) == (self.messages is None):
            return "give either input or messages"
        if self.input is not None and not self.input:
            return "Input cannot be empty"
        if self.task not in (None, "classify"):
            return f"Unsupported task: {self.task!r} Supported tasks: ('classify',)"
        if self.encoding_format != "float":
            return f"encoding_format {self.encoding_format!r} is not supported; use float"
        if self.truncate_prompt_tokens is not None:
            return "truncate_prompt_tokens is not supported: the server never cuts an input"
        return None


class SequenceClassifierServer:
    """A sequence-classification model, loaded once, scoring token ids and requests.

    Args:
        model: The model's folder.
        device: Where it runs (default: the GPU when there is one).
        dtype: Its torch dtype (default: bfloat16 on a GPU, float32 on a CPU).
        max_batch_tokens: Most tokens (longest x batch size) in one forward pass.
    """

    def __init__(
        self,
        model: str | Path,
        *,
        device: str | None = None,
        dtype: Dtype | None = None,
        max_batch_tokens: int = 16384,
    ):
        device, dtype = placement(device, dtype)
        self.loaded = load_model(model, kind="sequence_classification", dtype=dtype, device=device)
        self.max_batch_tokens = max_batch_tokens
        tokenizer, config = self.loaded.tokenizer, self.loaded.model.config
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        if pad is None:
            raise ValueError(f"model {model}: its tokenizer has neither a pad nor an EOS token")
        with model_lock(self.loaded.model):
            if getattr(config, "pad_token_id", None) is None:
                config.pad_token_id = pad  # the classifier finds each row's last token by it
        self.max_length: int | None = getattr(config, "max_position_embeddings", None)

    def token_ids(self, body: PoolingBody) -> list[list[int]]:
        """The token ids of a request's inputs (`InvalidInput` for messages the chat template
        cannot render)."""
        tokenizer = self.loaded.tokenizer
        if body.messages is not None:
            messages = [message.model_dump(exclude_none=True) for message in body.messages]
            text = render(tokenizer, messages, "messages", add_generation_prompt=body.add_generation_prompt)
            special = bool(body.add_special_tokens)
            return [list(tokenizer(text, add_special_tokens=special)["input_ids"])]
        given = body.input
        special = body.add_special_tokens is not False
        if isinstance(given, str):
            return [list(tokenizer(given, add_special_tokens=special)["input_ids"])]
        assert given is not None
        if all(isinstance(item, int) for item in given):
            return [[int(item) for item in given if isinstance(item, int)]]
        rows: list[list[int]] = []
        for item in given:
            if isinstance(item, str):
                rows.append(list(tokenizer(item, add_special_tokens=special)["input_ids"]))
            elif isinstance(item, list):
                rows.append([int(token) for token in item])
        return rows

    def outputs(self, rows: list[list[int]]) -> list[list[float]]:
        """The classifier's raw outputs for each row of token ids, in order."""
        import torch

        model = self.loaded.model
        device = next(model.parameters()).device
        pad = model.config.pad_token_id
        results: dict[int, list[float]] = {}
        lengths = {index: len(row) for index, row in enumerate(rows)}
        for batch in length_batches(lengths, self.max_batch_tokens, 0.1):
            longest = max(lengths[index] for index in batch)
            ids = torch.tensor([rows[i] + [pad] * (longest - len(rows[i])) for i in batch], device=device)
            mask = torch.tensor(
                [[1] * len(rows[i]) + [0] * (longest - len(rows[i])) for i in batch], device=device
            )
            with model_lock(model), torch.inference_mode():
                logits = model(input_ids=ids, attention_mask=mask).logits
            for index, values in zip(batch, logits.float().cpu().tolist(), strict=True):
                results[index] = values
        return [results[index] for index in range(len(rows))]

    def activation(self, values: list[float]) -> list[float]:
        """vLLM's default activation for this model's outputs (see the module docstring)."""
        problem = getattr(self.loaded.model.config, "problem_type", None)
        if problem == "regression":
            return values
        if problem == "multi_label_classification" or len(values) < 2:
            return [_sigmoid(value) for value in values]
        top = max(values)
        exps = [math.exp(value - top) for value in values]
        total = math.fsum(exps)
        return [value / total for value in exps]

    def label(self, index: int) -> str | None:
        id2label = getattr(self.loaded.model.config, "id2label", None) or {}
        return id2label.get(index)


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def _error(status: int, message: str, kind: str = "BadRequestError") -> Any:
    from fastapi.responses import JSONResponse

    return JSONResponse(
        status_code=status, content={"error": {"message": message, "type": kind, "code": status}}
    )


def create_pooling_app(server: SequenceClassifierServer, model_name: str) -> Any:
    """The FastAPI application serving ``server`` under ``model_name``."""
    fastapi = require("fastapi", "rewardlab serve-model")
    from fastapi.exceptions import RequestValidationError

    app = fastapi.FastAPI(title="rewardlab serve-model (pooling)", docs_url=None, redoc_url=None)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Any, error: RequestValidationError) -> Any:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'] if p != 'body')}: {e['msg']}" for e in error.errors()
        )
        return _error(400, problems)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        entry = {
            "id": model_name,
            "object": "model",
            "owned_by": "rewardlab",
            "max_model_len": server.max_length,
        }
        return {"object": "list", "data": [entry]}

    async def run(body: PoolingBody, route: Literal["pooling", "classify"]) -> Any:
        refusal = body.refusal()
        if refusal:
            return _error(400, refusal)
        if body.model is not None and body.model != model_name:
            return _error(404, f"The model `{body.model}` does not exist.", "NotFoundError")
        try:
            rows = server.token_ids(body)
        except InvalidInput as error:
            return _error(400, str(error))
        for row in rows:
            if not row:
                return _error(400, "Input cannot be empty")
            if server.max_length is not None and len(row) > server.max_length:
                return _error(
                    400,
                    f"This model's maximum context length is {server.max_length} tokens. However, you "
                    f"requested {len(row)} tokens in the input. Please reduce the length of the input.",
                )
        outputs = await asyncio.to_thread(server.outputs, rows)
        if body.use_activation is not False:
            outputs = [server.activation(values) for values in outputs]
        tokens = sum(len(row) for row in rows)
        usage = {
            "prompt_tokens": tokens,
            "total_tokens": tokens,
            "completion_tokens": 0,
            "prompt_tokens_details": None,
        }
        if route == "classify":
            data = [
                {
                    "index": index,
                    "label": server.label(max(range(len(values)), key=values.__getitem__)),
                    "probs": values,
                    "num_classes": len(values),
                }
                for index, values in enumerate(outputs)
            ]
        else:
            data = [
                {"index": index, "object": "pooling", "data": values} for index, values in enumerate(outputs)
            ]
        return {
            "id": f"{'classify' if route == 'classify' else 'pool'}-{uuid.uuid4().hex}",
            "object": "list",
            "created": int(time.time()),
            "model": model_name,
            "data": data,
            "usage": usage,
        }

    @app.post("/pooling")
    async def pooling(body: PoolingBody) -> Any:
        return await run(body, "pooling")

    @app.post("/classify")
    async def classify(body: PoolingBody) -> Any:
        return await run(body, "classify")

    return app
