"""Modes ``full`` and ``lora`` of `rewardlab.reward_models.training`: TRL's ``RewardTrainer``
(trl/trainer/reward_trainer.py, trl 1.16) on pairs tokenized as the ``reward_model`` reward reads
them.

How rewardlab's options meet ``RewardConfig`` (trl/trainer/reward_config.py) and the trainer:

- the dataset is already tokenized (``chosen_ids``, ``rejected_ids``, and ``margin`` when the data
  has margins; ``DataCollatorForPreference`` passes it on and ``compute_loss`` subtracts it), so
  ``max_length=None``: the pairs over the limit were left out before, and counted;
- ``center_rewards_coefficient`` is ``RewardConfig``'s;
- LoRA is a ``peft.LoraConfig(task_type="SEQ_CLS", modules_to_save=["score"])`` given as
  ``peft_config`` (the trainer's docstring asks for ``modules_to_save=["score"]`` when starting
  from a causal LM: the fresh head must be trained in full); the adapters are merged before
  saving, so the checkpoint loads without peft;
- one log line and one checkpoint per epoch (``logging_strategy`` and ``save_strategy``
  ``"epoch"``; ``save_steps`` switches checkpoints to steps); ``use_cpu`` where there is no GPU,
  and ``bf16`` only on a GPU that has it (``RewardConfig`` turns bf16 on by default, CPU too);
- dev accuracy is not the trainer's ``eval_accuracy``: a callback scores the dev pairs at each
  epoch's end with the model being trained, for the length-controlled accuracies that need each
  pair's rewards, and keeps the result in the trainer's ``log_history`` - saved in every
  checkpoint's ``trainer_state.json``, so a resumed run still reports the epochs before it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rewardlab.errors import UsageError
from rewardlab.optional import require
from rewardlab.reward_models.training_options import EpochMetrics, OnEpoch, TrainingOptions
from rewardlab.reward_models.training_pairs import TokenizedPairs


def train_with_reward_trainer(
    model: Any,
    tokenizer: Any,
    train_set: TokenizedPairs,
    dev_set: TokenizedPairs | None,
    *,
    settings: TrainingOptions,
    output: Path,
    device: str,
    on_epoch: OnEpoch,
) -> tuple[Any, dict[str, Any]]:
    """Train ``model`` with ``RewardTrainer``; returns the trained model (adapters merged) and its
    metrics: the dev accuracy before training (not on a resumed run), each epoch's, the final
    one, and the checkpoint resumed from."""
    torch = require("torch", "reward-model training")
    trl = require("trl", "reward-model training")
    datasets = require("datasets", "reward-model training")
    transformers = require("transformers", "reward-model training")
    resume = _checkpoint(output, settings.resume, transformers)
    pad = tokenizer.pad_token_id
    initial = {}
    if dev_set is not None and resume is None:
        initial["dev"] = dev_set.record(*dev_set.rewards(model, pad, settings.inference_batch_size))
    rows = [
        {"chosen_ids": chosen, "rejected_ids": rejected}
        | ({} if pair.margin is None else {"margin": pair.margin})
        for pair, chosen, rejected in zip(train_set.pairs, train_set.chosen, train_set.rejected, strict=True)
    ]
    on_gpu = device.startswith("cuda")
    config: dict[str, Any] = {
        "output_dir": str(output),
        "num_train_epochs": settings.epochs,
        "max_length": None,
        "center_rewards_coefficient": settings.center_rewards_coefficient,
        "weight_decay": settings.weight_decay,
        "logging_strategy": "epoch",
        "save_strategy": "epoch" if settings.save_steps is None else "steps",
        "save_total_limit": settings.save_total_limit,
        "eval_strategy": "no",
        "report_to": "none",
        "use_cpu": not on_gpu,
        "bf16": on_gpu and torch.cuda.is_bf16_supported(),
        "seed": settings.seed,
        "disable_tqdm": True,
    }
    if settings.save_steps is not None:
        config["save_steps"] = settings.save_steps
    if settings.learning_rate is not None:
        config["learning_rate"] = settings.learning_rate
    if settings.batch_size is not None:
        config["per_device_train_batch_size"] = settings.batch_size
    trainer = trl.RewardTrainer(
        model=model,
        args=trl.RewardConfig(**{**config, **settings.trainer_options}),
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=_lora_config(settings) if settings.mode == "lora" else None,
        callbacks=[_epoch_callback(transformers, dev_set, pad, settings.inference_batch_size, on_epoch)],
    )
    trainer.remove_callback(transformers.PrinterCallback)  # the epoch lines say what it would print
    trainer.train(resume_from_checkpoint=None if resume is None else str(resume))
    trained = trainer.model
    if settings.mode == "lora":
        trained = trained.merge_and_unload()
    trained = trained.to("cpu").eval()
    epochs = _epochs(trainer.state.log_history)
    metrics: dict[str, Any] = {"initial": initial, "epochs": epochs}
    metrics["final"] = {"dev": epochs[-1]["dev"]} if dev_set is not None and epochs else {}
    metrics["resumed_from"] = None if resume is None else str(resume)
    return trained, metrics


def _checkpoint(output: Path, resume: bool | str, transformers: Any) -> Path | None:
    if not resume:
        return None
    if resume is True:
        last = transformers.trainer_utils.get_last_checkpoint(str(output)) if output.is_dir() else None
        if last is None:
            raise UsageError(f"{output}: no checkpoint-* folder to resume from")
        return Path(last)
    path = Path(resume)
    if not (path / "trainer_state.json").is_file():
        raise UsageError(f"{path}: not a trainer checkpoint (no trainer_state.json)")
    return path


def _lora_config(settings: TrainingOptions) -> Any:
    peft = require("peft", "LoRA reward-model training")
    return peft.LoraConfig(
        task_type="SEQ_CLS",
        r=settings.lora_r,
        lora_alpha=settings.lora_alpha,
        lora_dropout=settings.lora_dropout,
        target_modules=settings.lora_target_modules,
        modules_to_save=["score"],
    )


def _epoch_callback(
    transformers: Any, dev_set: TokenizedPairs | None, pad: int, batch_size: int, on_epoch: OnEpoch
) -> Any:
    class EpochReport(transformers.TrainerCallback):
        """Scores the dev pairs at each epoch's end (before that epoch's log line and checkpoint,
        which the trainer writes right after), and reports the epoch when its loss is logged."""

        def on_epoch_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            if dev_set is not None:
                record = dev_set.record(*dev_set.rewards(model, pad, batch_size))
                state.log_history.append(
                    {"epoch": round(state.epoch), "step": state.global_step, "dev": record}
                )

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            if logs and _ends_epoch(logs):
                epoch = round(logs["epoch"])
                dev = next((e["dev"] for e in state.log_history if "dev" in e and e["epoch"] == epoch), None)
                on_epoch(EpochMetrics(epoch, logs["loss"], logs.get("accuracy"), dev))

    return EpochReport()


def _epochs(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per epoch from the trainer's log history: its train loss and running
    accuracy (the epoch's log line) and its dev scores (the callback's entry)."""
    train = {round(e["epoch"]): e for e in history if _ends_epoch(e)}
    dev = {e["epoch"]: e["dev"] for e in history if "dev" in e}
    return [
        EpochMetrics(epoch, train[epoch]["loss"], train[epoch].get("accuracy"), dev.get(epoch)).to_dict()
        for epoch in sorted(train)
    ]


def _ends_epoch(logs: dict[str, Any]) -> bool:
    """Whether a log line is an epoch's train loss (not a step's, when ``trainer_options`` log by
    steps too)."""
    return "loss" in logs and "epoch" in logs and abs(logs["epoch"] - round(logs["epoch"])) < 1e-6
