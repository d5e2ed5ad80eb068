"""Loading the transformers models step rewards run on, once per process, and checking that two
models read text the same way.

A model is named by a local folder, a GGUF file (converted once to a folder in the cache), or
``embedded`` (the default judge model, SmolLM2-135M-Instruct, from ``rewardlab fetch-model``);
nothing is fetched from the Hugging Face hub. A model object already in memory is used as it is.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import InstanceOf
from pydantic.json_schema import SkipJsonSchema

from rewardlab.optional import require

EMBEDDED = "embedded"

_loaded: dict[tuple[str, str, str, str], LoadedModel] = {}
_loading = threading.Lock()
_model_locks: dict[int, threading.Lock] = {}


def model_lock(model: Any) -> threading.Lock:
    """The lock every user of ``model`` holds while running it: models are shared per process,
    and a transformers model is not safe to run from several threads at once."""
    with _loading:
        return _model_locks.setdefault(id(model), threading.Lock())


@dataclass(frozen=True, slots=True)
class LoadedModel:
    """A model in eval mode on its device, with its tokenizer."""

    model: Any
    tokenizer: Any
    name: str


#: A model as a reward option: a folder, a GGUF file or ``embedded``; from Python, a `Path` or a
#: `LoadedModel` too.
ModelOption = str | SkipJsonSchema[InstanceOf[Path]] | SkipJsonSchema[InstanceOf[LoadedModel]]


def load_model(
    spec: str | Path | LoadedModel, *, kind: str = "causal_lm", dtype: str = "float32", device: str = "cpu"
) -> LoadedModel:
    """The model ``spec`` names, loaded once per process for each (kind, dtype, device).

    ``kind`` is the transformers auto class: ``causal_lm``, ``token_classification``,
    ``sequence_classification`` (outcome reward models), ``base`` (the bare model, for a value
    head read separately) or ``custom`` / ``custom_sequence_classification`` (the model's own
    code in its folder, as the config's ``auto_map`` names it - Qwen2.5-Math-PRM and ArmoRM ship
    that way; the code is read from the local folder only).
    """
    if isinstance(spec, LoadedModel):
        return spec
    folder = model_folder(spec)
    key = (str(folder), kind, dtype, device)
    with _loading:
        if key not in _loaded:
            torch = require("torch", "step rewards on transformers models")
            transformers = require("transformers", "step rewards on transformers models")
            auto = {
                "causal_lm": transformers.AutoModelForCausalLM,
                "token_classification": transformers.AutoModelForTokenClassification,
                "base": transformers.AutoModel,
                "custom": transformers.AutoModel,
                "sequence_classification": transformers.AutoModelForSequenceClassification,
                "custom_sequence_classification": transformers.AutoModelForSequenceClassification,
            }[kind]
            extra = {"trust_remote_code": True} if kind.startswith("custom") else {}
            model = auto.from_pretrained(folder, dtype=getattr(torch, dtype), **extra).to(device).eval()
            tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
            _loaded[key] = LoadedModel(model, tokenizer, str(spec))
        return _loaded[key]


def model_folder(spec: str | Path) -> Path:
    """The local folder ``spec`` names: ``embedded``, a folder, or a GGUF file (converted once
    to a folder transformers loads); a `FileNotFoundError` otherwise - never a hub download."""
    if str(spec) == EMBEDDED:
        from rewardlab.llm.default_model import default_model_path

        spec = default_model_path()
    path = Path(spec).expanduser()
    if not path.exists():
        raise FileNotFoundError(
            f"model {spec}: no such folder or file (models load from local paths; the hub is not used)"
        )
    if path.suffix == ".gguf":
        from rewardlab.llm.gguf_conversion import converted_folder

        return converted_folder(path.resolve())
    return path.resolve()


def check_same_tokenizer(first: LoadedModel, second: LoadedModel) -> None:
    """Refuse two models whose tokenizers differ: per-token log-ratios need both models to
    score the very same tokens. The error names the first difference."""
    a, b = first.tokenizer.get_vocab(), second.tokenizer.get_vocab()
    if a == b:
        return
    if len(a) != len(b):
        difference = f"{len(a)} vs {len(b)} tokens"
    else:
        token = next(t for t in sorted(a) if b.get(t) != a[t])
        difference = f"token {token!r} is id {a[token]} vs {b.get(token)}"
    raise ValueError(f"models {first.name} and {second.name} have different tokenizers ({difference})")


def has_custom_code(spec: str | Path | LoadedModel) -> bool:
    """Whether the model's folder names its own modeling code (``auto_map`` in its config)."""
    if isinstance(spec, LoadedModel):
        return False
    config = model_folder(spec) / "config.json"
    return config.is_file() and "auto_map" in json.loads(config.read_text(encoding="utf-8"))


def custom_auto_classes(spec: str | Path | LoadedModel) -> frozenset[str]:
    """The transformers auto classes the model's config maps to its own code (the keys of
    ``auto_map``: ArmoRM maps ``AutoModelForSequenceClassification``, InternLM2-Reward only
    ``AutoModel``); empty for a model without its own code."""
    if not has_custom_code(spec):
        return frozenset()
    assert not isinstance(spec, LoadedModel)  # has_custom_code is False for one
    config = json.loads((model_folder(spec) / "config.json").read_text(encoding="utf-8"))
    return frozenset(config["auto_map"])


def load_value_head(spec: str | Path, dtype: str = "float32", device: str = "cpu") -> Any:
    """A value head (``v_head.summary``, as Skywork's PRMs and TRL's value-head models save it)
    from the safetensors files of the model's folder, as a ``torch.nn.Linear``."""
    torch = require("torch", "value-head PRMs")
    from safetensors import safe_open

    weights = {}
    for file in sorted(model_folder(spec).glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as tensors:
            for key in tensors.keys():  # noqa: SIM118 - safe_open is not a mapping
                if key.startswith("v_head.summary."):
                    weights[key.removeprefix("v_head.summary.")] = tensors.get_tensor(key)
    if "weight" not in weights:
        raise FileNotFoundError(
            f"model {spec}: no value head (v_head.summary.weight) in its safetensors files"
        )
    out_features, in_features = weights["weight"].shape
    head = torch.nn.Linear(in_features, out_features, bias="bias" in weights)
    head.load_state_dict(weights)
    return head.to(device=device, dtype=getattr(torch, dtype)).eval()
