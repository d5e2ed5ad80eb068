"""`pairwise_judge`'s ``check_transitivity``: intransitive triads counted within each group from a
scripted judge whose preferences are written down here (a rock-paper-scissors cycle, a tie, a
transitive rest), so the expected counts are read off the table, not computed by the code under
test; then the same through the TRL adapter, ``rewardlab score`` and ``rewardlab serve``."""

import asyncio
import json

import pytest

from rewardlab import ConfigError, Sample, build
from rewardlab.cli import main
from rewardlab.integrations.trl import as_reward_func
from rewardlab.serving.limits import ServeOptions
from rewardlab.serving.serve import start_server
from rewardlab.testing import Reply
from tests.conftest import openai_backend
from tests.judges.test_judges_scripted import fenced
from tests.serving.conftest import post, wait_ready

#: (winner, loser) pairs; a pair in neither order is a tie. rock, paper and scissors form a cycle;
#: dud loses to all three. In the second group x beats y, z beats x, and y and z tie.
BEATS = {
    ("paper", "rock"), ("scissors", "paper"), ("rock", "scissors"),
    ("rock", "dud"), ("paper", "dud"), ("scissors", "dud"),
    ("x", "y"), ("z", "x"),
}  # fmt: skip


def judge_by_table(body):
    """The same winner in both orders, whatever its position."""
    ((_, a),) = fenced(body, "RESPONSE A")
    ((_, b),) = fenced(body, "RESPONSE B")
    winner = "A" if (a, b) in BEATS else "B" if (b, a) in BEATS else "tie"
    return Reply(text=f'{{"winner": "{winner}"}}')


def pairwise(server, **options):
    return build(
        {
            "type": "pairwise_judge",
            "backend": openai_backend(server.url),
            "client": {"cache": None, "max_attempts": 1},
            **options,
        }
    )


def groups():
    first = [Sample(prompt="q1", completion=c, id=c) for c in ("rock", "paper", "scissors", "dud")]
    second = [Sample(prompt="q2", completion=c, id=c) for c in ("x", "y", "z")]
    return first + second


def test_counts_the_cycle_among_four_triads_and_the_tie_apart(scripted):
    scripted.default = judge_by_table
    scores = pairwise(scripted, check_transitivity=True).score(groups())
    rock, paper, scissors, dud, x, _, _ = scores
    assert rock.details["transitivity"] == {
        "triads": 4,
        "tied_triads": 0,
        "intransitive": 1,
        "fraction": 0.25,
        "in_cycles": 1,
        "cycles": [["rock", "paper", "scissors"]],
    }
    assert dud.details["transitivity"]["in_cycles"] == 0
    assert [s.breakdown["intransitive_fraction"] for s in (rock, paper, scissors, dud)] == [0.25] * 4
    # x > y, z > x, y = z: checked, tied, not a cycle.
    assert x.details["transitivity"] == {
        "triads": 1,
        "tied_triads": 1,
        "intransitive": 0,
        "fraction": 0.0,
        "in_cycles": 0,
        "cycles": [],
    }
    # Win rates are untouched: rock beats scissors and dud, loses to paper.
    assert rock.value == pytest.approx(2 / 3) and dud.value == 0.0
    assert len(scripted.requests) == 2 * (6 + 3)  # no calls beyond the comparisons


def test_off_by_default_and_a_group_of_two_has_no_triads(scripted):
    scripted.default = judge_by_table
    scores = pairwise(scripted).score(groups())
    assert all("transitivity" not in s.details and "intransitive_fraction" not in s.breakdown for s in scores)
    pair = pairwise(scripted, check_transitivity=True).score(
        [Sample(prompt="q", completion="rock"), Sample(prompt="q", completion="paper")]
    )
    assert (
        pair[0].details["transitivity"]["triads"] == 0 and pair[0].details["transitivity"]["fraction"] is None
    )
    assert "intransitive_fraction" not in pair[0].breakdown


def test_a_failed_comparison_leaves_its_triads_unchecked(scripted):
    def answer(body):
        ((_, a),) = fenced(body, "RESPONSE A")
        ((_, b),) = fenced(body, "RESPONSE B")
        return Reply(status=400) if {a, b} == {"rock", "dud"} else judge_by_table(body)

    scripted.default = answer
    scores = pairwise(scripted, check_transitivity=True).score(groups()[:4])
    # Of the four triads, the two holding rock-dud cannot be checked.
    assert scores[1].details["transitivity"]["triads"] == 2
    assert scores[1].details["transitivity"]["intransitive"] == 1


def test_needs_a_group():
    with pytest.raises(ConfigError, match="check_transitivity: needs against: group"):
        build({"type": "pairwise_judge", "against": "baseline", "check_transitivity": True})


def test_through_the_trl_adapter_as_a_metric(scripted):
    scripted.default = judge_by_table
    func = as_reward_func(pairwise(scripted, check_transitivity=True))
    logged = {}
    result = func(
        prompts=["q"] * 3,
        completions=["rock", "paper", "scissors"],
        completion_ids=[[1], [2], [3]],
        log_metric=logged.__setitem__,
    )
    values = asyncio.run(result) if asyncio.iscoroutine(result) else result
    assert values == [0.5, 0.5, 0.5]
    assert logged["pairwise_judge/intransitive_fraction"] == 1.0


def test_through_rewardlab_score_and_serve(scripted, tmp_path):
    scripted.default = judge_by_table
    source = tmp_path / "in.jsonl"
    rows = [{"id": c, "prompt": "q", "completion": c} for c in ("rock", "paper", "scissors", "dud")]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = tmp_path / "reward.yaml"
    config.write_text(
        "type: pairwise_judge\ncheck_transitivity: true\n"
        f"backend: {{type: openai, base_url: '{scripted.url}', model: scripted}}\n"
        "client: {cache: null, max_attempts: 1}\n"
    )
    output = tmp_path / "scores.jsonl"
    assert (
        main(["score", str(source), "--config", str(config), "--output", str(output), "--no-progress"]) == 0
    )
    records = {r["id"]: r for r in map(json.loads, output.read_text().splitlines())}
    assert {k: r["details"]["transitivity"]["in_cycles"] for k, r in records.items()} == {
        "rock": 1, "paper": 1, "scissors": 1, "dud": 0
    }  # fmt: skip

    server = start_server(build(config), options=ServeOptions())
    try:
        wait_ready(server.url)
        status, _, answer = post(server.url, "/score", {"samples": rows[:3]})
    finally:
        server.stop()
    assert status == 200
    assert [s["breakdown"]["intransitive_fraction"] for s in answer["scores"]] == [1.0, 1.0, 1.0]
