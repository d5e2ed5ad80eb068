"""`TextSimilarityReward`: how close the answer is to the reference answers, by one metric.

The metrics and where each is transcribed from:

- ``exact_match`` and ``token_f1``: the official SQuAD v2.0 evaluation script (`squad`); with
  several references, the best one counts (the script's ``max`` over gold answers).
- ``rouge_l``: Google's ``rouge-score`` (`rouge`); the best reference counts, as its
  ``score_multi`` does.
- ``bleu`` and ``chrf``: sacrebleu's ``sentence_bleu`` (13a tokenizer, ``exp`` smoothing,
  effective order) and ``sentence_chrf`` (character 6-grams, beta 2), which take every reference
  at once: BLEU clips n-gram counts by the most any reference has and takes the closest
  reference length, chrF the best reference. sacrebleu reports 0-100; the value here is that
  over 100, so that every metric lies in [0, 1].

Every metric reads the answer region (`rewardlab.rewards.answer_region`): reasoning left out,
the ``<answer>`` block when there is one. A completion without an answer scores 0.0 with the
reason, as ``string_match`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import model_validator

from rewardlab.errors import MissingDependency
from rewardlab.optional import require
from rewardlab.rewards.contract import Sample, Score
from rewardlab.rewards.options import OptionError, RuleOptions, takes_options
from rewardlab.rewards.rule import RuleReward, reference_answers
from rewardlab.rewards.sample_workers import DEFAULT_SAMPLE_BUDGET_S
from rewardlab.rewards.text_similarity.rouge import rouge_l
from rewardlab.rewards.text_similarity.squad import exact_match, token_f1

Metric = Literal["token_f1", "exact_match", "rouge_l", "bleu", "chrf"]
#: Metrics scored against each reference alone; the best reference counts.
_PER_REFERENCE: dict[str, Callable[[str, str], float]] = {
    "token_f1": token_f1,
    "exact_match": exact_match,
    "rouge_l": rouge_l,
}
#: Metrics that need the ``similarity`` extra (sacrebleu).
SACREBLEU_METRICS = frozenset({"bleu", "chrf"})


def sacrebleu_score(metric: str, prediction: str, references: list[str]) -> float:
    """sacrebleu's sentence BLEU or chrF of ``prediction`` against every reference, over 100 and
    at most 1 (BLEU of a text against itself is 100.00000000000004: a geometric mean taken
    through logarithms)."""
    sacrebleu = require("sacrebleu", f"the text_similarity reward's {metric!r} metric")
    if metric == "bleu":
        score = sacrebleu.sentence_bleu(prediction, references).score
    else:
        score = sacrebleu.sentence_chrf(prediction, references).score
    return min(1.0, float(score) / 100)


class TextSimilarityOptions(RuleOptions):
    """Options of `TextSimilarityReward`."""

    metric: Metric = "token_f1"
    """``token_f1`` and ``exact_match`` (SQuAD), ``rouge_l``, ``bleu`` or ``chrf`` (sacrebleu:
    ``pip install 'rewardlab[similarity]'``)."""
    references_field: str | None = None
    """Also compare with the references listed in ``sample.fields[references_field]`` (the
    several gold answers of SQuAD or Natural Questions, the several summaries of a news
    article). The field is then required; ``sample.reference``, when set, is one more."""

    @model_validator(mode="after")
    def _sacrebleu_installed(self) -> TextSimilarityOptions:
        if self.metric in SACREBLEU_METRICS:
            try:
                require("sacrebleu", f"the text_similarity reward's {self.metric!r} metric")
            except MissingDependency as error:
                raise OptionError("metric", str(error)) from None
        return self


@takes_options(TextSimilarityOptions)
class TextSimilarityReward(RuleReward):
    """The similarity of the answer to the reference answers, in [0, 1], by one metric.

    Options: `TextSimilarityOptions` (the metric, where the references are), and where the answer
    is read and how checks run (`RuleOptions`).

    ``details`` holds the metric, the answer compared and the reference that scored best (for
    BLEU and chrF, which score all references at once, none). A sample without any reference has
    status ``invalid_input``.

    Example:
        >>> from rewardlab import Sample
        >>> reward = TextSimilarityReward(metric="token_f1", execution="inline")
        >>> sample = Sample(completion="<answer>the Eiffel Tower, Paris</answer>", reference="Eiffel Tower")
        >>> reward.score([sample])[0].value
        0.8
    """

    name = "text_similarity"

    def __init__(
        self,
        *,
        metric: Metric = "token_f1",
        references_field: str | None = None,
        answer_region: Any = None,
        execution: Literal["worker", "inline"] = "worker",
        sample_budget_s: float = DEFAULT_SAMPLE_BUDGET_S,
        name: str | None = None,
    ):
        self.configure_rule(answer_region=answer_region, execution=execution, sample_budget_s=sample_budget_s)
        self.metric = metric
        self.references_field = references_field
        if name is not None:
            self.name = name

    def check(self, sample: Sample) -> Score:
        references = reference_answers(
            sample, self.references_field, reward="text_similarity", noun="reference answer"
        )
        region = self.answer(sample)
        details: dict[str, Any] = {"metric": self.metric, "answer_region": region.source}
        if region.text is None:
            return Score(0.0, reason=region.reason, breakdown={self.metric: 0.0}, details=details)
        details["compared"] = region.text[:200]
        if self.metric in SACREBLEU_METRICS:
            value = sacrebleu_score(self.metric, region.text, references)
        else:
            scores = [_PER_REFERENCE[self.metric](region.text, reference) for reference in references]
            best = max(range(len(scores)), key=scores.__getitem__)
            value = scores[best]
            details["best_reference"] = best
        return Score(value, breakdown={self.metric: value}, details=details)
