"""The Ray Data engine, on a real local Ray instance: records identical to the single-process
engine's, one reward build per worker actor, async rewards with batches in flight, resume by id."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

import rewardlab
from rewardlab import Reward, RuleReward, Sample, Score
from rewardlab.errors import ConfigError, RayEngineError
from rewardlab.offline import Columns, OutputError, RunOptions, open_rows, score_file
from rewardlab.rewards.contract import Usage

ray = pytest.importorskip("ray")

from rewardlab.offline.ray_engine import add_ray_arguments, gpus_per_worker, score_rows_ray  # noqa: E402
from rewardlab.offline.runner import batches  # noqa: E402

EXAMPLES = Path(__file__).parents[2] / "examples" / "rollouts.jsonl"
# The workers build the rewards below by name, so they import this module first.
THIS_MODULE = [__name__]
# Timing is the only thing two runs of the same reward may disagree on.
TIMING_FIELDS = ("latency_s",)


@rewardlab.register("ray_test_flaky")
class FlakyReward(RuleReward):
    """Fails each sample whose completion says FAIL, as a rule check with a bug would."""

    def __init__(self, name: str = "flaky"):
        self.name = name

    def check(self, sample: Sample) -> Score:
        if "FAIL" in sample.completion_text:
            raise RuntimeError("cannot score this one")
        return Score(len(sample.completion_text) % 5 / 5, details={"chars": len(sample.completion_text)})


@rewardlab.register("ray_test_poisoned")
class PoisonedReward(Reward):
    """Raises for a whole batch holding the completion "poison", like a batch-level bug."""

    def __init__(self, name: str = "poisoned"):
        self.name = name

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        if any(sample.completion == "poison" for sample in samples):
            raise RuntimeError("poisoned batch")
        return [Score(0.5) for _ in samples]


@rewardlab.register("ray_test_sleepy")
class SleepyReward(Reward):
    """Waits on the event loop like a judge, and reports a call with its (timing-dependent) latency."""

    io_bound = True

    def __init__(self, name: str = "sleepy"):
        self.name = name

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        started = time.perf_counter()
        await asyncio.sleep(0.01)
        latency = time.perf_counter() - started
        return [
            Score(
                float(len(sample.prompt_text) % 3), usage=Usage(prompt_tokens=3, latency_s=latency, calls=1)
            )
            for sample in samples
        ]


@rewardlab.register("ray_test_slow")
class SlowReward(Reward):
    """Waits ``delay_s`` per batch, then scores by length: slow enough to kill a run midway."""

    io_bound = True

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        await asyncio.sleep(self.delay_s)
        return [
            Score(len(sample.completion_text) / 10, details={"prompt": sample.prompt_text})
            for sample in samples
        ]


# Probe rewards built in this process.
BUILDS = Counter()


@rewardlab.register("ray_test_probe")
class ProbeReward(Reward):
    """Records which process scored each batch, how often that process built this reward, and how
    many batches were in flight on its event loop at once."""

    io_bound = True

    def __init__(self, delay_s: float = 0.2):
        BUILDS["probe"] += 1
        self.delay_s = delay_s
        self.in_flight = 0

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        self.in_flight += 1
        overlapping = self.in_flight
        await asyncio.sleep(self.delay_s)
        self.in_flight -= 1
        details = {"pid": os.getpid(), "builds": BUILDS["probe"], "overlapping": overlapping}
        return [Score(1.0, details=details) for _ in samples]


MIXED_CONFIG = {
    "type": "route",
    "by": "data_source",
    "routes": {
        "math": {
            "type": "combine",
            "components": {
                "accuracy": {"type": "math_answer", "weight": 1.0},
                "overlong": {
                    "type": "soft_overlong",
                    "max_length": 400,
                    "cache_length": 100,
                    "unit": "words",
                    "weight": 0.5,
                },
                "repetition": {"type": "repetition_penalty", "ngram_size": 4, "max_penalty": -0.5},
            },
        },
        "instruction": {"type": "instruction_following", "aggregate": "fraction"},
        "json": {"type": "json_schema"},
        "chat": {"type": "ray_test_sleepy"},
        "flaky": {"type": "ray_test_flaky"},
        "poisoned": {"type": "ray_test_poisoned"},
    },
}


@pytest.fixture(scope="module")
def local_ray():
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # One GPU declared (none is there): actors that reserve a share get it in their CUDA_VISIBLE_DEVICES.
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, logging_level=logging.WARNING)
    yield ray
    ray.shutdown()


def mixed_input(path: Path) -> Path:
    """The shipped rollouts (with their malformed line and their row without a completion),
    rows a rule fails one by one, a batch a reward fails as a whole, and a row of another type."""
    lines = EXAMPLES.read_text().splitlines()
    extra = [
        {
            "id": f"flaky-{i}",
            "data_source": "flaky",
            "prompt": f"flaky {i}",
            "completion": "FAIL" if i % 3 else "x" * i,
        }
        for i in range(9)
    ]
    extra += [
        {"id": f"poisoned-{i}", "data_source": "poisoned", "prompt": f"poisoned {i}", "completion": c}
        for i, c in enumerate(["fine", "poison", "fine", "fine", "fine", "fine", "fine"])
    ]
    extra.append({"id": "wrong-type", "data_source": "math", "prompt": "p", "completion": 7})
    path.write_text("\n".join(lines + [json.dumps(record) for record in extra]) + "\n")
    return path


def read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def without_timing(record: dict) -> dict:
    record = dict(record)
    if record.get("usage"):
        record["usage"] = {key: value for key, value in record["usage"].items() if key not in TIMING_FIELDS}
    return record


# These two come first: they check that Ray was not started, before the module's Ray is.
def test_nothing_left_to_score_needs_no_ray(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"id": "a", "prompt": "p", "completion": "c"}) + "\n")
    output = tmp_path / "out.jsonl"
    output.write_text(json.dumps({"id": "a", "row": 0, "value": 0.25, "status": "ok"}) + "\n")

    summary = score_rows_ray(
        {"type": "ray_test_flaky"}, open_rows(source), output, RunOptions(resume=True, progress=False)
    )

    assert (summary.resumed, summary.skipped, summary.scored) == (1, 1, 0)
    assert not ray.is_initialized()


def test_a_bad_config_output_or_address_fails_before_ray_starts(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"prompt": "p", "completion": "c"}) + "\n")
    with pytest.raises(ConfigError, match="unknown reward type 'no_such_reward'"):
        score_rows_ray({"type": "no_such_reward"}, open_rows(source), tmp_path / "out.jsonl", RunOptions())
    existing = tmp_path / "existing.jsonl"
    existing.write_text("{}\n")
    with pytest.raises(OutputError, match="exists and is not empty"):
        score_rows_ray({"type": "ray_test_flaky"}, open_rows(source), existing, RunOptions())
    assert existing.read_text() == "{}\n"
    with pytest.raises(RayEngineError, match="Ray Data does not run over Ray Client"):
        score_rows_ray(
            {"type": "ray_test_flaky"},
            open_rows(source),
            existing,
            RunOptions(overwrite=True),
            address="ray://head:10001",
        )
    assert existing.read_text() == "{}\n"
    assert not ray.is_initialized()


def test_records_are_identical_to_the_single_process_engines(tmp_path, local_ray):
    source = mixed_input(tmp_path / "in.jsonl")
    options = RunOptions(batch_size=4, concurrency=2, progress=False)
    single = score_file(rewardlab.build(MIXED_CONFIG), source, tmp_path / "single.jsonl", options=options)
    distributed = score_rows_ray(
        MIXED_CONFIG, open_rows(source), tmp_path / "ray.jsonl", options, imports=THIS_MODULE, workers=2
    )

    single_records = read_records(tmp_path / "single.jsonl")
    ray_records = read_records(tmp_path / "ray.jsonl")
    assert len(ray_records) == len(single_records) == 50
    ray_by_row = {record["row"]: record for record in ray_records}
    assert len(ray_by_row) == len(ray_records)
    for expected in single_records:
        actual = ray_by_row[expected["row"]]
        assert list(actual) == list(expected)
        assert without_timing(actual) == without_timing(expected), expected["id"]

    # The mix really holds each kind of failure, and the timing left out really was there.
    statuses = Counter(record["status"] for record in ray_records)
    assert statuses["invalid_input"] >= 3 and statuses["error"] >= 8 and statuses["ok"] >= 20
    broken = next(
        record for record in ray_records if record["details"].get("row_error", "").startswith("malformed")
    )
    assert broken["line"] == 33 and broken["reason"].startswith("line 33: malformed JSON")
    missing = next(record for record in ray_records if record["id"] == "bad-row")
    assert missing["details"] == {"row_error": "missing field 'completion'", "field": "completion"}
    # The poison fails its route's rows of its own batch, and none of another batch.
    (batch,) = [b for b in batches(open_rows(source).rows, 4) if "poisoned-1" in {row.id for row in b}]
    in_batch = {row.id for row in batch}
    for record in (record for record in ray_records if record["id"].startswith("poisoned-")):
        failed_by_poison = record["status"] == "error" and "poisoned batch" in record["reason"]
        assert failed_by_poison == (record["id"] in in_batch), record["id"]
    assert "poisoned batch" in next(r["reason"] for r in ray_records if r["id"] == "poisoned-1")
    assert all(record["usage"]["latency_s"] > 0 for record in ray_records if record["usage"])
    assert any(record["usage"] for record in ray_records)

    # Means are summed in completion order, so they may differ in the last bits; counts may not.
    ray_summary, single_summary = distributed.to_dict(), single.to_dict()
    for key in ("output", "wall_s", "rows_per_s"):
        del ray_summary[key], single_summary[key]
    ray_means, single_means = ray_summary.pop("breakdown_means"), single_summary.pop("breakdown_means")
    assert ray_means == pytest.approx(single_means) and len(ray_means) == 14
    assert ray_summary.pop("mean_value") == pytest.approx(single_summary.pop("mean_value"))
    assert ray_summary == single_summary
    summary = json.loads((tmp_path / "ray.jsonl.summary.json").read_text())
    assert summary["rows"] == 50 and summary["reward"] == "route"


def test_each_worker_builds_the_reward_once_and_keeps_batches_in_flight(tmp_path, local_ray):
    source = tmp_path / "in.jsonl"
    source.write_text(
        "".join(json.dumps({"prompt": f"p{i}", "completion": str(i)}) + "\n" for i in range(24))
    )
    options = RunOptions(batch_size=2, concurrency=3, progress=False)
    config = {"type": "ray_test_probe"}

    score_rows_ray(config, open_rows(source), tmp_path / "out.jsonl", options, imports=THIS_MODULE, workers=2)

    details = [record["details"] for record in read_records(tmp_path / "out.jsonl")]
    assert len(details) == 24
    rows_per_process = Counter(detail["pid"] for detail in details)
    assert os.getpid() not in rows_per_process and 1 <= len(rows_per_process) <= 2
    # However many batches a worker scored (one scored several), it built the reward once.
    assert all(detail["builds"] == 1 for detail in details)
    assert max(rows_per_process.values()) > options.batch_size
    overlapping = max(detail["overlapping"] for detail in details)
    assert 2 <= overlapping <= options.concurrency


def test_a_killed_run_resumes_each_remaining_id_once(tmp_path, local_ray):
    source = tmp_path / "in.jsonl"
    rows = [{"id": f"r{i}", "prompt": f"p{i}", "completion": "x" * i} for i in range(16)]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    output = tmp_path / "out.jsonl"
    # A driver in its own process on the same Ray instance, killed once some batches are written.
    script = (
        "import sys; from rewardlab.offline import RunOptions, open_rows; "
        "from rewardlab.offline.ray_engine import score_rows_ray; "
        "score_rows_ray({'type': 'ray_test_slow', 'delay_s': 0.3}, open_rows(sys.argv[1]), sys.argv[2], "
        "RunOptions(batch_size=2, concurrency=1, progress=False), imports=[sys.argv[3]], "
        "address=sys.argv[4], workers=1)"
    )
    address = ray.get_runtime_context().gcs_address
    driver = subprocess.Popen(
        [sys.executable, "-c", script, str(source), str(output), __name__, address],
        cwd=Path(__file__).parents[2],
    )
    try:
        deadline = time.monotonic() + 60
        while not (output.exists() and output.read_text().count("\n") >= 4):
            assert driver.poll() is None and time.monotonic() < deadline, "the driver ended before the kill"
            time.sleep(0.05)
    finally:
        driver.kill()
        driver.wait()
    written = output.read_text().count("\n")
    assert 4 <= written < len(rows)

    summary = score_rows_ray(
        {"type": "ray_test_slow", "delay_s": 0.0},
        open_rows(source),
        output,
        RunOptions(batch_size=2, resume=True, progress=False),
        imports=THIS_MODULE,
    )

    resumed = read_records(output)
    assert sorted(record["id"] for record in resumed) == sorted(row["id"] for row in rows)
    clean = tmp_path / "clean.jsonl"
    score_file(SlowReward(), source, clean, options=RunOptions(progress=False))
    assert {record["id"]: record for record in resumed} == {
        record["id"]: record for record in read_records(clean)
    }
    assert (summary.resumed, summary.skipped, summary.scored, summary.rows) == (
        written,
        written,
        16 - written,
        16,
    )


def test_command_line_arguments(tmp_path):
    parser = argparse.ArgumentParser()
    add_ray_arguments(parser)
    assert vars(parser.parse_args([])) == {
        "engine": "single", "ray_address": None, "workers": 2, "worker_gpus": None
    }  # fmt: skip
    assert parser.parse_args(["--worker-gpus", "0.5"]).worker_gpus == 0.5
    args = parser.parse_args(["--engine", "ray", "--ray-address", "ray://head:10001", "--workers", "8"])
    assert (args.engine, args.ray_address, args.workers) == ("ray", "ray://head:10001", 8)
    for wrong in (
        ["--workers", "0"],
        ["--engine", "spark"],
        ["--worker-gpus", "-1"],
        ["--worker-gpus", "inf"],
    ):
        with pytest.raises(SystemExit):
            parser.parse_args(wrong)


def test_columns_are_honoured_on_the_workers(tmp_path, local_ray):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"q": "p", "a": "12345", "data_source": "flaky"}) + "\n")
    columns = Columns(prompt="q", completion="a")
    summary = score_rows_ray(
        MIXED_CONFIG,
        open_rows(source, columns=columns),
        tmp_path / "out.jsonl",
        RunOptions(progress=False),
        imports=THIS_MODULE,
    )
    [record] = read_records(tmp_path / "out.jsonl")
    assert summary.statuses == {"ok": 1}
    assert record["details"] == {"chars": 5, "route": "flaky"} and record["id"] == "row-0"


def test_the_score_command_runs_on_ray_with_the_same_records(tmp_path, local_ray, capsys):
    import yaml

    from rewardlab.cli import main

    source = mixed_input(tmp_path / "in.jsonl")
    config = tmp_path / "reward.yaml"
    config.write_text(yaml.safe_dump(MIXED_CONFIG))
    common = ["score", str(source), "--config", str(config), "--batch-size", "4", "--no-progress"]
    common += ["--import", __name__]
    # The input's flaky and poisoned rewards fail on purpose: both engines report it with exit 1.
    assert main([*common, "--output", str(tmp_path / "single.jsonl")]) == 1
    assert main([*common, "--output", str(tmp_path / "ray.jsonl"), "--engine", "ray", "--workers", "1"]) == 1
    assert capsys.readouterr().err.count("pipeline failure: route/flaky: error in 6 rows") == 2
    single = sorted(
        (without_timing(r) for r in read_records(tmp_path / "single.jsonl")), key=lambda r: r["row"]
    )
    ray_run = sorted(
        (without_timing(r) for r in read_records(tmp_path / "ray.jsonl")), key=lambda r: r["row"]
    )
    assert ray_run == single and len(single) == 50
    assert (
        main(
            [*common, "--output", str(tmp_path / "x.jsonl"), "--engine", "ray", "--ray-address", "ray://h:1"]
        )
        == 2
    )
    assert "--engine ray: " in capsys.readouterr().err


@rewardlab.register("ray_test_gpu_probe")
class GpuProbeReward(Reward):
    """Says which GPUs Ray gave the process that scored each batch."""

    def __init__(self, uses_gpu: bool = True):
        self.uses_gpu = uses_gpu

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        details = {"gpus": [str(gpu) for gpu in ray.get_gpu_ids()], "pid": os.getpid()}
        return [Score(1.0, details=details) for _ in samples]


def test_gpu_shares():
    assert gpus_per_worker(0, 4) == 0.0
    assert gpus_per_worker(8, 2) == 1.0  # one device per worker's model, never two
    assert gpus_per_worker(1, 4) == 0.25 and gpus_per_worker(3, 2) == 1.0


@pytest.mark.parametrize(
    ("uses_gpu", "worker_gpus", "gets_one"), [(True, None, True), (False, None, False), (True, 0, False)]
)
def test_workers_of_a_model_reward_reserve_the_clusters_gpus(
    tmp_path, local_ray, uses_gpu, worker_gpus, gets_one
):
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"prompt": f"p{i}", "completion": "c"}) + "\n" for i in range(8)))
    config = {"type": "ray_test_gpu_probe", "uses_gpu": uses_gpu}
    options = RunOptions(batch_size=2, progress=False)
    score_rows_ray(
        config, open_rows(source), tmp_path / "out.jsonl", options,
        imports=THIS_MODULE, workers=2, worker_gpus=worker_gpus,
    )  # fmt: skip
    details = [record["details"] for record in read_records(tmp_path / "out.jsonl")]
    # The one declared GPU, shared by the two workers (half each), or none at all.
    assert {tuple(detail["gpus"]) for detail in details} == ({("0",)} if gets_one else {()})


def test_a_reward_model_scores_the_same_on_ray(tmp_path, local_ray, tiny_tokenizer):
    from tests.reward_models.tiny_models import save_classifier

    save_classifier(tmp_path / "rm", tiny_tokenizer, seed=3)
    config = {"type": "reward_model", "model": str(tmp_path / "rm")}
    source = tmp_path / "in.jsonl"
    rows = [{"id": f"r{i}", "prompt": "Add: 2+" + str(i), "completion": "x" * (i * 3)} for i in range(10)]
    rows.append({"id": "long", "prompt": "p", "completion": "y" * 200})  # past the model's 64 positions
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    options = RunOptions(batch_size=3, progress=False)
    single = score_file(rewardlab.build(config), source, tmp_path / "single.jsonl", options=options)
    score_rows_ray(config, open_rows(source), tmp_path / "ray.jsonl", options, workers=2)

    by_id = {record["id"]: without_timing(record) for record in read_records(tmp_path / "ray.jsonl")}
    expected = [without_timing(record) for record in read_records(tmp_path / "single.jsonl")]
    assert [by_id[record["id"]] for record in expected] == expected
    assert single.statuses == {"ok": 10, "invalid_input": 1}
    assert len({record["value"] for record in expected if record["status"] == "ok"}) == 10
