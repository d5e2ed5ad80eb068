"""Learned outcome reward models: a sequence-classification reward model's score
(`SequenceClassifierReward`, ``reward_model``; `sequence_classifier`) and the implicit reward of
a DPO-trained model (`DPOImplicitReward`, ``dpo_implicit``; `dpo`), how a sample becomes their
input (`rendering`), what their output becomes (`shaping`) and where they run (`placement`).
Models load from local folders through `rewardlab.prm.models`, shared per process. The same
models behind a pooling server (vLLM, SGLang, TEI) are `ServedRewardModel`
(``served_reward_model``; `served`), and ``rewardlab serve-model --runner pooling`` serves a
model folder that way (`pooling_server`).

Training one (`train_reward_model`, ``rewardlab train-rm``; `training`): preference files
(`preferences`) tokenized as the reward reads them (`training_pairs`), the score head fitted on
cached features (`head_fitting`) or the model fine-tuned through TRL's ``RewardTrainer``
(`trl_training`), with accuracies that control for length (`pair_accuracy`).
"""

from rewardlab.lazy_exports import lazy_exports

_EXPORTS = {
    "SequenceClassifierReward": "rewardlab.reward_models.sequence_classifier",
    "DPOImplicitReward": "rewardlab.reward_models.dpo",
    "ServedRewardModel": "rewardlab.reward_models.served",
    "train_reward_model": "rewardlab.reward_models.training",
    "TrainingOptions": "rewardlab.reward_models.training_options",
    "read_preferences": "rewardlab.reward_models.preferences",
}

__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
