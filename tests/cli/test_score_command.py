"""``rewardlab score`` end to end: in-process through `main`, and as a real process (also killed)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rewardlab
from rewardlab import Reward, RuleReward, Sample, Score, Status
from rewardlab.cli import main

HERE = Path(__file__).parent


def length_value(text: str) -> float:
    return len(text) % 7 / 7


@rewardlab.register("cli_test_length")
class LengthReward(RuleReward):
    """``len(completion) % 7 / 7``; counts `close` calls so the CLI can be seen to release it."""

    name = "cli_test_length"
    closed = 0

    def __init__(self, name: str = "cli_test_length"):
        self.name = name

    def check(self, sample: Sample) -> Score:
        value = length_value(sample.completion_text)
        return Score(value, breakdown={"mod7": value})

    def close(self) -> None:
        type(self).closed += 1


@rewardlab.register("cli_test_slow")
class SlowReward(Reward):
    """The same values after a wait, like a judge on a server: slow enough to be killed mid-run."""

    name = "cli_test_slow"
    io_bound = True

    def __init__(self, delay: float = 0.05):
        self.delay = delay

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        await asyncio.sleep(self.delay)
        return [Score(length_value(sample.completion_text)) for sample in samples]


def texts(count: int) -> list[str]:
    return [f"answer {'y' * (i % 23)}" for i in range(count)]


def write_input(path: Path, count: int) -> Path:
    lines = [
        json.dumps({"id": f"r{i}", "prompt": "p", "completion": text}) for i, text in enumerate(texts(count))
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_config(path: Path, config: str) -> Path:
    path.write_text(config)
    return path


def score_argv(source: Path, config: Path, output: Path, *options: str) -> list[str]:
    return ["score", str(source), "--config", str(config), "--output", str(output), *options]


def read_output(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def cli_env() -> dict[str, str]:
    """The environment for a CLI subprocess that can ``--import test_score_command``."""
    paths = [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


COMMANDS = {
    "python -m rewardlab.cli": [sys.executable, "-m", "rewardlab.cli"],
    "rewardlab script": [str(Path(sys.executable).with_name("rewardlab"))],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_import_finds_a_module_in_the_current_folder(tmp_path, command):
    (tmp_path / "my_local_rewards.py").write_text(
        "import rewardlab\n"
        "@rewardlab.register('cli_test_local')\n"
        "class Local(rewardlab.RuleReward):\n"
        "    name = 'cli_test_local'\n"
        "    def check(self, sample):\n"
        "        return rewardlab.Score(0.25)\n"
    )
    source = write_input(tmp_path / "in.jsonl", 3)
    config = write_config(tmp_path / "reward.yaml", "type: cli_test_local\n")
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        [
            *COMMANDS[command],
            *score_argv(source, config, tmp_path / "out.jsonl", "--import", "my_local_rewards"),
        ],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [record["value"] for record in read_output(tmp_path / "out.jsonl")] == [0.25] * 3


@pytest.mark.parametrize("command", COMMANDS)
def test_score_command_as_a_process(tmp_path, command):
    source = write_input(tmp_path / "in.jsonl", 20)
    config = write_config(tmp_path / "reward.yaml", "type: cli_test_length\n")
    output = tmp_path / "scores.jsonl"
    done = subprocess.run(
        [
            *COMMANDS[command],
            *score_argv(source, config, output, "--import", "test_score_command", "--batch-size", "3"),
        ],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    records = read_output(output)
    assert sorted(record["id"] for record in records) == sorted(f"r{i}" for i in range(20))
    values = {record["id"]: record["value"] for record in records}
    assert values == {f"r{i}": pytest.approx(length_value(text)) for i, text in enumerate(texts(20))}
    assert "rows/s" in done.stderr
    assert "mean value" in done.stdout
    assert json.loads((tmp_path / "scores.jsonl.summary.json").read_text())["rows"] == 20


def test_main_in_process_with_column_flags_parquet_and_limit(tmp_path, capsys):
    rows = [{"key": f"k{i}", "q": "p", "a": text, "gold": "x"} for i, text in enumerate(texts(12))]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet")
    config = write_config(tmp_path / "reward.yaml", "type: cli_test_length\n")
    output = tmp_path / "nested" / "scores.jsonl"
    closed_before = LengthReward.closed

    mapping = {"prompt": "q", "completion": "a", "reference": "gold", "id": "key"}
    columns = [argument for part, column in mapping.items() for argument in (f"--{part}-column", column)]
    status = main(
        score_argv(
            tmp_path / "in.parquet",
            config,
            output,
            *columns,
            "--limit",
            "10",
            "--batch-size",
            "4",
            "--no-progress",
        )
    )

    assert status == 0
    records = read_output(output)
    assert sorted(record["row"] for record in records) == list(range(10))
    assert {record["id"]: record["value"] for record in records} == {
        f"k{i}": pytest.approx(length_value(text)) for i, text in enumerate(texts(10))
    }
    assert LengthReward.closed == closed_before + 1
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "cli_test_length" in captured.out and "10 scored now" in captured.out


def test_saved_dataset_split_through_the_cli(tmp_path):
    records = [{"id": f"d{i}", "prompt": "p", "completion": text} for i, text in enumerate(texts(6))]
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(records), "test": datasets.Dataset.from_list(records[:2])}
    ).save_to_disk(tmp_path / "data")
    config = write_config(tmp_path / "reward.yaml", "type: cli_test_length\n")
    output = tmp_path / "scores.jsonl"
    status = main(score_argv(tmp_path / "data", config, output, "--split", "test", "--no-progress"))
    assert status == 0
    assert sorted(record["id"] for record in read_output(output)) == ["d0", "d1"]


def test_failed_rows_still_exit_zero(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(
        '{"id": "a", "prompt": "p", "completion": "abc"}\n{"id": "b", "prompt": "p"}\nnot json\n'
    )
    config = write_config(tmp_path / "reward.yaml", "type: cli_test_length\n")
    output = tmp_path / "scores.jsonl"
    assert main(score_argv(source, config, output, "--no-progress")) == 0
    statuses = {record["id"]: record["status"] for record in read_output(output)}
    assert statuses == {"a": "ok", "b": "invalid_input", "row-2": "invalid_input"}


@rewardlab.register("cli_test_backend_down")
class BackendDownReward(RuleReward):
    """A judge whose backend is down: every sample fails with ``backend_error``."""

    name = "cli_test_backend_down"

    def __init__(self, name: str = "cli_test_backend_down"):
        self.name = name

    def check(self, sample: Sample) -> Score:
        return Score.failure(
            Status.BACKEND_ERROR, "ValueError: accelerate is required when loading a GGUF file"
        )


ROUTED = """type: route
by: task
routes:
  math: {type: cli_test_length}
  chat:
    type: combine
    on_component_failure: %s
    components:
      quality: {type: cli_test_backend_down}
      length: {type: cli_test_length}
"""


def write_routed_input(path: Path) -> Path:
    rows = [
        {"id": f"r{i}", "prompt": "p", "completion": "abc", "task": "chat" if i % 2 else "math"}
        for i in range(6)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("policy", ["fail", "skip"])
def test_a_failed_pipeline_exits_1_naming_the_component_and_why(tmp_path, capsys, policy):
    source = write_routed_input(tmp_path / "in.jsonl")
    config = write_config(tmp_path / "reward.yaml", ROUTED % policy)
    output = tmp_path / "scores.jsonl"
    assert main(score_argv(source, config, output, "--no-progress")) == 1
    errors = capsys.readouterr().err
    # Skipped, the component is named; failing the combination, the route is.
    where = "route/chat/quality" if policy == "skip" else "route/chat"
    assert f"pipeline failure: {where}: backend_error in 3 rows, e.g." in errors
    assert "accelerate is required" in errors
    summary = json.loads((tmp_path / "scores.jsonl.summary.json").read_text())
    assert summary["failures"][f"{where}: backend_error"]["rows"] == 3
    # Every row is still written, and an explicit acceptance exits 0.
    assert len(read_output(output)) == 6
    assert main(score_argv(source, config, output, "--no-progress", "--overwrite", "--accept-failures")) == 0


def test_a_real_judge_whose_server_is_down_fails_the_run(tmp_path, capsys):
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = write_config(
        tmp_path / "reward.yaml",
        "type: pointwise_judge\n"
        f"backend: {{type: openai, base_url: 'http://127.0.0.1:{port}/v1', model: m}}\n"
        "client: {max_attempts: 1, cache: null}\n",
    )
    source = write_input(tmp_path / "in.jsonl", 2)
    assert main(score_argv(source, config, tmp_path / "scores.jsonl", "--no-progress")) == 1
    assert "pointwise_judge: backend_error in 2 rows" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing config", "--config {tmp}/nope.yaml: <config>: cannot read config file"),
        ("unknown reward type", "--config {tmp}/reward.yaml: <config>: unknown reward type 'no_such_reward'"),
        ("missing input", "{tmp}/missing.jsonl: no such file or directory"),
        ("existing output", "{tmp}/scores.jsonl exists and is not empty; pass --resume"),
        ("unimportable module", "--import no_such_module_xyz: No module named 'no_such_module_xyz'"),
        ("missing column", "{tmp}/in.jsonl.parquet: no column 'completion'"),
    ],
)
def test_usage_errors_exit_2_with_one_line_naming_the_problem(tmp_path, capsys, case, message):
    source = write_input(tmp_path / "in.jsonl", 3)
    config = write_config(tmp_path / "reward.yaml", "type: cli_test_length\n")
    output = tmp_path / "scores.jsonl"
    extra: list[str] = []
    if case == "missing config":
        config = tmp_path / "nope.yaml"
    elif case == "unknown reward type":
        write_config(config, "type: no_such_reward\n")
    elif case == "missing input":
        source = tmp_path / "missing.jsonl"
    elif case == "existing output":
        output.write_text('{"id": "r0"}\n')
    elif case == "unimportable module":
        extra = ["--import", "no_such_module_xyz"]
    elif case == "missing column":
        source = tmp_path / "in.jsonl.parquet"
        pq.write_table(pa.table({"prompt": ["p"]}), source)

    status = main(score_argv(source, config, output, *extra))

    assert status == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("rewardlab score: error: ")
    assert message.format(tmp=tmp_path) in err


def test_contradictory_flags_are_an_argparse_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["score", "in.jsonl", "--config", "c.yaml", "--output", "o.jsonl", "--resume", "--overwrite"])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_usage_error_in_a_process_prints_no_traceback(tmp_path):
    config = write_config(tmp_path / "reward.yaml", "type: cli_test_length\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rewardlab.cli",
            *score_argv(tmp_path / "missing.jsonl", config, tmp_path / "o.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == f"rewardlab score: error: {tmp_path / 'missing.jsonl'}: no such file or directory\n"


def line_count(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_a_killed_run_resumes_with_every_id_exactly_once(tmp_path):
    count = 300
    source = write_input(tmp_path / "in.jsonl", count)
    config = write_config(tmp_path / "reward.yaml", "type: cli_test_slow\ndelay: 0.05\n")
    output = tmp_path / "scores.jsonl"
    arguments = score_argv(source, config, output, "--no-progress")
    slow_run = ["--import", "test_score_command", "--batch-size", "5", "--concurrency", "2"]
    with (tmp_path / "stderr.txt").open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "rewardlab.cli", *arguments, *slow_run],
            env=cli_env(),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        deadline = time.monotonic() + 30
        while line_count(output) < 40 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL, (tmp_path / "stderr.txt").read_text()
    written_before_kill = line_count(output)
    assert 40 <= written_before_kill < count

    assert main([*arguments, "--resume", "--concurrency", "16"]) == 0

    records = read_output(output)
    assert Counter(record["id"] for record in records) == Counter(f"r{i}" for i in range(count))
    assert {record["id"]: record["value"] for record in records} == {
        f"r{i}": pytest.approx(length_value(text)) for i, text in enumerate(texts(count))
    }
    summary = json.loads((tmp_path / "scores.jsonl.summary.json").read_text())
    assert summary["rows"] == count and summary["resumed"] == summary["skipped"] >= 40
