"""Policies that finish a partial solution, for Monte-Carlo step labels.

A continuation must come from the policy itself, continuing the very text it wrote - not a
fresh answer to an instruction to "continue" - or the labels estimate some other model's
chances. Two ways to get that:

- `LocalContinuer`: a local causal LM (a folder, a GGUF file or ``embedded``) continues the
  prompt + prefix text directly, ``n`` samples in one ``generate`` call.
- `BackendContinuer`: any judge-layer backend (an OpenAI-compatible server such as vLLM or
  ``rewardlab serve-model``, litellm, the in-process model) continues the prefix as the start of
  the assistant's message (``continue_final``: vLLM's ``continue_final_message``, Anthropic's
  prefill). OpenAI's own API cannot continue a message; it is refused there by the server.

The prompt goes as the sample has it: a chat prompt keeps its system prompt and turns.

A continuation that stopped at the token limit rather than at its end is marked ``cut``: it
usually has no final answer, is graded wrong, and pulls the step's label down; the Monte-Carlo
reward counts them per step so that a too-small limit shows.

A continuer of one's own needs only ``continuations(prompt, prefix, n)``; a plain function
returning strings works too (it runs in a worker thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rewardlab.errors import RewardlabError
from rewardlab.llm.backend import Backend, ChatRequest
from rewardlab.llm.backends import make_backend
from rewardlab.llm.client import ClientOptions, ModelClient
from rewardlab.prm.models import EMBEDDED, LoadedModel, load_model, model_lock
from rewardlab.rewards.contract import Status, Text, Usage, message_text

Prompt = Text  # text, or the sample's chat messages


@dataclass(frozen=True, slots=True)
class Continuation:
    """One finished solution's tail.

    Attributes:
        text: What the policy wrote after the prefix.
        cut: Whether it stopped at the token limit instead of ending.
        usage: Tokens (and cost) it took.
    """

    text: str
    cut: bool = False
    usage: Usage = field(default_factory=Usage)


class ContinuationError(RewardlabError):
    """The policy could not continue: the status to report and the usage spent before it failed."""

    def __init__(self, status: Status, reason: str, usage: Usage):
        super().__init__(reason)
        self.status, self.usage = status, usage


class Continuer(Protocol):
    """Finishes a partial solution ``n`` times."""

    async def continuations(self, prompt: Prompt, prefix: str, n: int) -> list[Continuation]: ...


def continuer_from(spec: Any) -> Continuer:
    """A continuer from a config - ``{backend: ..., client: ..., ...}`` for `BackendContinuer`,
    otherwise `LocalContinuer`'s options (None: the embedded model) - or an object with a
    ``continuations`` method (a synchronous one is run in a worker thread)."""
    if spec is None or isinstance(spec, Mapping):
        options = dict(spec or {})
        cls = BackendContinuer if "backend" in options else LocalContinuer
        try:
            return cls(**options)
        except TypeError as error:
            raise ValueError(f"continuer: {error}") from None
    method = getattr(spec, "continuations", None)
    if method is None:
        raise ValueError(f"continuer: {type(spec).__name__} has no continuations(prompt, prefix, n) method")
    return spec if inspect.iscoroutinefunction(method) else _Threaded(spec)


class _Threaded:
    """A synchronous continuer (strings or `Continuation`s back) run in a worker thread."""

    def __init__(self, inner: Any):
        self.inner = inner

    async def continuations(self, prompt: Prompt, prefix: str, n: int) -> list[Continuation]:
        tails = await asyncio.to_thread(self.inner.continuations, prompt, prefix, n)
        # Only text becomes a Continuation; anything else is left for `checked` to refuse.
        return [Continuation(tail) if isinstance(tail, str) else tail for tail in tails]

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


def _seed(seed: int, prompt: Prompt, prefix: str) -> int:
    """A seed from the user's seed, the prompt and the prefix: labels are reproducible, and
    two steps do not share their random draws."""
    text = prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)
    key = f"{seed}\0{text}\0{prefix}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:4], "big")


def _messages(prompt: Prompt) -> list[dict[str, str]]:
    """The prompt as chat messages with text contents (a text prompt is one user turn)."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [
        {"role": m["role"], "content": message_text([m], roles=(m["role"],), field_name="prompt")}
        for m in prompt
    ]


class LocalContinuer:
    """Continuations sampled from a local causal LM (a folder, a GGUF file or ``embedded``).

    Args:
        model: The policy (default ``embedded``).
        max_tokens: Most tokens of one continuation (default 256).
        temperature, top_p: Sampling (default 0.7 and 1.0).
        seed: Seeds each call, with the prompt and prefix, so labels are reproducible (default 0).
        chat_template: Render a text prompt as a user turn (a chat prompt always is) and the
            prefix as the start of the assistant's answer (default false: prompt + prefix as
            plain text).
        dtype, device: Where the model runs (default float32 on the CPU).
    """

    io_bound = False

    def __init__(
        self,
        model: str | Path | LoadedModel = EMBEDDED,
        *,
        max_tokens: int = 256,
        temperature: float = 0.7,
        top_p: float = 1.0,
        seed: int = 0,
        chat_template: bool = False,
        dtype: str = "float32",
        device: str = "cpu",
    ):
        self.model_spec = model
        self.max_tokens = max_tokens
        self.temperature, self.top_p, self.seed = temperature, top_p, seed
        self.chat_template = chat_template
        self.dtype, self.device = dtype, device

    async def continuations(self, prompt: Prompt, prefix: str, n: int) -> list[Continuation]:
        return await asyncio.to_thread(self._sample, prompt, prefix, n)

    def _sample(self, prompt: Prompt, prefix: str, n: int) -> list[Continuation]:
        import torch

        loaded = load_model(self.model_spec, dtype=self.dtype, device=self.device)
        tokenizer = loaded.tokenizer
        if self.chat_template or not isinstance(prompt, str):
            head = tokenizer.apply_chat_template(
                _messages(prompt), tokenize=False, add_generation_prompt=True
            )
            text, special = head + prefix, False
        else:
            text, special = prompt + prefix, True
        ids = torch.tensor([tokenizer(text, add_special_tokens=special)["input_ids"]], device=self.device)
        devices = [loaded.model.device] if loaded.model.device.type == "cuda" else []
        # The trainer's random state, on every device we touch, is left as it was.
        with model_lock(loaded.model), torch.random.fork_rng(devices=devices), torch.inference_mode():
            torch.manual_seed(_seed(self.seed, prompt, prefix))
            out = loaded.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                temperature=self.temperature,
                top_p=self.top_p,
                max_new_tokens=self.max_tokens,
                num_return_sequences=n,
                pad_token_id=tokenizer.pad_token_id
                if tokenizer.pad_token_id is not None
                else tokenizer.eos_token_id,
            )
        configured = getattr(loaded.model.generation_config, "eos_token_id", None)
        ends = {tokenizer.eos_token_id, *(configured if isinstance(configured, list) else [configured])}
        continuations = []
        for tail in out[:, ids.shape[1] :].tolist():
            end = next((i for i, token in enumerate(tail) if token in ends), None)
            generated = tail if end is None else tail[: end + 1]  # what follows the end is padding
            continuations.append(
                Continuation(
                    tokenizer.decode(generated, skip_special_tokens=True),
                    cut=end is None,
                    usage=Usage(prompt_tokens=ids.shape[1], completion_tokens=len(generated)),
                )
            )
        return continuations


class BackendContinuer:
    """Continuations from a judge-layer backend (see the module docstring): ``n`` requests,
    each with its own seed, sent at once through a `ModelClient` (caching, retries, deadlines).
    The backend must be able to continue an assistant message (its ``continue_final``).

    Args:
        backend: A backend config (``{type: openai, base_url: ..., model: ...}``) or `Backend`;
            the policy is the model it serves.
        client: `ClientOptions` for the calls (default: the defaults).
        max_tokens: Most tokens of one continuation (default 256).
        temperature: Sampling temperature (default 0.7).
        seed: Seeds the calls, with the prompt, the prefix and the sample number (default 0).
    """

    io_bound = True

    def __init__(
        self,
        *,
        backend: Backend | Mapping[str, Any],
        client: ClientOptions | Mapping[str, Any] | None = None,
        max_tokens: int = 256,
        temperature: float = 0.7,
        seed: int = 0,
    ):
        options = client if isinstance(client, ClientOptions) else ClientOptions(**(client or {}))
        self.client = ModelClient(make_backend(backend), options)
        if self.client.backend.continue_final is None:
            raise ValueError(
                f"continuer: {self.client.backend.name} cannot continue an assistant message "
                "(give the backend continue_final: fields or prefill, if its server can)"
            )
        self.max_tokens, self.temperature, self.seed = max_tokens, temperature, seed

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[None]:
        """Keep the backend's connections open across many calls (a batch's)."""
        async with self.client.session():
            yield

    async def continuations(self, prompt: Prompt, prefix: str, n: int) -> list[Continuation]:
        base = _seed(self.seed, prompt, prefix)
        messages = [*_messages(prompt), {"role": "assistant", "content": prefix}]
        requests = [
            ChatRequest.of(
                messages,
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                seed=base + number,
                continue_final=True,
            )
            for number in range(n)
        ]
        async with self.session():
            completions = await asyncio.gather(*(self.client.complete(r) for r in requests))
        usage = sum((c.usage for c in completions), Usage())
        failed = next((c for c in completions if c.response is None), None)
        if failed is not None:
            raise ContinuationError(failed.status, f"the policy's backend failed: {failed.reason}", usage)
        return [
            Continuation(c.response.text, cut=c.response.finish_reason == "length", usage=c.usage)
            for c in completions
            if c.response is not None
        ]

    def close(self) -> None:
        self.client.close()


def checked(tails: Any, n: int) -> list[Continuation]:
    """A continuer's answer, refused (`TypeError`) unless it is ``n`` `Continuation`s."""
    if (
        not isinstance(tails, Sequence)
        or len(tails) != n
        or not all(isinstance(t, Continuation) for t in tails)
    ):
        raise TypeError(f"a continuer must return {n} Continuations, got {tails!r:.200}")
    return list(tails)
