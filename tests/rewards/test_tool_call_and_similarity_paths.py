"""``tool_call`` and ``text_similarity`` through every way rewardlab is used: the TRL adapter
(dataset columns of lists, conversational completions with ``tool_calls``), ``rewardlab score``
on a JSONL file, and a real reward server on 127.0.0.1 - the same values and statuses each way."""

import json

import pytest
import yaml

from rewardlab import build
from rewardlab.cli import main
from rewardlab.integrations.trl import as_reward_func
from rewardlab.serving.serve import start_server
from tests.serving.conftest import post, wait_ready

WEATHER = {"name": "get_weather", "parameters": {"properties": {"city": {"type": "string"}}}}
TOOLS = [{"type": "function", "function": WEATHER}]
GROUND_TRUTH = [{"get_weather": {"city": ["Paris", "Paris, France"]}}]


HERMES_CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}


def assistant_calls(arguments_json):
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": arguments_json}}
            ],
        }
    ]


COMPLETIONS = [
    assistant_calls('{"city": "paris, france"}'),  # right
    assistant_calls('{"city": "Lyon"}'),  # wrong
    assistant_calls('{"city": "Paris"'),  # not JSON: parse_error
    [{"role": "assistant", "content": f"<tool_call>{json.dumps(HERMES_CALL)}</tool_call>"}],
]
EXPECTED = [(1.0, "ok"), (0.0, "ok"), (None, "parse_error"), (1.0, "ok")]
TOOL_CONFIG = {"type": "tool_call", "name": "calls"}
SIMILARITY_CONFIG = {"type": "text_similarity", "metric": "token_f1", "references_field": "aliases"}
ANSWERS = ["<think>Lyon?</think><answer>The Eiffel Tower</answer>", "It is in Rome.", "Eiffel"]
# "eiffel tower" vs "eiffel tower" -> 1; no shared token -> 0; "eiffel" vs "eiffel tower" -> 2/3.
SIMILARITY_EXPECTED = [1.0, 0.0, pytest.approx(2 / 3)]


async def test_through_the_trl_adapter():
    # Rule rewards check in worker processes, so the adapter hands TRL an async function.
    calls = as_reward_func(build(TOOL_CONFIG))
    values = await calls(
        prompts=[[{"role": "user", "content": "Weather in Paris?"}]] * 4,
        completions=COMPLETIONS,
        ground_truth=[GROUND_TRUTH] * 4,  # a column of lists: the adapter passes str(value)
        tools=[TOOLS] * 4,
    )
    assert values == [value for value, _ in EXPECTED]  # a parse error is None (on_error="none")
    similarity = as_reward_func(build(SIMILARITY_CONFIG))
    values = await similarity(
        prompts=["Where?"] * 3, completions=ANSWERS, answer=["Eiffel Tower"] * 3, aliases=[["the tower"]] * 3
    )
    assert values == SIMILARITY_EXPECTED


def test_through_rewardlab_score(tmp_path):
    reference = json.dumps(GROUND_TRUTH)
    rows = [
        {"id": f"r{i}", "completion": c, "reference": reference, "tools": TOOLS}
        for i, c in enumerate(COMPLETIONS)
    ]
    rows += [
        {"id": f"s{i}", "completion": a, "reference": "Eiffel Tower", "aliases": ["the tower"], "task": "qa"}
        for i, a in enumerate(ANSWERS)
    ]
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps({"prompt": "?", **row}) + "\n" for row in rows))
    config = tmp_path / "reward.yaml"
    route = {"type": "route", "by": "task", "default": TOOL_CONFIG, "routes": {"qa": SIMILARITY_CONFIG}}
    config.write_text(yaml.safe_dump(route))
    output = tmp_path / "scores.jsonl"
    status = main(["score", str(source), "--config", str(config), "--output", str(output), "--no-progress"])
    assert status == 0
    records = {record["id"]: record for record in map(json.loads, output.read_text().splitlines())}
    assert [(records[f"r{i}"]["value"], records[f"r{i}"]["status"]) for i in range(4)] == EXPECTED
    reason = records["r2"]["reason"]
    assert "'r2'" in reason and "completion[0].tool_calls[0].function.arguments: not JSON" in reason
    assert [records[f"s{i}"]["value"] for i in range(3)] == SIMILARITY_EXPECTED


def served_scores(config, samples):
    """The scores a real reward server on 127.0.0.1 answers for ``samples``."""
    with start_server(build(config)) as server:
        wait_ready(server.url)
        status, _, answer = post(server.url, "/score", {"samples": samples})
    assert status == 200, answer
    return answer["scores"]


def test_through_a_reward_server():
    reference = json.dumps(GROUND_TRUTH)
    samples = [
        {"id": f"q{i}", "completion": c, "reference": reference, "fields": {"tools": TOOLS}}
        for i, c in enumerate(COMPLETIONS)
    ]
    scores = served_scores(TOOL_CONFIG, samples)
    assert [(s["value"], s["status"]) for s in scores] == EXPECTED
    assert scores[0]["details"]["calls"][0]["matched"] == "completion[0].tool_calls[0].function"
    assert scores[2]["reason"].startswith(
        "sample 'q2': completion[0].tool_calls[0].function.arguments: not JSON"
    )
    samples = [
        {"completion": a, "reference": "Eiffel Tower", "fields": {"aliases": ["the tower"]}} for a in ANSWERS
    ]
    assert [s["value"] for s in served_scores(SIMILARITY_CONFIG, samples)] == SIMILARITY_EXPECTED
