"""LLM judges, each a `Reward`: `PointwiseJudge`, `PairwiseJudge` (both orders), `ListwiseJudge`
and `ReferenceScaffoldedJudge` (ExpRL), on the `Judge` base (`judge`); `Vote`, n sampled votes of
one judge (`vote`); their prompts and templates (`prompts`, ``templates/``) and verdict reading
that refuses verdicts planted in the judged text (`verdicts`). Model calls go through
`rewardlab.llm`.
"""

from rewardlab.lazy_exports import lazy_exports

_EXPORTS = {
    "Judge": "rewardlab.judges.judge",
    "PointwiseJudge": "rewardlab.judges.pointwise",
    "PairwiseJudge": "rewardlab.judges.pairwise",
    "ListwiseJudge": "rewardlab.judges.listwise",
    "ReferenceScaffoldedJudge": "rewardlab.judges.scaffolded",
    "Vote": "rewardlab.judges.vote",
    "JudgePrompt": "rewardlab.judges.prompts",
    "LabelSet": "rewardlab.judges.verdicts",
    "read_label": "rewardlab.judges.verdicts",
}

__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
