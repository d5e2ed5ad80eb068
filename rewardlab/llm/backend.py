"""The one interface every judge talks to: an async chat completion, optionally with token
log-probabilities. Backends (litellm, an OpenAI-compatible server, in-process transformers)
implement `Backend`; `client.ModelClient` adds caching, concurrency limits, retries, deadlines
and a circuit breaker around any of them.

Requests are plain, hashable values, so that identical requests can be answered from a cache or
sent once per batch.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import hashlib
import json
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rewardlab.llm.fence import Fence, masked
from rewardlab.rewards.contract import Usage


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat completion to ask for.

    Attributes:
        messages: ``(role, content)`` pairs, in order.
        temperature: Sampling temperature (default 0.0: judges should be deterministic).
        max_tokens: Most tokens to generate.
        top_logprobs: When set, ask for the log-probability of each generated token and of this
            many alternatives at each position (for verdicts scored from token probabilities).
        choices: When set, the answer must be exactly one of these strings (vLLM's
            ``structured_outputs: {"choice": [...]}``, its older ``guided_choice``, and
            ``rewardlab serve-model``); for verdict-only judging with models too small to follow
            a format.
        json_schema: When set, ask for output that follows this JSON schema (structured output,
            where the backend supports it; the judge still parses and validates the text).
        stop: Strings that end generation (not included in the answer).
        seed: Sampling seed, where the backend supports one.
        continue_final: The last message is the start of the assistant's answer, to be
            continued rather than answered (vLLM's ``continue_final_message``, Anthropic's
            prefill, ``rewardlab serve-model``); how Monte-Carlo step labels finish a partial
            solution through a served policy.
        fences: The fences the messages were rendered with (`fence.Fence`), in order. Their
            nonces are secret to the judge that rendered them (another judge renders the same
            inputs with others), so the cache key is made of the messages with the nonces masked,
            and of the fenced texts; backends never see them.
    """

    messages: tuple[tuple[str, str], ...]
    temperature: float = 0.0
    max_tokens: int = 512
    top_logprobs: int | None = None
    choices: tuple[str, ...] | None = None
    json_schema: str | None = None  # JSON text, so that the request stays hashable
    stop: tuple[str, ...] = ()
    seed: int | None = None
    continue_final: bool = False
    fences: tuple[Fence, ...] = ()

    def __post_init__(self) -> None:
        if self.continue_final and (not self.messages or self.messages[-1][0] != "assistant"):
            raise ValueError("continue_final needs the last message to be the assistant's")

    @classmethod
    def of(cls, messages: Iterable[Mapping[str, str]], **options: Any) -> ChatRequest:
        """From OpenAI-style message dicts; a ``json_schema`` mapping is stored as JSON text."""
        if isinstance(options.get("json_schema"), Mapping):
            options["json_schema"] = json.dumps(options["json_schema"], sort_keys=True)
        for name in ("choices", "stop", "fences"):
            if options.get(name) is not None:
                options[name] = tuple(options[name])
        return cls(tuple((m["role"], m["content"]) for m in messages), **options)

    def message_dicts(self) -> list[dict[str, str]]:
        return [{"role": role, "content": content} for role, content in self.messages]

    def fingerprint(self, backend: str, namespace: str = "") -> str:
        """A stable cache key: the backend and model, everything in the request that can change
        the answer, and a namespace (the judge's template hash). Fence nonces are left out (see
        ``fences``); the fenced texts are in, each apart, so that a text holding something like a
        fence boundary cannot make two different prompts one key."""
        extra: dict[str, Any] = (
            {"continue_final": True} if self.continue_final else {}
        )  # older keys stay valid
        if self.fences:
            extra["fences"] = [[made.label, made.text] for made in self.fences]
        payload = json.dumps(
            {
                **extra,
                "backend": backend,
                "namespace": namespace,
                "messages": [[role, masked(content, self.fences)] for role, content in self.messages],
                "temperature": self.temperature,
                "max_tokens": self.max_tokens,
                "top_logprobs": self.top_logprobs,
                "choices": self.choices,
                "json_schema": self.json_schema,
                "stop": self.stop,
                "seed": self.seed,
            },
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """A generated token, its log-probability, and the most likely alternatives at its position."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(slots=True)
class ChatResponse:
    """What came back: the text, why generation stopped, per-token log-probs if asked for, usage."""

    text: str
    finish_reason: str | None = None
    logprobs: list[TokenLogprob] | None = None
    usage: Usage = field(default_factory=Usage)

    def to_dict(self) -> dict[str, Any]:
        """For the cache."""
        return {
            "text": self.text,
            "finish_reason": self.finish_reason,
            "logprobs": None
            if self.logprobs is None
            else [[t.token, t.logprob, [list(alt) for alt in t.top]] for t in self.logprobs],
            "usage": [self.usage.prompt_tokens, self.usage.completion_tokens, self.usage.cost_usd],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChatResponse:
        logprobs = data.get("logprobs")
        prompt_tokens, completion_tokens, cost = data.get("usage") or (0, 0, 0.0)
        return cls(
            text=data["text"],
            finish_reason=data.get("finish_reason"),
            logprobs=None
            if logprobs is None
            else [
                TokenLogprob(token, logprob, tuple((a, b) for a, b in top))
                for token, logprob, top in logprobs
            ],
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost_usd=cost),
        )


CONTINUE_FINAL_MODES = ("fields", "prefill", None)
#: How a server is asked to answer with one of given choices: vLLM's ``structured_outputs:
#: {"choice": [...]}`` (vLLM >= 0.10.2, PR #22772), or the ``guided_choice`` field it replaced,
#: which vLLM 0.12 removed (PR #29326) and now ignores without an error - the answer comes back
#: unconstrained.
CHOICE_FIELDS = ("structured_outputs", "guided_choice")


def choice_field(value: str) -> str:
    """A backend's ``choice_field``, checked against `CHOICE_FIELDS`."""
    if value not in CHOICE_FIELDS:
        raise ValueError(f"choice_field must be one of {', '.join(CHOICE_FIELDS)}, got {value!r}")
    return value


def continue_final_mode(value: str | None, default: str | None) -> str | None:
    """A backend's ``continue_final`` setting: ``"auto"`` becomes ``default``; anything else
    must be one of `CONTINUE_FINAL_MODES`."""
    if value == "auto":
        return default
    if value not in CONTINUE_FINAL_MODES:
        raise ValueError(f"continue_final must be 'auto', 'fields', 'prefill' or null, got {value!r}")
    return value


class LoopClients:
    """Connection pools per event loop, for anything that calls a server from whatever loop runs
    it (``Reward.score`` makes a new one per call): a pool belongs to the loop it was made on, is
    closed when the last `session` of its loop ends, and is left out of pickles (TRL copies
    reward functions to other processes)."""

    def loop_client(self, make: Callable[[], Any]) -> Any:
        """This backend's client (a connection pool) for the running event loop, made by
        ``make`` on first use: a pool belongs to the loop it was made on."""
        clients = self.__dict__.setdefault("_loop_clients", weakref.WeakKeyDictionary())
        loop = asyncio.get_running_loop()
        if loop not in clients:
            clients[loop] = make()
        return clients[loop]

    async def aclose(self) -> None:
        """Close the running loop's client, if `loop_client` made one."""
        client = self.__dict__.get("_loop_clients", {}).pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[None]:
        """Use the backend for a while on the running loop (`ModelClient.session` wraps each
        judge batch in one).

        Connections are closed when the last session of a loop ends - while the loop still
        runs. Left to the garbage collector, an HTTP client is closed later from whatever loop
        runs then, which fails with "Event loop is closed".
        """
        loop = asyncio.get_running_loop()
        sessions = self.__dict__.setdefault("_sessions", weakref.WeakKeyDictionary())
        sessions[loop] = sessions.get(loop, 0) + 1
        try:
            yield
        finally:
            sessions[loop] -= 1
            if sessions[loop] == 0:
                del sessions[loop]
                await self.aclose()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for per_loop in ("_sessions", "_loop_clients"):  # live objects of this process's loops
            state.pop(per_loop, None)
        return state


class Backend(LoopClients, abc.ABC):
    """A chat-completion backend.

    ``name`` identifies the backend and model in cache keys and logs (e.g.
    ``"openai:http://127.0.0.1:8000/v1:smollm2"``). The ``supports_*`` flags say which optional
    request fields the backend honours; a judge asks only for what its backend supports.
    ``choice_field`` says how a choice is asked for (`CHOICE_FIELDS`). ``continue_final`` says
    how it continues a final assistant message: ``"fields"`` (vLLM's
    ``continue_final_message`` request fields), ``"prefill"`` (the provider continues a
    trailing assistant message by itself: Anthropic, the in-process model), or None (it cannot).

    A backend is used from whatever event loop calls it (``Reward.score`` makes a new one per
    call), so connection pools must be made per loop, and it must pickle (TRL copies reward
    functions): live clients and loaded models are made on first use and left out of pickles.
    """

    name: str = "backend"
    supports_logprobs: bool = False
    supports_choices: bool = False
    supports_json_schema: bool = False
    choice_field: str = "structured_outputs"
    continue_final: str | None = None

    @abc.abstractmethod
    async def complete(self, request: ChatRequest) -> ChatResponse:
        """One completion; raises `BackendError` on failure."""
