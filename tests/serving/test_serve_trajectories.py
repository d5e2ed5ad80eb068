"""``rewardlab serve`` over real HTTP with agent trajectories: message-list completions with tool
calls and results, and the environment's final state in the sample's fields, scored by the
trajectory rewards exactly as in process."""

from rewardlab import Sample, build
from tests.conftest import tool_call
from tests.serving.conftest import post


def rollout(n):
    return [
        {"role": "assistant", "content": "Pressing.", "tool_calls": [tool_call("press", n=n)]},
        {"role": "tool", "name": "press", "content": f"pressed {n}"},
        {"role": "assistant", "content": "Done."},
    ]


SAMPLES = [
    {"id": "right", "prompt": [{"role": "user", "content": "Press 3."}], "completion": rollout(3),
     "fields": {"environment_state": {"pressed": [3]}, "expected_state": {"pressed": [3]}}},
    {"id": "wrong", "prompt": "Press 3.", "completion": rollout(2),
     "fields": {"environment_state": {"pressed": [2]}, "expected_state": {"pressed": [3]}}},
    {"id": "no-state", "prompt": "Press 3.", "completion": rollout(3),
     "fields": {"expected_state": {"pressed": [3]}}},
]  # fmt: skip


def test_serve_scores_trajectories_and_states(serve):
    reward = build(
        {
            "type": "combine",
            "name": "agent",
            "mode": "min",
            "components": {
                "state": {"type": "environment_state"},
                "turns": {"type": "per_turn", "reward": {"type": "regex_match", "pattern": "press|Done"}},
            },
        }
    )
    server = serve(reward)
    status, _, body = post(server.url, "/score", {"samples": SAMPLES})
    assert status == 200 and body["reward"] == "agent"
    scores = {score["id"]: score for score in body["scores"]}
    assert scores["right"]["value"] == 1.0 and scores["right"]["breakdown"] == {"state": 1.0, "turns": 1.0}
    assert scores["wrong"]["value"] == 0.0 and scores["wrong"]["breakdown"] == {"state": 0.0, "turns": 1.0}
    assert scores["no-state"]["status"] == "invalid_input"
    assert "environment_state: is missing" in scores["no-state"]["reason"]
    local = reward.score([Sample(**sample) for sample in SAMPLES])
    assert [{k: v for k, v in s.items() if k != "id"} for s in body["scores"]] == [s.to_dict() for s in local]
