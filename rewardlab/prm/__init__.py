"""Process rewards: progress advantage and the implicit PRM (`ProgressAdvantageReward`,
`ImplicitPRMReward`; `implicit`, on `logprobs` and `batching`), discriminative PRMs
(`DiscriminativePRMReward`; `discriminative`, `formats`) and training one (`train_prm`;
`training`), a generative step judge (`StepJudge`), Monte-Carlo step labels
(`MonteCarloStepReward`, with the policies of `continuers`), how a sample is tokenized into steps
(`trajectory`), and what step scores are used for (`applications`). Step splitting itself, and
`StepOptions` (the ``steps`` option of every step reward), are in `rewardlab.rewards`.
"""

from rewardlab.lazy_exports import lazy_exports

_EXPORTS = {
    "ProgressAdvantageReward": "rewardlab.prm.implicit",
    "ImplicitPRMReward": "rewardlab.prm.implicit",
    "DiscriminativePRMReward": "rewardlab.prm.discriminative",
    "StepJudge": "rewardlab.prm.step_judge",
    "MonteCarloStepReward": "rewardlab.prm.monte_carlo",
    "train_prm": "rewardlab.prm.training",
    "TokenLogprobScorer": "rewardlab.prm.logprobs",
}

__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
