"""A group-aware reward under a multi-process TRL run: TRL scores each process's share of the
batch, and a share may hold part of a group. Two real processes (gloo) each call the reward
function with half of every group; the values must be those of one process scoring the whole
batch."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from rewardlab import Reward, Sample, Score, build  # noqa: E402
from rewardlab.integrations.trl import as_reward_func, whole_groups  # noqa: E402


class GroupSize(Reward):
    """Each sample's value is the size of its group in the call (a stand-in for any group-aware reward)."""

    name = "group_size"
    scores_groups = True

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        sizes = Counter(sample.group_key() for sample in samples)
        return [Score(float(sizes[sample.group_key()])) for sample in samples]


class PerSample(GroupSize):
    name = "per_sample"
    scores_groups = False


PROMPTS = ["p", "p", "q", "q", "p", "p", "q", "q"]
COMPLETIONS = ["a b", "a b c d e f", "x", "x y z", "a", "a b c", "x y", "x y z w v u t"]
CORRECT = [True] * 8


def _share(rank: int) -> slice:
    return slice(rank * 4, rank * 4 + 4)


def _run(rank: int, world: int, rendezvous: str, out: str) -> None:
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world
    )
    try:
        share = _share(rank)
        kwargs = {"prompts": PROMPTS[share], "completions": COMPLETIONS[share], "correct": CORRECT[share]}
        values = {
            name: as_reward_func(reward)(**kwargs)
            for name, reward in [
                ("group_size", GroupSize()),
                ("per_sample", PerSample()),
                ("kimi", build({"type": "length", "mode": "kimi", "unit": "words"})),
            ]
        }
        Path(out, f"{rank}.json").write_text(json.dumps(values))
    finally:
        torch.distributed.destroy_process_group()


def test_group_rewards_see_whole_groups_across_processes(tmp_path):
    torch.multiprocessing.spawn(_run, args=(2, str(tmp_path / "rendezvous"), str(tmp_path)), nprocs=2)
    by_rank = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in range(2)]
    # Each process holds two completions of each prompt; the groups are four.
    assert [by_rank[rank]["group_size"] for rank in range(2)] == [[4.0] * 4, [4.0] * 4]
    # A reward that scores samples alone is not gathered: it sees its process's share.
    assert [by_rank[rank]["per_sample"] for rank in range(2)] == [[2.0] * 4, [2.0] * 4]
    # Kimi's length reward over the whole groups, as one process would compute it.
    whole = as_reward_func(build({"type": "length", "mode": "kimi", "unit": "words"}))(
        prompts=PROMPTS, completions=COMPLETIONS, correct=CORRECT
    )
    assert by_rank[0]["kimi"] + by_rank[1]["kimi"] == whole
    halves = [
        as_reward_func(build({"type": "length", "mode": "kimi", "unit": "words"}))(
            prompts=PROMPTS[_share(rank)],
            completions=COMPLETIONS[_share(rank)],
            correct=CORRECT[_share(rank)],
        )
        for rank in range(2)
    ]
    assert halves[0] + halves[1] != whole  # what each process alone would have computed


def test_whole_groups_outside_a_distributed_run_is_the_samples():
    samples = [Sample(prompt="p", completion="a")]
    assert whole_groups(samples) == (samples, slice(0, 1))


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"type": "length", "mode": "kimi"}, True),
        ({"type": "length", "mode": "linear_target", "target_length": 10}, False),
        ({"type": "length_controlled", "reward": {"type": "math_answer"}}, True),
        ({"type": "length_controlled", "reward": {"type": "math_answer"}, "fit": "batch"}, True),
        ({"type": "math_answer"}, False),
        ({"type": "pairwise_judge"}, True),
        ({"type": "pairwise_judge", "against": "baseline"}, False),
        ({"type": "listwise_judge"}, True),
        ({"type": "self_proposed_rubric"}, True),
        ({"type": "reference_scaffolded_judge", "level": "process"}, True),
        ({"type": "reference_scaffolded_judge"}, False),
        ({"type": "vote", "judge": {"type": "pairwise_judge", "temperature": 1.0}}, True),
        (
            {
                "type": "combine",
                "components": {"a": {"type": "math_answer"}, "b": {"type": "length", "mode": "kimi"}},
            },
            True,
        ),
        (
            {
                "type": "combine",
                "components": {"a": {"type": "math_answer"}, "b": {"type": "think_answer_format"}},
            },
            False,
        ),
        ({"type": "route", "by": "kind", "routes": {"m": {"type": "length", "mode": "kimi"}}}, True),
        (
            {"type": "fallback", "rewards": [{"type": "math_answer"}, {"type": "length", "mode": "kimi"}]},
            True,
        ),
        ({"type": "final_answer", "reward": {"type": "length", "mode": "kimi"}}, True),
        (
            {
                "type": "ensemble",
                "members": {"a": {"type": "math_answer"}, "b": {"type": "think_answer_format"}},
                "normalize": "batch",
            },
            True,
        ),
        (
            {
                "type": "ensemble",
                "members": {"a": {"type": "math_answer"}, "b": {"type": "think_answer_format"}},
            },
            False,
        ),
    ],
)
def test_rewards_that_grade_groups_say_so(config, expected):
    reward = build(config)
    try:
        assert reward.scores_groups is expected
    finally:
        reward.close()
