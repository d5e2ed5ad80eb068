"""Training a token-classification PRM on stepwise-supervision rows.

TRL's ``PRMTrainer`` did this. TRL moved it to ``trl.experimental.prm`` (huggingface/trl PR
#4483) and later removed it from there too (PR #7133): the pinned trl 1.16 has no PRM trainer.
What it did is small and is kept here, on transformers' own ``Trainer``: a row (``prompt``,
``completions``: the steps, ``labels``: one boolean per step, as `stepwise_rows` and TRL's
stepwise datasets have them) becomes BOS, the prompt, then each step followed by the separator;
the step's label sits on the separator's last token and every other position is ignored (-100).
That is exactly the layout the ``prm`` reward reads back with ``family: token_classification`` -
a model trained here is scored there without further glue.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardlab.optional import require
from rewardlab.prm.models import EMBEDDED, model_folder

IGNORED = -100
logger = logging.getLogger(__name__)


def tokenize_stepwise(
    row: Mapping[str, Any],
    tokenizer: Any,
    *,
    separator: str = "\n",
    max_length: int | None = None,
    row_name: str = "row",
) -> dict[str, list[int]]:
    """``input_ids`` and ``labels`` of one stepwise row (see the module docstring). A row
    whose steps and labels differ in number, or whose labels are not booleans (or 0 / 1),
    is refused with its name and the field."""
    prompt, steps, labels = row.get("prompt"), row.get("completions"), row.get("labels")
    if not isinstance(prompt, str):
        raise ValueError(f"{row_name}: 'prompt' must be text, got {type(prompt).__name__}")
    if not isinstance(steps, Sequence) or isinstance(steps, str) or not steps:
        raise ValueError(f"{row_name}: 'completions' must be a non-empty list of steps")
    if not isinstance(labels, Sequence) or len(labels) != len(steps):
        got = len(labels) if isinstance(labels, Sequence) else type(labels).__name__
        raise ValueError(f"{row_name}: 'labels' must have one label per step ({len(steps)}), got {got}")
    if any(label not in (0, 1) for label in labels):  # True and False compare equal to 1 and 0
        raise ValueError(f"{row_name}: 'labels' must be booleans (hard labels), got {list(labels)!r}")
    separator_ids = tokenizer.encode(separator, add_special_tokens=False)
    if not separator_ids:
        raise ValueError(f"the step separator {separator!r} has no tokens; a step's label sits on its last")
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    input_ids = bos + tokenizer.encode(prompt, add_special_tokens=False)
    targets = [IGNORED] * len(input_ids)
    for step, label in zip(steps, labels, strict=True):
        step_ids = tokenizer.encode(str(step), add_special_tokens=False) + separator_ids
        input_ids += step_ids
        targets += [IGNORED] * (len(step_ids) - 1) + [int(label)]
    if max_length is not None:
        input_ids, targets = input_ids[:max_length], targets[:max_length]
    return {"input_ids": input_ids, "labels": targets}


def train_prm(
    rows: Sequence[Mapping[str, Any]],
    output_dir: str | Path,
    *,
    base_model: str | Path = EMBEDDED,
    separator: str = "\n",
    max_length: int = 512,
    epochs: float = 1.0,
    learning_rate: float = 5e-5,
    batch_size: int = 8,
    seed: int = 0,
    **trainer_options: Any,
) -> Path:
    """Fine-tune ``base_model`` (a causal LM's folder, a GGUF file, or ``embedded``) with a
    fresh two-class token-classification head on ``rows``; the model and its tokenizer are saved
    in ``output_dir``, which is returned. ``trainer_options`` go to
    ``transformers.TrainingArguments`` (e.g. ``use_cpu=True``, ``logging_steps``) and override
    its defaults here. A row cut by ``max_length`` before its first label is left out (logged);
    with no row left, a `ValueError`."""
    require("torch", "PRM training")
    transformers = require("transformers", "PRM training")
    datasets = require("datasets", "PRM training")
    source = model_folder(base_model)
    tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    encoded = [
        tokenize_stepwise(row, tokenizer, separator=separator, max_length=max_length, row_name=f"row {i}")
        for i, row in enumerate(rows)
    ]
    labelled = [row for row in encoded if any(label != IGNORED for label in row["labels"])]
    if len(labelled) < len(encoded):
        logger.warning(
            "%d of %d rows have no label within max_length=%d; left out",
            len(encoded) - len(labelled),
            len(encoded),
            max_length,
        )
    if not labelled:
        raise ValueError(f"no row has a label within max_length={max_length}")
    transformers.set_seed(seed)
    model = transformers.AutoModelForTokenClassification.from_pretrained(
        source, num_labels=2, id2label={0: "incorrect", 1: "correct"}, label2id={"incorrect": 0, "correct": 1}
    )
    model.config.pad_token_id = tokenizer.pad_token_id
    settings = {"save_strategy": "no", "report_to": [], **trainer_options}
    arguments = transformers.TrainingArguments(
        output_dir=str(output_dir),
        num_train_epochs=epochs,
        learning_rate=learning_rate,
        per_device_train_batch_size=batch_size,
        seed=seed,
        **settings,
    )
    trainer = transformers.Trainer(
        model=model,
        args=arguments,
        train_dataset=datasets.Dataset.from_list(labelled),
        data_collator=transformers.DataCollatorForTokenClassification(tokenizer),
    )
    trainer.train()
    trainer.save_model(str(output_dir))
    tokenizer.save_pretrained(str(output_dir))
    return Path(output_dir)
