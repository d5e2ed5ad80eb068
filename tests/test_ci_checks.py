"""The checks CI runs after README command 1 (`.ci/`) cover what they claim to."""

import importlib.util
import json
from pathlib import Path

from rewardlab.rewards.registry import available, reward_class

CI = Path(__file__).resolve().parent.parent / ".ci"


def load(name):
    spec = importlib.util.spec_from_file_location(name, CI / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_registered_reward_has_a_case():
    # Registered by this package (tests register rewards of their own too).
    builtin = {name for name in available() if reward_class(name).__module__.startswith("rewardlab.")}
    assert builtin <= set(load("score_every_reward").CASES)


def test_the_main_job_check_wants_every_route_scored(tmp_path, capsys):
    check = load("check_main_job")
    config = tmp_path / "reward.yaml"
    config.write_text("type: route\nby: task\nroutes:\n  a: {type: math_answer}\n  b: {type: math_answer}\n")
    scores = tmp_path / "scores.jsonl"
    records = [
        {"status": "ok", "details": {"route": "a"}},
        {"status": "backend_error", "details": {"route": "b"}},
    ]
    scores.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert check.main(scores, config) == 1
    assert "route 'b' scored no row" in capsys.readouterr().err
    records[1]["status"] = "ok"
    scores.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert check.main(scores, config) == 0
