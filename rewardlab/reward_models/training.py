"""Training a Bradley-Terry reward model on preference pairs (``rewardlab train-rm``), saved as a
sequence-classification checkpoint that the ``reward_model`` reward loads as it is: weights,
config (with its pad token) and tokenizer (with its chat template).

Three modes (`TrainingOptions.mode`):

- ``head``: the backbone stays frozen; the hidden state the classifier reads is computed once per
  answer, cached on disk, and only the score head is fitted (`head_fitting`). The CPU-practical
  mode: the cost is one forward pass over the data.
- ``full``: every weight, through TRL's ``RewardTrainer`` (`trl_training`).
- ``lora``: LoRA adapters (peft) and the score head through ``RewardTrainer``; the adapters are
  merged into the saved model, so it loads without peft.

The pairs are tokenized here, not by the trainer. ``RewardTrainer._prepare_dataset``
(trl/trainer/reward_trainer.py, trl 1.16) renders conversational pairs with the chat template
but standard-text pairs as plain ``prompt + chosen + EOS``, even when the tokenizer has a
template; the ``reward_model`` reward (``render: auto``) reads through the template whenever
there is one. A model trained on one rendering would be scored on the other. So each answer is
tokenized by `rendering.conversation_ids`, exactly as the reward reads it, and given to the
trainer as ``chosen_ids`` / ``rejected_ids`` (a dataset with those columns skips the trainer's
own tokenization); head mode uses the same ids. A pair longer than ``max_length`` (or the
model's context) is left out, as ``RewardTrainer`` filters such pairs, and counted in
``metrics.json``.

The starting model is a causal LM (a folder, a GGUF file, or ``embedded``: converted as
`rewardlab.prm.models.model_folder` does) that gets a fresh one-output score head, as
``RewardTrainer`` builds one from a model name (``AutoModelForSequenceClassification`` with
``num_labels=1``); or a one-output sequence classifier, which goes on from its own head.

Each epoch reports the train loss and, with a dev file, the accuracy on it, beside the two
length-controlled accuracies (`pair_accuracy`: pairs of similar length, and pairs whose chosen
answer is the shorter), and all of it goes to ``OUTPUT/metrics.json``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewardlab.cache_location import cache_dir
from rewardlab.errors import UsageError
from rewardlab.optional import require
from rewardlab.prm.models import has_custom_code, model_folder
from rewardlab.reward_models.head_fitting import OnFeatures, cached_features, fit_head, model_fingerprint
from rewardlab.reward_models.placement import placement
from rewardlab.reward_models.preferences import PreferencePair, read_preferences
from rewardlab.reward_models.training_options import EpochMetrics, OnEpoch, TrainingOptions
from rewardlab.reward_models.training_pairs import TokenizedPairs, tokenize_pairs

METRICS_FILE = "metrics.json"


def starting_model(base_model: str | Path, seed: int) -> tuple[Any, Any]:
    """The sequence classifier to train, with one output, and its tokenizer (given a pad token:
    its own, else its EOS token, as ``RewardTrainer`` does), in float32 on the CPU."""
    torch = require("torch", "reward-model training")
    transformers = require("transformers", "reward-model training")
    folder = model_folder(base_model)
    if has_custom_code(folder):
        raise UsageError(f"model {base_model}: models with their own code (auto_map) are not trained here")
    config = transformers.AutoConfig.from_pretrained(folder)
    classifier = any(name.endswith("ForSequenceClassification") for name in config.architectures or ())
    if classifier and config.num_labels != 1:
        raise UsageError(
            f"model {base_model}: a classifier with {config.num_labels} outputs; a Bradley-Terry "
            "reward model has one"
        )
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise UsageError(f"model {base_model}: its tokenizer has neither a pad nor an EOS token")
        tokenizer.pad_token = tokenizer.eos_token
    transformers.set_seed(seed)  # the fresh head's initial weights
    verbosity = transformers.logging.get_verbosity()
    if not classifier:  # its report of a missing score head and an unused LM head says nothing new
        transformers.logging.set_verbosity_error()
    try:
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            folder, num_labels=1, dtype=torch.float32
        )
    finally:
        transformers.logging.set_verbosity(verbosity)
    # The classifier finds each row's last token by the pad id (RewardTrainer sets it the same way).
    model.config.get_text_config().pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def train_reward_model(
    train: str | Path | Sequence[PreferencePair],
    output_dir: str | Path,
    *,
    dev: str | Path | Sequence[PreferencePair] | None = None,
    on_epoch: OnEpoch | None = None,
    on_features: OnFeatures | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Train a reward model on ``train`` (a preference file, or pairs) and save it to
    ``output_dir``; returns the metrics, also written to ``output_dir/metrics.json``.

    ``options`` are `TrainingOptions` fields. ``dev`` (a file or pairs) is scored after every
    epoch; ``on_epoch`` is called with each epoch's `EpochMetrics`, and in head mode
    ``on_features`` after each batch of features computed (`head_fitting.OnFeatures`).

    Raises:
        DataFormatError: a preference file or pair that cannot be used (naming file, row, field).
        UsageError: an output folder that is not empty (without ``overwrite`` or ``resume``), a
            model that cannot be trained, no pair within ``max_length``.

    Example:
        >>> metrics = train_reward_model("prefs.jsonl", "my-rm", dev="dev.jsonl")  # doctest: +SKIP
        >>> metrics["final"]["dev"]["similar_length"]  # doctest: +SKIP
        {'accuracy': 0.61, 'pairs': 96}
    """
    settings = TrainingOptions(**options)
    output = Path(output_dir)
    _prepare_output(output, settings)
    train_pairs = _pairs(train, settings.margin_column)
    dev_pairs = _pairs(dev, settings.margin_column) if dev is not None else None
    model, tokenizer = starting_model(settings.base_model, settings.seed)
    context = getattr(model.config.get_text_config(), "max_position_embeddings", None)
    limit = min((length for length in (settings.max_length, context) if length is not None), default=None)
    train_set = tokenize_pairs(train_pairs, tokenizer, limit)
    if not train_set.pairs:
        raise UsageError(f"no training pair fits in {limit} tokens (max_length)")
    dev_set = tokenize_pairs(dev_pairs, tokenizer, limit) if dev_pairs is not None else None
    if dev_set is not None and not dev_set.pairs:
        raise UsageError(f"no dev pair fits in {limit} tokens (max_length)")
    device = settings.device or placement(None, "float32")[0]
    metrics: dict[str, Any] = {
        "mode": settings.mode,
        "base_model": str(settings.base_model),
        "train": str(train) if isinstance(train, str | Path) else None,
        "dev": str(dev) if isinstance(dev, str | Path) else None,
        "max_length": limit,
        "pairs": {
            "train": len(train_set.pairs),
            "train_too_long": train_set.too_long,
            "dev": len(dev_set.pairs) if dev_set else 0,
            "dev_too_long": dev_set.too_long if dev_set else 0,
        },
        "options": settings.model_dump(mode="json"),
    }
    report = on_epoch or (lambda epoch: None)
    if settings.mode == "head":
        model = model.to(device)
        metrics.update(
            _train_head(
                model,
                tokenizer,
                train_set,
                dev_set,
                settings=settings,
                on_epoch=report,
                on_features=on_features,
            )
        )
    else:
        from rewardlab.reward_models.trl_training import train_with_reward_trainer

        model, trained = train_with_reward_trainer(
            model,
            tokenizer,
            train_set,
            dev_set,
            settings=settings,
            output=output,
            device=device,
            on_epoch=report,
        )
        metrics.update(trained)
    model.save_pretrained(output)
    tokenizer.save_pretrained(output)
    (output / METRICS_FILE).write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    return metrics


def _train_head(
    model: Any,
    tokenizer: Any,
    train_set: TokenizedPairs,
    dev_set: TokenizedPairs | None,
    *,
    settings: TrainingOptions,
    on_epoch: OnEpoch,
    on_features: OnFeatures | None,
) -> dict[str, Any]:
    folder = model_folder(settings.base_model)
    cache = settings.feature_cache or cache_dir() / "reward-model-features"
    model_key = model_fingerprint(folder)
    batch = settings.inference_batch_size

    def features(pairs: TokenizedPairs) -> tuple[Any, Any]:
        found = cached_features(
            model, pairs.sequences, model_key=model_key, pad_id=tokenizer.pad_token_id, batch_size=batch,
            cache=cache, on_progress=on_features,
        )  # fmt: skip
        return found[: len(pairs.pairs)], found[len(pairs.pairs) :]

    train_features = features(train_set)
    dev_features = features(dev_set) if dev_set is not None else None
    model.to("cpu")  # the head is fitted where the features are
    head = model.score

    def records() -> dict[str, Any]:
        found = {"train": train_set.record(*(head(x).squeeze(-1) for x in train_features))}
        if dev_set is not None and dev_features is not None:
            found["dev"] = dev_set.record(*(head(x).squeeze(-1) for x in dev_features))
        return found

    torch = require("torch", "reward-model training")
    with torch.no_grad():
        initial = records()
    epochs: list[dict[str, Any]] = []

    def after_epoch(epoch: int, loss: float) -> None:
        with torch.no_grad():
            found = records()
        metrics = EpochMetrics(epoch, loss, found["train"]["accuracy"], found.get("dev"))
        epochs.append(metrics.to_dict())
        on_epoch(metrics)

    fit_head(
        head,
        *train_features,
        train_set.margins(),
        epochs=settings.epochs,
        learning_rate=settings.learning_rate or 1e-2,
        batch_size=settings.batch_size or 32,
        weight_decay=settings.weight_decay,
        center_rewards_coefficient=settings.center_rewards_coefficient,
        seed=settings.seed,
        after_epoch=after_epoch,
    )
    with torch.no_grad():
        final = records()
    return {"initial": initial, "epochs": epochs, "final": final}


def _pairs(source: str | Path | Sequence[PreferencePair], margin_column: str | None) -> list[PreferencePair]:
    if isinstance(source, str | Path):
        return read_preferences(source, margin_column=margin_column)
    return list(source)


def _prepare_output(output: Path, settings: TrainingOptions) -> None:
    if output.exists() and not output.is_dir():
        raise UsageError(f"{output}: exists and is not a folder")
    if not output.exists() or not any(output.iterdir()) or settings.resume:
        output.mkdir(parents=True, exist_ok=True)
        return
    if not settings.overwrite:
        raise UsageError(f"{output}: not empty; pass overwrite (--overwrite) or resume (--resume)")
    for checkpoint in output.glob("checkpoint-*"):
        shutil.rmtree(checkpoint)
