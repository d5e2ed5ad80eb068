"""Rubric rewards: signed, weighted criteria (`Rubric`, `Criterion`; `model`) graded by a judge
(`RubricReward`; `grading`) and folded by a named rule (`aggregate.aggregate`); rubrics written from a
reference or a task (`generate`); self-proposed rubrics (Compute-as-Teacher,
`SelfProposedRubricReward`); and rubrics that grow during training (`RubricElicitor`, `elicit`;
`online`), kept in a versioned `RubricStore` (`store`). The TRL callback that elicits during
training is `rewardlab.integrations.trl_callbacks`.
"""

from rewardlab.lazy_exports import lazy_exports

_EXPORTS = {
    "Rubric": "rewardlab.rubrics.model",
    "Criterion": "rewardlab.rubrics.model",
    "Choice": "rewardlab.rubrics.model",
    "RubricReward": "rewardlab.rubrics.grading",
    "generate_criteria": "rewardlab.rubrics.generate",
    "SelfProposedRubricReward": "rewardlab.rubrics.self_proposed",
    "RubricElicitor": "rewardlab.rubrics.elicit",
    "ElicitationOptions": "rewardlab.rubrics.elicit_options",
    "RubricStore": "rewardlab.rubrics.store",
}

__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
