"""Learned outcome reward models: a sequence-classification reward model's score
(`SequenceClassifierReward`, ``reward_model``; `sequence_classifier`) and the implicit reward of
a DPO-trained model (`DPOImplicitReward`, ``dpo_implicit``; `dpo`), how a sample becomes their
input (`rendering`), what their output becomes (`shaping`) and where they run (`placement`).
Models load from local folders through `rewardlab.prm.models`, shared per process.
"""

from rewardlab.lazy_exports import lazy_exports

_EXPORTS = {
    "SequenceClassifierReward": "rewardlab.reward_models.sequence_classifier",
    "DPOImplicitReward": "rewardlab.reward_models.dpo",
}

__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
