"""Backends by name, so that a judge config can say which model answers::

backend: {type: local}                                   # the embedded SmolLM2
backend: {type: local, model: ./my-judge.gguf}
backend: {type: openai, model: qwen, base_url: http://127.0.0.1:8000/v1, guided_choice: true}
backend: {type: http, model: qwen, base_url: http://127.0.0.1:8000/v1}   # lean, for throughput
backend: {type: litellm, model: anthropic/claude-sonnet-4-5}

Each kind's options are a model here (`BackendConfig` is the union, told apart by ``type``), and
`ClientConfig` holds the options of the `ModelClient` a judge calls it through: the reward
options models of the judges use both, so a backend config is checked, and documented in the
reward config's JSON Schema, like any reward option.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, InstanceOf, TypeAdapter, ValidationError
from pydantic.json_schema import SkipJsonSchema

from rewardlab.llm.backend import Backend
from rewardlab.llm.client import ClientOptions

BACKENDS = {
    "local": "rewardlab.llm.local_backend:LocalBackend",
    "openai": "rewardlab.llm.openai_backend:OpenAIBackend",
    "http": "rewardlab.llm.http_backend:HTTPBackend",
    "litellm": "rewardlab.llm.litellm_backend:LiteLLMBackend",
}
ContinueFinal = Literal["auto", "fields", "prefill"] | None


class _Config(BaseModel):
    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False, protected_namespaces=()
    )


class LocalBackendConfig(_Config):
    """A transformers model in this process (`LocalBackend`): the embedded SmolLM2 by default."""

    type: Literal["local"] = "local"
    """The backend kind."""
    model: str | SkipJsonSchema[InstanceOf[Path]] | None = None
    """A GGUF file or a model folder (default: the embedded SmolLM2-135M-Instruct)."""
    dtype: str = "float32"
    """The torch dtype the model runs in."""
    device: str = "cpu"
    """Where the model runs (``cpu``, ``cuda``, ``cuda:1``...)."""


class _ServedConfig(_Config):
    model: str
    """The model name the server knows."""
    timeout_s: float = Field(default=60.0, gt=0)
    """Time limit of one HTTP request (the client's ``deadline_s`` bounds a call with its
    retries)."""
    guided_choice: bool = False
    """The server constrains answers to given choices, so a judge can answer with a bare label
    (vLLM, ``rewardlab serve-model``)."""
    choice_field: Literal["structured_outputs", "guided_choice"] = "structured_outputs"
    """How the choices are sent: ``structured_outputs`` (``{"choice": [...]}``, vLLM >= 0.10.2)
    or ``guided_choice`` (older vLLM). vLLM 0.12 removed ``guided_choice`` and ignores it without
    an error, so a judge would get unconstrained answers."""
    structured_output: bool = False
    """The server honours JSON schemas (``response_format``), so verdicts are read strictly."""


class OpenAIBackendConfig(_ServedConfig):
    """An OpenAI-compatible server through the ``openai`` SDK (`OpenAIBackend`)."""

    type: Literal["openai"]
    """The backend kind."""
    base_url: str | None = None
    """The server's ``/v1`` address (default: the OpenAI API)."""
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the API key (a self-hosted server may need none)."""
    logprobs: bool = True
    """The server returns log-probabilities, so verdicts can be read from them."""
    continue_final: ContinueFinal = "auto"
    """How the server continues a final assistant message: ``fields`` (vLLM's
    ``continue_final_message``), ``prefill``, ``auto`` (``fields`` with a ``base_url``), or null
    for none."""
    cost_model: str | None = None
    """The model whose price the usage is costed at (default: ``model`` on the OpenAI API, none
    for a self-hosted server)."""


class HTTPBackendConfig(_ServedConfig):
    """An OpenAI-compatible server over plain HTTP (`HTTPBackend`): leaner than the SDK, for
    throughput."""

    type: Literal["http"]
    """The backend kind."""
    base_url: str
    """The server's ``/v1`` address."""
    api_key_env: str | None = None
    """The environment variable holding a bearer token, if the server wants one."""
    logprobs: bool = True
    """The server returns log-probabilities, so verdicts can be read from them."""
    continue_final: ContinueFinal = "fields"
    """How the server continues a final assistant message: ``fields`` (vLLM's
    ``continue_final_message``), ``prefill``, ``auto``, or null for none."""
    cost_model: str | None = None
    """The model whose price the usage is costed at (default: none)."""


class LiteLLMBackendConfig(_ServedConfig):
    """Any provider litellm reaches (`LiteLLMBackend`), e.g. ``anthropic/claude-sonnet-4-5``."""

    type: Literal["litellm"]
    """The backend kind."""
    api_base: str | None = None
    """A server address, for a self-hosted model."""
    api_key_env: str | None = None
    """The environment variable holding the API key (default: litellm's own lookup)."""
    logprobs: bool = False
    """The provider returns log-probabilities, so verdicts can be read from them."""
    continue_final: ContinueFinal = "auto"
    """How the provider continues a final assistant message: ``prefill`` (Anthropic's default
    under ``auto``), ``fields``, ``auto``, or null for none."""


#: A backend config, told apart by ``type``.
BackendConfig = Annotated[
    LocalBackendConfig | OpenAIBackendConfig | HTTPBackendConfig | LiteLLMBackendConfig,
    Field(discriminator="type"),
]
#: A backend option: a config, a `Backend` object (from Python), or None for the embedded model.
BackendOption = BackendConfig | SkipJsonSchema[InstanceOf[Backend]] | None
_BACKEND_CONFIG: TypeAdapter[Any] = TypeAdapter(BackendConfig)

_CLIENT = ClientOptions()


class RetryConfig(_Config):
    """How a reward calls a model server (`ClientOptions` without an answer cache); options not
    given keep their defaults."""

    max_concurrency: int = Field(default=_CLIENT.max_concurrency, ge=1)
    """Calls in flight at once (per event loop)."""
    max_attempts: int = Field(default=_CLIENT.max_attempts, ge=1)
    """Tries per call, the first included, for retryable failures (429, 5xx, timeouts of one
    request, lost connections, malformed responses)."""
    backoff_base_s: float = Field(default=_CLIENT.backoff_base_s, ge=0)
    """The first retry waits up to this long; each later one up to twice as long (full
    jitter)."""
    backoff_max_s: float = Field(default=_CLIENT.backoff_max_s, ge=0)
    """Cap on one wait; a server's ``Retry-After`` is honoured up to this cap."""
    deadline_s: float = Field(default=_CLIENT.deadline_s, gt=0)
    """Time limit of one call, all its retries and waits included; past it the call ends with
    status ``timeout``."""
    breaker_threshold: int = Field(default=_CLIENT.breaker_threshold, ge=1)
    """Failed attempts in a row (across all calls) that open the circuit."""
    breaker_cooldown_s: float = Field(default=_CLIENT.breaker_cooldown_s, ge=0)
    """How long an open circuit refuses calls before letting a probe through."""

    def options(self) -> ClientOptions:
        return ClientOptions(**{**self.model_dump(), "cache": None})


class ClientConfig(RetryConfig):
    """How a judge calls its backend (`ClientOptions`); options not given keep their defaults."""

    cache: str | None = _CLIENT.cache
    """SQLite file for answers; ``default`` is ``judge-cache.sqlite`` in rewardlab's cache
    folder, null keeps answers in memory for this process only."""

    def options(self) -> ClientOptions:
        return ClientOptions(**self.model_dump())


#: A client option: a config, `ClientOptions` (from Python), or None for the defaults.
ClientOption = ClientConfig | SkipJsonSchema[InstanceOf[ClientOptions]] | None


def client_options(spec: ClientConfig | ClientOptions | Mapping[str, Any] | None) -> ClientOptions:
    """`ClientOptions` from a client option (a mapping is checked as a `ClientConfig`)."""
    if isinstance(spec, ClientOptions):
        return spec
    if spec is None or isinstance(spec, Mapping):
        spec = ClientConfig.model_validate(dict(spec or {}))
    return spec.options()


def make_backend(spec: Backend | BaseModel | Mapping[str, Any] | None) -> Backend:
    """A backend from a backend option: a `Backend` is returned as it is, None is the embedded
    default model, and a config (a mapping, checked as a `BackendConfig`) names its kind by
    ``type``. A `ValueError` says what is wrong with a config."""
    if isinstance(spec, Backend):
        return spec
    config = spec
    if not isinstance(config, BaseModel):
        try:
            config = _BACKEND_CONFIG.validate_python(dict(spec or {"type": "local"}))
        except ValidationError as error:
            raise ValueError(f"backend: {_first_problem(error)}") from None
    arguments = config.model_dump()
    module_name, class_name = BACKENDS[arguments.pop("type")].split(":")
    backend: Backend = getattr(importlib.import_module(module_name), class_name)(**arguments)
    return backend


def _first_problem(error: ValidationError) -> str:
    problem = error.errors(include_url=False)[0]
    where = ".".join(str(part) for part in problem["loc"])
    return f"{where}: {problem['msg']}" if where else str(problem["msg"])
