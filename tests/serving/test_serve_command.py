"""What ``rewardlab serve`` runs (`add_serve_arguments` + `run_serve`): a real server process
from a YAML config, and one-line errors with exit status 2 for what it cannot serve."""

import argparse
import os
import select
import signal
import subprocess
import sys

import pytest

from rewardlab.serving.serve import add_serve_arguments, run_serve
from tests.serving.conftest import post, wait_ready

SERVE = [sys.executable, "-m", "rewardlab.cli", "serve"]


CLOSING_REWARD = """
from pathlib import Path

import rewardlab


@rewardlab.register("echo_length")
class EchoLength(rewardlab.RuleReward):
    def __init__(self, closed_marker, name="echo_length"):
        self.closed_marker = closed_marker
        self.name = name

    def check(self, sample):
        return rewardlab.Score(value=float(len(sample.completion_text)))

    def close(self):
        Path(self.closed_marker).write_text("closed")
"""


def test_serves_a_config_and_closes_the_reward_on_sigterm(tmp_path):
    (tmp_path / "closing_reward.py").write_text(CLOSING_REWARD)
    marker = tmp_path / "closed"
    config = tmp_path / "reward.yaml"
    config.write_text(f"type: echo_length\nname: echo\nclosed_marker: {marker}\n")
    command = [*SERVE, "--config", str(config), "--port", "0", "--max-batch", "2"]
    command += ["--import", "closing_reward"]
    env = {**os.environ, "REWARDLAB_SERVE_TOKEN": "from-env", "PYTHONPATH": str(tmp_path)}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert select.select([process.stdout], [], [], 60)[0], "no announcement within 60 s"
        line = process.stdout.readline()
        assert "serving 'echo' at http://127.0.0.1:" in line and "bearer token required" in line
        url = line.split(" at ")[1].split()[0]
        wait_ready(url)
        samples = [{"completion": "Paris", "id": "q1"}]
        assert post(url, "/score", {"samples": samples})[0] == 401
        status, _, answer = post(url, "/score", {"samples": samples}, authorization="Bearer from-env")
        assert status == 200 and answer["reward"] == "echo" and answer["scores"][0]["value"] == 5.0
        assert post(url, "/score", {"samples": samples * 3}, authorization="Bearer from-env")[0] == 413
        assert not marker.exists()
    finally:
        process.terminate()
        # uvicorn shuts down gracefully, then re-raises the SIGTERM: the status says "terminated"
        # either way, the reward's close() says it was graceful.
        assert process.wait(timeout=30) == -signal.SIGTERM
    assert marker.read_text() == "closed"


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (["--config", "missing.yaml"], "cannot read config file missing.yaml"),
        (["--config", "{config}", "--import", "no_such_module_here"], "--import no_such_module_here"),
        (["--config", "{config}", "--max-concurrency", "0"], "max_concurrency must be at least 1"),
        (["--config", "{config}", "--token", ""], "token must not be empty"),
    ],
)
def test_mistakes_exit_2_with_one_line(tmp_path, capsys, arguments, problem):
    config = tmp_path / "reward.yaml"
    config.write_text("type: string_match\n")
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    args = parser.parse_args([a.format(config=config) for a in arguments])
    assert run_serve(args) == 2
    error = capsys.readouterr().err
    assert error.startswith("rewardlab serve: error: ") and problem in error and error.count("\n") == 1
