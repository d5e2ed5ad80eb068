"""A verl reward-loop manager that scores with a rewardlab reward and hands it the prompt.

verl's own managers (``naive``, ``dapo``, ``remote``) call a custom reward function with the
response, the ground truth and ``extra_info`` only; a judge, a rubric or a group-wise reward
also needs the prompt and the group. `RewardlabRewardManager` reads them from the batch the way
``NaiveRewardManager.run_single`` reads the response (``verl/experimental/reward_loop/
reward_manager/naive.py``, verl 0.9.1): the prompt is ``raw_prompt`` (chat messages, when the
dataset keeps them: ``data.return_raw_chat=True``) or else the prompt tokens under the attention
mask, decoded; the group is ``uid`` (one per prompt, shared by its ``rollout.n`` responses). The
samples a reward worker starts together are scored as one batch (`BatchWindow`).

It is loaded by verl's ``importlib`` source (``verl/trainer/ppo/reward.py``,
``resolve_reward_manager_cls``)::

    reward.reward_manager.source=importlib
    reward.reward_manager.name=RewardlabRewardManager
    reward.reward_manager.module.path=pkg://rewardlab.integrations.verl_reward_manager
    +reward.reward_kwargs.reward_config=/path/to/reward.yaml

and takes its `VerlOptions` from ``reward.reward_kwargs`` (where verl's ``dapo`` manager reads
its own options).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from rewardlab.integrations.verl import (
    BatchWindow,
    VerlOptions,
    plain_value,
    reward_for,
    verl_result,
    verl_sample,
)
from rewardlab.optional import missing_dependency

try:
    from verl import DataProto
    from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase
except ModuleNotFoundError as error:
    raise missing_dependency(error, "rewardlab's verl reward manager") from None


class RewardlabRewardManager(RewardManagerBase):
    """verl's ``RewardManagerBase`` over a rewardlab reward; each sample's answer is
    ``{"reward_score", "reward_extra_info"}`` with `verl_result`'s keys as the extra info.

    Args:
        config: verl's trainer config; ``config.reward.reward_kwargs`` holds `VerlOptions`.
        tokenizer: The policy's tokenizer (verl passes it).
        compute_score: verl's custom reward function, if one is configured; unused (the
            rewardlab reward scores every sample).
        reward_router_address: verl's reward-model router; unused.
        reward_model_tokenizer: The reward model's tokenizer; unused.
    """

    def __init__(
        self,
        config: Any,
        tokenizer: Any,
        compute_score: Any = None,
        reward_router_address: str | None = None,
        reward_model_tokenizer: Any = None,
    ):
        super().__init__(config, tokenizer, compute_score)
        reward_kwargs = config.reward.get("reward_kwargs") or {}
        self.options = VerlOptions.from_kwargs(dict(reward_kwargs))
        self.window = BatchWindow(
            reward_for(self.options.reward_config), self.options.batch_window_s, self.options.max_batch_size
        )

    def _decode(self, ids: Any) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    async def run_single(self, data: DataProto) -> dict[str, Any]:
        item = data[-1:][0]  # as verl's managers: a multi-sequence item is scored on its last sequence
        responses = item.batch["responses"]
        mask = item.batch["attention_mask"]
        response_length = responses.shape[-1]
        response = self._decode(responses[: int(mask[-response_length:].sum())])
        columns = item.non_tensor_batch
        sample = verl_sample(
            columns.get("data_source"),
            response,
            (columns.get("reward_model") or {}).get("ground_truth"),
            columns.get("extra_info"),
        )
        raw_prompt = plain_value(columns.get("raw_prompt"))
        if isinstance(raw_prompt, list) and raw_prompt and all(isinstance(m, Mapping) for m in raw_prompt):
            prompt: Any = raw_prompt
        else:
            prompt = self._decode(item.batch["prompts"][mask[:-response_length].bool()])
        fields = dict(sample.fields)
        if columns.get("uid") is not None:
            fields.setdefault("group_id", str(columns["uid"]))
        score = await self.window.score(dataclasses.replace(sample, prompt=prompt, fields=fields))
        result = verl_result(score, self.options.failure_value)
        return {"reward_score": result["score"], "reward_extra_info": result}
