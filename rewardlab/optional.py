"""Optional dependencies, checked in one place: a missing one is an error that says which extra
to install, not a bare ModuleNotFoundError from deep inside a reward."""

from __future__ import annotations

import importlib
from types import ModuleType

from rewardlab.errors import MissingDependency

#: Top-level module -> the rewardlab extra that installs it.
EXTRAS = {
    "if_verifiable": "instructions",
    "langdetect": "instructions",
    "nltk": "instructions",
    "pyarrow": "datasets",
    "datasets": "datasets",
    "torch": "trl",
    "transformers": "trl",
    "trl": "trl",
    "peft": "trl",
    "jinja2": "judges",
    "openai": "judges",
    "litellm": "judges",
    "fastapi": "judges",
    "uvicorn": "judges",
    "gguf": "judges",
    "aiohttp": "judges",
    "matplotlib": "bench",
    "prometheus_client": "serve",
    "ray": "ray",
    "sacrebleu": "similarity",
}


def missing_dependency(error: ModuleNotFoundError, needed_for: str) -> MissingDependency:
    """The error to raise when an import for ``needed_for`` failed."""
    module = (error.name or "").split(".")[0]
    extra = EXTRAS.get(module)
    hint = f"pip install 'rewardlab[{extra}]'" if extra else f"pip install {module}"
    return MissingDependency(f"{needed_for} needs {module!r}, which is not installed: {hint}")


def require(module: str, needed_for: str) -> ModuleType:
    """Import ``module`` or raise `MissingDependency` saying how to install it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        raise missing_dependency(error, needed_for) from None
