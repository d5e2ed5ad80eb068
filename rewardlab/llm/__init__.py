"""Model access, shared by everything that calls a model (judges, rubrics, CaT anchors, Monte-Carlo
continuers): one async `Backend` interface (`backend`) over a local transformers model
(`LocalBackend`), any OpenAI-compatible server (`HTTPBackend`, `OpenAIBackend`) and any provider
through litellm (`LiteLLMBackend`), built from config by `make_backend`; one `ModelClient`
(`client`) in front of them with a persistent answer cache (`cache`), one request per distinct
prompt, retries, deadlines, a circuit breaker (`breaker`) and usage and cost (`cost`); fencing of
untrusted text inside a prompt (`fence`); reward models behind pooling servers - vLLM, SGLang,
TEI - through `PoolingClient` (`pooling`), which shares the client's retry loop (`retrying`); the
embedded default model (`default_model`,
`gguf_conversion`, `local_model`); and ``rewardlab serve-model`` (`serve_model`).

Modules import their heavy dependencies (torch, litellm, the HTTP clients) only when used.
"""

from rewardlab.lazy_exports import lazy_exports

_EXPORTS = {
    "Backend": "rewardlab.llm.backend",
    "ChatRequest": "rewardlab.llm.backend",
    "ChatResponse": "rewardlab.llm.backend",
    "make_backend": "rewardlab.llm.backends",
    "HTTPBackend": "rewardlab.llm.http_backend",
    "OpenAIBackend": "rewardlab.llm.openai_backend",
    "LiteLLMBackend": "rewardlab.llm.litellm_backend",
    "LocalBackend": "rewardlab.llm.local_backend",
    "ModelClient": "rewardlab.llm.client",
    "ClientOptions": "rewardlab.llm.client",
    "Completion": "rewardlab.llm.client",
    "CircuitBreaker": "rewardlab.llm.breaker",
    "PoolingBackend": "rewardlab.llm.pooling",
    "PoolingClient": "rewardlab.llm.pooling",
    "AnswerCache": "rewardlab.llm.cache",
    "Fence": "rewardlab.llm.fence",
    "fetch_default_model": "rewardlab.llm.default_model",
    "default_model_path": "rewardlab.llm.default_model",
}

__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
