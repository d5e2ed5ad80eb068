"""Every judge type end to end against the real local server (``rewardlab serve-model`` running
the embedded SmolLM2), through both HTTP backends, the CLI and the TRL adapter.

The model is tiny, so these tests check what must hold whatever it says: statuses, shapes,
probability sums, requests made and cached - not verdict quality. Each judge type goes through
one or two of the three HTTP backends (all three are checked against this server on their own
in test_server.py), which keeps the CPU time of the suite down.
"""

import asyncio
import json
import math

import pytest
import yaml

from rewardlab import Sample, Status, build
from rewardlab.cli import main
from rewardlab.integrations.trl import AsyncRewardFunc, as_reward_func

PROMPT = "What is 12 * 13?"
REFERENCE = "12 * 13 = 12 * 10 + 12 * 3 = 120 + 36 = 156."
COMPLETIONS = ["12 * 13 = 120 + 36 = 156.", "12 * 13 = 146.", "I am not sure.\n\nMaybe 150?"]


def backend(kind, url):
    if kind in ("openai", "http"):
        return {"type": kind, "base_url": url, "model": "smollm2", "guided_choice": True}
    return {
        "type": "litellm",
        "model": "openai/smollm2",
        "api_base": url,
        "logprobs": True,
        "guided_choice": True,
    }


def samples():
    return [
        Sample(prompt=PROMPT, completion=c, reference=REFERENCE, id=f"s{i}")
        for i, c in enumerate(COMPLETIONS)
    ]


def run(config, url, kind, cache=None):
    reward = build({**config, "backend": backend(kind, url), "client": {"cache": cache}})
    try:
        return reward.score(samples())
    finally:
        reward.close()


@pytest.mark.parametrize("kind", ["openai", "litellm"])
def test_pointwise_scale_and_yes_no(local_server, kind):
    for scale in ([1, 5], "yes_no"):
        scores = run({"type": "pointwise_judge", "scale": scale}, local_server, kind)
        assert all(s.ok and 0.0 <= s.value <= 1.0 for s in scores), scores
        assert all(s.details["verdict_source"] == "logprobs" for s in scores)
        assert all(math.isclose(sum(s.details["probabilities"].values()), 1.0, abs_tol=1e-5) for s in scores)
        assert all(s.usage.calls == 1 and s.usage.prompt_tokens > 0 for s in scores)


def test_pairwise_round_robin(local_server):
    scores = run({"type": "pairwise_judge"}, local_server, "http")
    assert all(s.ok for s in scores), scores
    # Each pair's two preferences add to 1, so the win rates of a group average 0.5.
    assert sum(s.value for s in scores) == pytest.approx(len(scores) / 2)
    assert all(len(s.details["comparisons"]) == 2 for s in scores)
    assert sum(s.usage.calls for s in scores) == 3 * 2  # three pairs, two orders each


def test_listwise_best(local_server):
    scores = run({"type": "listwise_judge", "mode": "best"}, local_server, "litellm")
    assert all(s.ok for s in scores), scores
    assert sum(s.value for s in scores) == pytest.approx(1.0)  # a distribution over the group
    assert scores[0].usage.calls == 2 and scores[1].usage.calls == 0


def test_listwise_scores_never_guesses(local_server):
    scores = run({"type": "listwise_judge", "mode": "scores", "max_tokens": 48}, local_server, "openai")
    for score in scores:
        assert score.status in (Status.OK, Status.PARSE_ERROR)
        if score.ok:
            assert 0.0 <= score.value <= 1.0 and 1.0 <= score.breakdown["score"] <= 10.0
        else:
            assert "no verdict" in score.reason or "entries" in score.reason or "cut off" in score.reason
            assert score.details["judge_answer"]


@pytest.mark.parametrize("kind", ["openai", "http"])
def test_reference_scaffolded_outcome_and_process(local_server, kind, tmp_path):
    # A generated scaffold through one backend, the reference as the scaffold through the other
    # (generation is the slow part on a CPU).
    scaffold = (
        {"scaffold": "generate", "scaffold_max_words": 20} if kind == "openai" else {"scaffold": "reference"}
    )
    config = {"type": "reference_scaffolded_judge", **scaffold}
    cache = str(tmp_path / "cache.sqlite")  # the process run reuses the outcome run's scaffold
    outcome = run(config, local_server, kind, cache)
    assert all(s.ok and 0.0 <= s.value <= 1.0 for s in outcome), outcome
    process = run({**config, "level": "process"}, local_server, kind, cache)
    assert all(s.ok for s in process), process
    if kind == "openai":  # the generated scaffold came from the cache the second time
        assert process[0].usage.cached_calls >= 1 and outcome[0].usage.cached_calls == 0
    for score, completion in zip(process, COMPLETIONS, strict=True):
        assert len(score.steps) == len(score.details["segments"]) >= 1
        assert all(-1.0 <= step <= 1.0 for step in score.steps)
        assert len(score.details["step_advantages"]) == len(score.steps)
        assert completion[slice(*score.details["segments"][0])].strip()
    assert process[2].details["segments"] == [[0, 14], [16, len(COMPLETIONS[2])]]


def test_reasoning_judges_parse_or_say_why(local_server):
    reward = build(
        {
            "type": "pointwise_judge",
            "reasoning": True,
            "max_tokens": 32,
            "backend": {"type": "openai", "base_url": local_server, "model": "smollm2"},
            "client": {"cache": None},
        }
    )
    for score in reward.score(samples()[:2]):
        assert score.status in (Status.OK, Status.PARSE_ERROR)
        if score.ok:
            assert score.details["verdict_source"] in ("json", "text", "bare")
        else:
            assert "could not read the judge's verdict" in score.reason and score.details["judge_answer"]


@pytest.mark.parametrize(
    ("config", "metric"),
    [
        ({"type": "pointwise_judge", "scale": [1, 5]}, "score"),
        ({"type": "pairwise_judge"}, "position_consistency"),
        ({"type": "listwise_judge", "mode": "best"}, "best_probability"),
        ({"type": "reference_scaffolded_judge", "scaffold": "reference"}, "score"),
    ],
    ids=["pointwise", "pairwise", "listwise", "scaffolded"],
)
def test_every_judge_as_an_async_trl_reward_function(local_server, config, metric):
    reward = build({**config, "backend": backend("openai", local_server), "client": {"cache": None}})
    func = as_reward_func(reward)
    assert isinstance(func, AsyncRewardFunc) and func.__name__ == config["type"]
    metrics, extra = {}, {}
    values = asyncio.run(
        func(
            prompts=[[{"role": "user", "content": PROMPT}]] * 2,
            completions=[[{"role": "assistant", "content": c}] for c in COMPLETIONS[:2]],
            completion_ids=[[1], [2]],
            answer=[REFERENCE] * 2,
            log_metric=metrics.__setitem__,
            log_extra=extra.__setitem__,
        )
    )
    assert len(values) == 2 and all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in values)
    assert f"{config['type']}/{metric}" in metrics and metrics[f"{config['type']}/failed_frac"] == 0.0
    assert extra[f"{config['type']}/status"] == ["ok", "ok"]


def test_every_judge_through_the_cli_with_a_persistent_cache(local_server, tmp_path):
    rows = tmp_path / "rollouts.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"id": f"r{i}", "prompt": PROMPT, "completion": c, "answer": REFERENCE}) + "\n"
            for i, c in enumerate(COMPLETIONS)
        )
    )
    judge = {"backend": backend("openai", local_server), "client": {"cache": str(tmp_path / "cache.sqlite")}}
    config = {
        "type": "combine",
        "name": "judges",
        "components": {
            "pointwise": {"type": "pointwise_judge", "scale": [1, 5], **judge},
            "pairwise": {"type": "pairwise_judge", **judge},
            "listwise": {"type": "listwise_judge", "mode": "best", **judge},
            "scaffolded": {"type": "reference_scaffolded_judge", "scaffold": "reference", **judge},
            "process": {
                "type": "reference_scaffolded_judge",
                "level": "process",
                "scaffold": "reference",
                **judge,
            },
        },
    }
    config_path = tmp_path / "judges.yaml"
    config_path.write_text(yaml.safe_dump(config))
    output = tmp_path / "scores.jsonl"
    arguments = ["score", str(rows), "--config", str(config_path), "--output", str(output), "--no-progress"]
    assert main(arguments) == 0
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["status"] for r in records] == ["ok"] * 3
    assert set(records[0]["breakdown"]) >= {"pointwise", "pairwise", "listwise", "scaffolded", "process"}
    first = json.loads(output.with_name(output.name + ".summary.json").read_text())
    assert first["model_calls"] > 0 and first["cache_misses"] > 0

    assert main([*arguments, "--overwrite"]) == 0
    second = json.loads(output.with_name(output.name + ".summary.json").read_text())
    assert second["model_calls"] == first["model_calls"]
    assert second["cache_hits"] == second["model_calls"] and second["prompt_tokens"] == 0
    rerun = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["value"] for r in rerun] == [r["value"] for r in records]
