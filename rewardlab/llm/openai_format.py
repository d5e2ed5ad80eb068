"""The OpenAI chat-completions wire format, both ways: reading a response (from the ``openai``
client, litellm, or raw JSON) into a `ChatResponse`, and writing one for ``serve-model``.

Reading is strict about what a verdict needs - a choice with text - and lenient about the rest,
since OpenAI-compatible servers differ in the optional fields they fill.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from rewardlab.errors import BackendError
from rewardlab.llm.backend import ChatResponse, TokenLogprob
from rewardlab.rewards.contract import Usage


def plain(value: Any) -> Any:
    """A pydantic object (openai's, litellm's) as plain dicts and lists; anything else unchanged."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    return value


def read_response(body: Any) -> ChatResponse:
    """A `ChatResponse` from a chat-completion response body.

    Raises:
        BackendError: (retryable) when the body is not a well-formed answer - no choice, no
            message, fields of the wrong type: a broken or overloaded server, not an answer.
    """
    try:
        return _read(plain(body))
    except BackendError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise BackendError(f"malformed response: {type(error).__name__}: {error}", retryable=True) from None


def _read(body: Any) -> ChatResponse:
    if not isinstance(body, Mapping):
        raise BackendError(
            f"malformed response: expected a JSON object, got {type(body).__name__}", retryable=True
        )
    choices = body.get("choices")
    if not choices:
        raise BackendError("malformed response: the choice list is empty", retryable=True)
    choice = plain(choices[0])
    message = plain(choice.get("message")) if isinstance(choice, Mapping) else None
    if not isinstance(message, Mapping):
        raise BackendError("malformed response: the first choice has no message", retryable=True)
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise BackendError(f"malformed response: message content is {type(content).__name__}", retryable=True)
    usage = plain(body.get("usage")) or {}
    return ChatResponse(
        text=content or "",
        finish_reason=choice.get("finish_reason"),
        logprobs=_read_logprobs(plain(choice.get("logprobs"))),
        usage=Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        ),
    )


def _read_logprobs(logprobs: Any) -> list[TokenLogprob] | None:
    if not isinstance(logprobs, Mapping) or not isinstance(logprobs.get("content"), list):
        return None
    tokens = []
    for item in logprobs["content"]:
        entry = plain(item)
        top = tuple((plain(t)["token"], float(plain(t)["logprob"])) for t in entry.get("top_logprobs") or ())
        tokens.append(TokenLogprob(entry["token"], float(entry["logprob"]), top))
    return tokens


def write_response(response: ChatResponse, model: str) -> dict[str, Any]:
    """The JSON body ``serve-model`` returns for one completion."""
    logprobs = None
    if response.logprobs is not None:
        logprobs = {
            "content": [
                {
                    "token": token.token,
                    "logprob": token.logprob,
                    "bytes": list(token.token.encode()),
                    "top_logprobs": [
                        {"token": alt, "logprob": value, "bytes": list(alt.encode())}
                        for alt, value in token.top
                    ],
                }
                for token in response.logprobs
            ]
        }
    usage = response.usage
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": response.text},
                "finish_reason": response.finish_reason or "stop",
                "logprobs": logprobs,
            }
        ],
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        },
    }


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """The server's ``Retry-After`` (or ``retry-after-ms``) hint in seconds, if it sent one."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = lowered.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            return _http_date_delay(value)
    return None


def _http_date_delay(value: str) -> float | None:
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
