"""JudgeBench (ScalerLab/JudgeBench): which of two responses to a hard question is right.

Each pair is one question from MMLU-Pro, LiveBench or LiveCodeBench with two responses of one
model, exactly one of them correct; the label is ``"A>B"`` or ``"B>A"``. The metric follows
``compute_final_metrics`` in ``utils/metrics.py`` with ``reverse_order=True`` (the default in
``run_judge.py``): the judge decides the pair twice, once with the responses swapped, and the
second decision is flipped back. Each decision that names the labelled winner counts +1, each
that names the other response -1, anything else (``"A=B"``, no decision) 0; the pair is right
when the sum is positive. So a split verdict is wrong, but one right decision and one tie is
right. Accuracy is per category (``run_judge.py`` groups ``source`` by prefix) and overall over
all pairs, not the mean of the categories.

A rewardlab reward scores each response on its own (a pairwise judge sees both: they share a
``group_id``), and the pair's verdict is the higher score; equal scores are a tie, which is
wrong. That is what the reference computes for a reward model in its two games: its
``reward_model`` judges decide ``'A>B' if score_A > score_B else 'B>A'``, so equal scores
give ``B>A`` in both orders, which flipped back is a split. (Under ``--single_game`` the same
tie would go to B; the published reward-model outputs all ran both games.)

`JudgeBench.published_scores` reads the reference's output files (the pairs with their
``judgments``) into scores that encode each pair's combined verdict, so that `evaluate` gives
exactly the reference's accuracy; see there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from rewardlab.benchmarks.items import Benchmark, Item, ItemScores, Result
from rewardlab.benchmarks.records import read_records, text_field
from rewardlab.errors import DataFormatError
from rewardlab.rewards.contract import Score, Status

Verdict = Literal["A>B", "B>A", "tie"]

LABELS = ("A>B", "B>A")

#: ``source`` prefix -> category, as ``run_judge.py`` reports them (in this order).
CATEGORIES = {
    "mmlu-pro": "knowledge",
    "livebench-reasoning": "reasoning",
    "livebench-math": "math",
    "livecodebench": "coding",
}

_PAIR_FIELDS = ("pair_id", "source", "question", "response_A", "response_B", "label")

#: What a published verdict becomes: the scores of response A and response B.
_VERDICT_SCORES: dict[Verdict, tuple[float, float]] = {
    "A>B": (1.0, 0.0),
    "B>A": (0.0, 1.0),
    "tie": (0.5, 0.5),
}


def category(source: str) -> str:
    """The category of a pair's ``source`` (``mmlu-pro-law`` -> ``knowledge``); a source of no
    known category is its own."""
    return next((name for prefix, name in CATEGORIES.items() if source.startswith(prefix)), source)


def flip(decision: str | None) -> str | None:
    """A decision on the swapped pair, read in the original order (``flip_judgment``)."""
    return {"A>B": "B>A", "B>A": "A>B"}.get(decision, decision) if decision is not None else None


def combined_verdict(decisions: Sequence[str | None]) -> Verdict:
    """The pair's verdict from its games' decisions, each already in the original order: the
    response more decisions prefer, a tie when they cancel or none prefers either."""
    votes = sum({"A>B": 1, "B>A": -1}.get(decision, 0) for decision in decisions if decision is not None)
    return "A>B" if votes > 0 else "B>A" if votes < 0 else "tie"


def score_verdict(score_a: float, score_b: float) -> Verdict:
    """A reward's verdict on a pair: the higher-scored response; equal scores are a tie."""
    return "A>B" if score_a > score_b else "B>A" if score_a < score_b else "tie"


def _item(record: Mapping[str, Any], where: str) -> Item:
    pair_id, source, question, response_a, response_b, label = (
        text_field(record, name, where) for name in _PAIR_FIELDS
    )
    if label not in LABELS:
        raise DataFormatError(
            f"{where} (pair {pair_id!r}): field 'label': expected A>B or B>A, got {label!r}"
        )
    return Item(
        id=pair_id,
        subset=category(source),
        prompt=question,
        candidates=(response_a, response_b),
        gold={"label": label},
        fields={"source": source},
    )


def _decision(judgment: Any, where: str) -> str | None:
    if judgment is None:  # the judge raised: run_judge.py stores None
        return None
    if not isinstance(judgment, Mapping) or "decision" not in judgment:
        raise DataFormatError(f"{where}: field 'judgments': each game needs a 'decision' (or is null)")
    decision = judgment["decision"]
    if decision is not None and not isinstance(decision, str):
        raise DataFormatError(
            f"{where}: field 'judgments': a decision must be text or null, got {decision!r}"
        )
    return decision


def _game_decisions(record: Mapping[str, Any], where: str) -> list[str | None]:
    """The decisions of a published pair's games, the second flipped back to the original order."""
    judgments = record.get("judgments")
    if not isinstance(judgments, list) or len(judgments) not in (1, 2):
        problem = (
            "missing"
            if "judgments" not in record
            else f"expected a list of 1 or 2 games, got {_shape(judgments)}"
        )
        raise DataFormatError(f"{where}: field 'judgments': {problem}")
    decisions = [_decision(judgment, where) for judgment in judgments]
    return decisions[:1] + [flip(decision) for decision in decisions[1:]]


class JudgeBench(Benchmark):
    """JudgeBench's pairs and its two-game accuracy per category and overall.

    Example:
        >>> bench = JudgeBench()
        >>> items = bench.load(Path("data/dataset=judgebench,response_model=gpt-4o.jsonl"))  # doctest: +SKIP
        >>> bench.evaluate(items, bench.published_scores(outputs, items)).metrics  # doctest: +SKIP
    """

    name = "judgebench"

    def load(self, path: Path | None) -> list[Item]:
        """The pairs of a JudgeBench file (``data/dataset=judgebench,...jsonl``), or of the same
        records as JSON, Parquet or a saved ``datasets`` directory (`read_records`)."""
        if path is None:
            raise DataFormatError("judgebench needs a data file (data/dataset=judgebench,...jsonl)")
        items: list[Item] = []
        seen: set[str] = set()
        for record in read_records(Path(path)):
            item = _item(record.data, record.where)
            if item.id in seen:
                raise DataFormatError(f"{record.where}: field 'pair_id': {item.id!r} appears twice")
            seen.add(item.id)
            items.append(item)
        return items

    def evaluate(self, items: Sequence[Item], scores: ItemScores) -> Result:
        if not items:
            raise ValueError("judgebench: no pairs to evaluate")
        failed = 0
        verdicts: dict[str, list[tuple[Verdict | None, str]]] = {}  # subset -> (verdict, label)
        distributions: dict[str, list[float]] = {"chosen": [], "rejected": []}
        for item in items:
            given = list(scores.get(item.id, ()))[:2]
            values = [score.value for score in given if score.ok and score.value is not None]
            failed += 2 - len(values)
            label = item.gold["label"]
            verdict = score_verdict(*values) if len(values) == 2 else None
            verdicts.setdefault(item.subset, []).append((verdict, label))
            if verdict is not None:
                winner = 0 if label == "A>B" else 1
                distributions["chosen"].append(values[winner])
                distributions["rejected"].append(values[1 - winner])
        order = list(CATEGORIES.values())
        ranked = sorted(verdicts, key=lambda s: (order.index(s) if s in order else len(order), s))
        overall = _figures([pair for subset in ranked for pair in verdicts[subset]])
        notes = []
        if overall["ties"]:
            notes.append(
                f"{overall['ties']:.0%} of pairs were ties (equal scores, or a split verdict), "
                "counted wrong as in JudgeBench's two games"
            )
        return Result(
            benchmark=self.name,
            metrics={"accuracy": overall["accuracy"], "ties": overall["ties"]},
            subsets={subset: _figures(verdicts[subset]) for subset in ranked},
            failed=failed,
            distributions=distributions,
            notes=notes,
            subset_figure="accuracy",
        )

    def published_scores(self, path: Path, items: Sequence[Item]) -> dict[str, list[Score]]:
        """Scores from a JudgeBench output file (``outputs/dataset=judgebench,...,judge_name=...
        jsonl``: the pairs with a ``judgments`` list of one game, or two with the second on the
        swapped pair).

        Each pair's games are combined as ``compute_final_metrics`` combines them
        (`combined_verdict`), and the verdict becomes scores for responses A and B: 1 and 0 for
        ``A>B``, 0 and 1 for ``B>A``, 0.5 and 0.5 for a tie. `evaluate` then finds the pair right
        exactly when the reference's count is positive, so it reproduces the reference's
        accuracy. A pair for which no game gave a decision gets failed scores (``parse_error``):
        the reference counts it as not right, and so does `evaluate`. Each score keeps the
        games' decisions in ``details["decisions"]``.
        """
        wanted = {item.id: item for item in items}
        published: dict[str, list[Score]] = {}
        for output in read_records(Path(path)):
            record, where = output.data, output.where
            pair_id = text_field(record, "pair_id", where)
            if pair_id not in wanted:
                continue
            label = record.get("label", wanted[pair_id].gold["label"])
            if label != wanted[pair_id].gold["label"]:
                raise DataFormatError(
                    f"{where} (pair {pair_id!r}): field 'label': {label!r} here, "
                    f"{wanted[pair_id].gold['label']!r} in the data; are these outputs for other data?"
                )
            decisions = _game_decisions(record, f"{where} (pair {pair_id!r})")
            details = {"decisions": decisions}
            if all(decision is None for decision in decisions):
                published[pair_id] = [
                    Score.failure(Status.PARSE_ERROR, "no game gave a decision", details=details)
                    for _ in range(2)
                ]
                continue
            score_a, score_b = _VERDICT_SCORES[combined_verdict(decisions)]
            published[pair_id] = [Score(score_a, details=details), Score(score_b, details=details)]
        return published


def _figures(pairs: Sequence[tuple[Verdict | None, str]]) -> dict[str, float]:
    """Accuracy and the share of ties over (verdict, label) pairs; no verdict (a failed score)
    is wrong."""
    return {
        "items": len(pairs),
        "accuracy": sum(verdict == label for verdict, label in pairs) / len(pairs),
        "ties": sum(verdict == "tie" for verdict, _ in pairs) / len(pairs),
    }


def _shape(value: Any) -> str:
    return f"a list of {len(value)}" if isinstance(value, list) else type(value).__name__
