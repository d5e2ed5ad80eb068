"""LLM judges (not built yet): model backends, a local OpenAI-compatible server, pointwise,
pairwise, listwise and reference-scaffolded judges. Tracked in the issue "LLM judges: ..."."""
