"""Which model family a judge belongs to, and whether it wrote an answer (self-preference).

Self-enhancement bias - a judge favouring answers its own model wrote - is measured by family,
not by exact model, as in Zheng et al. 2023 ("Judging LLM-as-a-Judge", arXiv:2306.05685,
section 3.3: GPT-4 judging GPT-4's answers) and Panickssery et al. 2024 ("LLM Evaluators
Recognize and Favor Their Own Generations", arXiv:2404.13076). Model names are free text
(``gpt4_1106_preview``, ``openai/gpt-4o``, ``SmolLM2-135M-Instruct.Q4_1.gguf``), so a family is a
set of keywords, and a model belongs to it when its name contains one (case-insensitive):
`FAMILIES` names the common ones. A judge whose model is in none, or a family drawn differently
(OpenAI's models under one name, a fine-tune with its base), is given with ``--judge-family``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rewardlab.rewards.contract import Reward

#: Family -> the keywords its models' names contain.
FAMILIES: dict[str, tuple[str, ...]] = {
    "gpt": ("gpt", "davinci"),
    "claude": ("claude",),
    "gemini": ("gemini",),
    "gemma": ("gemma",),
    "llama": ("llama",),
    "mistral": ("mistral", "mixtral"),
    "qwen": ("qwen",),
    "deepseek": ("deepseek",),
    "smollm": ("smollm",),
}


def judge_model(reward: Reward) -> str | None:
    """The model a judge's backend calls: its ``model`` name, or the file or folder name of a
    local model; None for a reward without a backend."""
    backend = getattr(reward, "backend", None)
    model = getattr(backend, "model", None)
    if isinstance(model, str) and model:
        return model
    path = getattr(backend, "path", None)
    return Path(path).name if isinstance(path, str | Path) else None


def family_of(model: str) -> tuple[str, ...] | None:
    """The keywords of the first family in `FAMILIES` that ``model`` belongs to, or None."""
    name = model.lower()
    for keywords in FAMILIES.values():
        if any(keyword in name for keyword in keywords):
            return keywords
    return None


def written_by(family: Sequence[str], model: str | None) -> bool:
    """Whether the writer ``model`` belongs to the family of ``family``'s keywords."""
    return model is not None and any(keyword.lower() in model.lower() for keyword in family)
