r"""rewardlab: rewards you can trust for LLM post-training, behind one contract.

Every scorer is a `Reward`: `Sample`s in, one `Score` per sample out. The contract, the errors
and the registry are imported with the package (about 50 ms); every other public name here
(composition, the rewards, the TRL adapter, the reward server's client, offline scoring) is
imported on first use (PEP 562), so that ``import rewardlab`` stays fast and pulls in no model,
server, training dependency or pydantic:

    >>> import rewardlab
    >>> reward = rewardlab.build({"type": "math_answer"})
    >>> [score] = reward.score([rewardlab.Sample(completion="So $\\boxed{4}$.", reference="4")])
    >>> score.value
    1.0
    >>> reward.close()
"""

from __future__ import annotations

from rewardlab.errors import ConfigError, InvalidInput, RewardlabError, UserError
from rewardlab.lazy_exports import lazy_exports
from rewardlab.rewards.contract import Reward, Sample, Score, Status, Usage
from rewardlab.rewards.registry import available, build, register

#: Public names imported on first use, and the module that defines each.
_LAZY = {
    "Combine": "rewardlab.rewards.combine",
    "Route": "rewardlab.rewards.combine",
    "RuleReward": "rewardlab.rewards.rule",
    "as_reward_func": "rewardlab.integrations.trl",
    "RemoteReward": "rewardlab.serving.remote",
    "score_file": "rewardlab.offline.runner",
    "MathAnswerReward": "rewardlab.rewards.math.reward",
    "CodeExecutionReward": "rewardlab.rewards.code.reward",
    "StringMatchReward": "rewardlab.rewards.format",
    "JsonSchemaReward": "rewardlab.rewards.json_schema",
    "InstructionFollowingReward": "rewardlab.rewards.instructions",
    "PointwiseJudge": "rewardlab.judges.pointwise",
    "PairwiseJudge": "rewardlab.judges.pairwise",
    "ListwiseJudge": "rewardlab.judges.listwise",
    "ReferenceScaffoldedJudge": "rewardlab.judges.scaffolded",
    "RubricReward": "rewardlab.rubrics.grading",
    "StepJudge": "rewardlab.prm.step_judge",
    "DiscriminativePRMReward": "rewardlab.prm.discriminative",
    "ImplicitPRMReward": "rewardlab.prm.implicit",
    "ProgressAdvantageReward": "rewardlab.prm.implicit",
}

__all__ = [
    "CodeExecutionReward",
    "Combine",
    "ConfigError",
    "DiscriminativePRMReward",
    "ImplicitPRMReward",
    "InstructionFollowingReward",
    "InvalidInput",
    "JsonSchemaReward",
    "ListwiseJudge",
    "MathAnswerReward",
    "PairwiseJudge",
    "PointwiseJudge",
    "ProgressAdvantageReward",
    "ReferenceScaffoldedJudge",
    "RemoteReward",
    "Reward",
    "RewardlabError",
    "Route",
    "RubricReward",
    "RuleReward",
    "Sample",
    "Score",
    "Status",
    "StepJudge",
    "StringMatchReward",
    "Usage",
    "UserError",
    "as_reward_func",
    "available",
    "build",
    "register",
    "score_file",
]
__version__ = "0.1.0"


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
