"""LLM judges: pointwise, pairwise, listwise and reference-scaffolded (ExpRL) judges, each a
`Reward`, over one async backend interface (a local transformers model, any OpenAI-compatible
server, or any provider through litellm), with a persistent cache, retries, deadlines and a
circuit breaker in `client.JudgeClient`, and ``rewardlab serve-model`` to serve a local model.

Modules import their heavy dependencies (torch, litellm, the HTTP clients) only when used.
"""
