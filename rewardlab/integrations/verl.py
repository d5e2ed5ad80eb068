"""Any rewardlab reward as verl's custom reward function (volcengine/verl, tested with 0.9.1).

verl scores rule-based rewards through a function named in its config
(``reward.custom_reward_function``: ``path``, ``name``, ``reward_kwargs``; loaded by
``verl/trainer/ppo/reward.py``, ``get_custom_reward_fn``), with the signature of
``verl.utils.reward_score.default_compute_score``::

    compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)

``reward_kwargs`` reach the function as keywords (they win over verl's own). Its reward loop
(``verl/experimental/reward_loop/reward_manager/naive.py``, ``NaiveRewardManager.run_single``)
calls it once per sample, with keywords, in an executor thread, or awaits it on the worker's
event loop when it is a coroutine function; the legacy ``BatchRewardManager``
(``verl/workers/reward_manager/batch.py``) calls it once per batch with lists
(``data_sources``, ``solution_strs``, ``ground_truths``, ``extra_infos``). A float result is the
reward; a dict's ``"score"`` is, and every other key goes to ``reward_extra_info``, which verl
gathers into one array per key (``RewardLoopManager.compute_rm_score`` reads the keys of the
first sample: every sample must have the same keys), averages per data source in validation
(strings skipped) and dumps with the generations.

So each entry point here answers the same fixed dict per sample: ``score`` (the value, or
``failure_value`` when there is none), ``failed`` (1.0 when there is no value, so its mean is the
failure rate in verl's metrics), ``status`` and ``reason``. verl needs a number for every sample;
a failure gets one, never silently.

Entry points, all built from one rewardlab config (``reward_config`` in ``reward_kwargs``, or the
``REWARDLAB_VERL_CONFIG`` environment variable), built once per process and kept:

- `compute_score`: verl's per-sample signature, synchronous (any reward manager, including
  ``remote``, which needs a plain function).
- `acompute_score`: the same signature as a coroutine. verl's reward loop starts every sample of
  a worker's chunk at once; this one gathers the calls that arrive within ``batch_window_s`` into
  one `Reward.ascore` batch, so group-wise judges, deduplicating clients and worker pools see the
  batch instead of one sample at a time.
- `compute_score_batch`: the batch signature (lists in, a list of dicts out), one `Reward.score`
  for the whole batch.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rewardlab.errors import ConfigError
from rewardlab.rewards.contract import Reward, Sample, Score
from rewardlab.rewards.options import options_error

#: The environment variable naming the reward config when ``reward_kwargs`` does not.
CONFIG_ENV = "REWARDLAB_VERL_CONFIG"
#: Keywords verl itself passes to a custom reward function (reward router, sandbox); not ours.
_VERL_KEYWORDS = frozenset({
    "reward_router_address",
    "reward_model_tokenizer",
    "sandbox_fusion_url",
    "concurrent_semaphore",
    "memory_limit_mb",
})  # fmt: skip
#: ``extra_info`` keys read as the prompt, in this order (verl's data recipes store the question
#: there; its reward managers do not pass the prompt itself).
PROMPT_KEYS = ("prompt", "question")


class VerlOptions(BaseModel):
    """What ``reward_kwargs`` may set (verl passes them to the function as keywords)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reward_config: str = Field(min_length=1)
    """Path of the rewardlab reward config (YAML), as `rewardlab.build` reads it; default: the
    ``REWARDLAB_VERL_CONFIG`` environment variable."""
    failure_value: float = Field(default=0.0, allow_inf_nan=False)
    """The ``score`` of a sample without a value (a failure, or not applicable); its ``failed``
    is 1.0 and its ``status`` and ``reason`` say why."""
    batch_window_s: float = Field(default=0.05, ge=0)
    """`acompute_score` and the reward manager: how long the first waiting sample waits for
    others to join its batch."""
    max_batch_size: int = Field(default=1024, ge=1)
    """`acompute_score` and the reward manager: a batch leaves as soon as it has this many samples."""

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> VerlOptions:
        """The options among the keywords verl passed: verl's own are ignored, unknown ones refused
        (a `ConfigError` naming ``reward_kwargs.<option>``)."""
        options = {
            key: value for key, value in kwargs.items() if key not in _VERL_KEYWORDS and value is not None
        }
        options.setdefault("reward_config", os.environ.get(CONFIG_ENV))
        if not options["reward_config"]:
            raise ConfigError(
                "reward_kwargs.reward_config",
                f"no reward config: set reward_kwargs.reward_config or the {CONFIG_ENV} environment variable",
            )
        try:
            return cls.model_validate(options)
        except ValidationError as error:
            raise options_error(error, cls, "reward_kwargs") from None


_rewards: dict[str, Reward] = {}
_rewards_lock = threading.Lock()


def reward_for(config_path: str) -> Reward:
    """The reward ``config_path`` builds, built once per process (verl calls from many threads)."""
    from rewardlab.rewards.registry import build

    key = os.path.abspath(config_path)
    with _rewards_lock:
        if key not in _rewards:
            _rewards[key] = build(key)
        return _rewards[key]


def plain_value(value: Any) -> Any:
    """``value`` with numpy arrays and scalars (verl reads parquet columns into them) as Python
    lists and numbers, recursively, so that rewards see JSON-like fields."""
    if isinstance(value, Mapping):
        return {str(key): plain_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain_value(item) for item in value]
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        return plain_value(value.tolist())
    return value


def _reference(ground_truth: Any) -> str | None:
    """A text or numeric ground truth as the sample's reference; a number as the number it is
    (``1.0`` is ``"1"``). Anything else (test cases, answer lists) stays in the fields alone."""
    if isinstance(ground_truth, str):
        return ground_truth
    if isinstance(ground_truth, bool):
        return None
    if isinstance(ground_truth, int):
        return str(ground_truth)
    if isinstance(ground_truth, float) and math.isfinite(ground_truth):
        return str(int(ground_truth)) if ground_truth.is_integer() else repr(ground_truth)
    return None


def verl_sample(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None) -> Sample:
    """The `Sample` for verl's arguments: the decoded response is the completion, the ground truth
    the reference (when it is text or a number), ``extra_info``'s ``prompt`` or ``question`` the
    prompt; ``extra_info``, ``data_source`` and ``ground_truth`` are all in the fields."""
    info = plain_value(extra_info) if isinstance(extra_info, Mapping) else {}
    truth = plain_value(ground_truth)
    prompt = next((info[key] for key in PROMPT_KEYS if isinstance(info.get(key), str | list)), "")
    return Sample(
        prompt=prompt,
        completion=solution_str,
        reference=_reference(truth),
        fields={**info, "data_source": plain_value(data_source), "ground_truth": truth},
    )


def verl_result(score: Score, failure_value: float) -> dict[str, Any]:
    """verl's dict for one score: ``score``, ``failed``, ``status`` and ``reason``, the same keys
    for every sample (verl builds one array per key from the first sample's keys)."""
    return {
        "score": score.value if score.value is not None else failure_value,
        "failed": 0.0 if score.ok else 1.0,
        "status": score.status.value,
        "reason": score.reason,
    }


def compute_score(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **kwargs: Any
) -> dict[str, Any]:
    """verl's custom reward function: one sample, scored by the configured reward.

    Args:
        data_source: The sample's ``data_source`` column (in the fields as ``data_source``).
        solution_str: The decoded response.
        ground_truth: ``reward_model["ground_truth"]`` of the sample.
        extra_info: The sample's ``extra_info`` column (its keys become fields).
        **kwargs: `VerlOptions` from ``reward_kwargs``; the keywords verl adds are ignored.

    Returns:
        ``{"score", "failed", "status", "reason"}`` (see the module's docstring).
    """
    options = VerlOptions.from_kwargs(kwargs)
    sample = verl_sample(data_source, solution_str, ground_truth, extra_info)
    (score,) = reward_for(options.reward_config).score([sample])
    return verl_result(score, options.failure_value)


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """verl's batch signature (``BatchRewardManager``): lists in, one dict per sample out, the
    whole batch scored by one `Reward.score` call."""
    options = VerlOptions.from_kwargs(kwargs)
    infos = [None] * len(solution_strs) if extra_infos is None else list(extra_infos)
    columns = (list(data_sources), list(solution_strs), list(ground_truths), infos)
    if len({len(column) for column in columns}) != 1:
        raise ValueError(
            "data_sources, solution_strs, ground_truths and extra_infos differ in length: "
            f"{[len(column) for column in columns]}"
        )
    samples = [verl_sample(*row) for row in zip(*columns, strict=True)]
    scores = reward_for(options.reward_config).score(samples)
    return [verl_result(score, options.failure_value) for score in scores]


class BatchWindow:
    """Gathers the samples awaited on one event loop into `Reward.ascore` batches: a batch leaves
    ``window_s`` after its first sample arrived, or as soon as it has ``max_size`` samples."""

    def __init__(self, reward: Reward, window_s: float, max_size: int):
        self.reward = reward
        self.window_s = window_s
        self.max_size = max_size
        self.pending: list[tuple[Sample, asyncio.Future[Score]]] = []
        self.timer: asyncio.TimerHandle | None = None
        self.running: set[asyncio.Task[None]] = set()

    async def score(self, sample: Sample) -> Score:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Score] = loop.create_future()
        self.pending.append((sample, future))
        if len(self.pending) >= self.max_size:
            self.flush()
        elif self.timer is None:
            self.timer = loop.call_later(self.window_s, self.flush)
        return await future

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        batch, self.pending = self.pending, []
        if batch:
            # Held until done: the loop keeps only weak references to tasks.
            task = asyncio.ensure_future(self._score(batch))
            self.running.add(task)
            task.add_done_callback(self.running.discard)

    async def _score(self, batch: list[tuple[Sample, asyncio.Future[Score]]]) -> None:
        try:
            scores = await self.reward.ascore([sample for sample, _ in batch])
            if len(scores) != len(batch):
                raise RuntimeError(
                    f"reward {self.reward.name!r} returned {len(scores)} scores for {len(batch)} samples"
                )
        except Exception as error:  # noqa: BLE001 - handed to every caller waiting on this batch
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
            return
        for (_, future), score in zip(batch, scores, strict=True):
            if not future.done():  # a caller that was cancelled no longer waits
                future.set_result(score)


#: One batcher per event loop and reward config: futures belong to the loop that made them.
_batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[VerlOptions, BatchWindow]] = (
    weakref.WeakKeyDictionary()
)


async def acompute_score(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **kwargs: Any
) -> dict[str, Any]:
    """`compute_score` as a coroutine: verl awaits it on its reward worker's event loop, and the
    samples awaited together are scored as one batch (``batch_window_s``, ``max_batch_size``)."""
    options = VerlOptions.from_kwargs(kwargs)
    sample = verl_sample(data_source, solution_str, ground_truth, extra_info)
    per_loop = _batchers.setdefault(asyncio.get_running_loop(), {})
    if options not in per_loop:
        reward = reward_for(options.reward_config)
        per_loop[options] = BatchWindow(reward, options.batch_window_s, options.max_batch_size)
    score = await per_loop[options].score(sample)
    return verl_result(score, options.failure_value)
