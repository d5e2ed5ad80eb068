"""``rewardlab bench`` end to end through `main`, on a toy benchmark registered for the test."""

from __future__ import annotations

import json

import pytest

from rewardlab.benchmarks import registry
from rewardlab.cli import main
from tests.benchmarks.toy import LengthReward

PAIRS = [
    {"id": "a", "subset": "easy", "prompt": "q", "chosen": "a long answer", "rejected": "short"},
    {"id": "b", "subset": "easy", "prompt": "q", "chosen": "tiny", "rejected": "a much longer answer"},
    {"id": "c", "subset": "hard", "prompt": "q", "chosen": "longer one", "rejected": "x"},
]


@pytest.fixture
def toy(monkeypatch, tmp_path):
    monkeypatch.setitem(registry.BENCHMARKS, "toy", "tests.benchmarks.toy:ToyPairs")
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(pair) + "\n" for pair in PAIRS))
    config = tmp_path / "reward.yaml"
    config.write_text("type: bench_test_length\n")
    return data, config


def test_a_reward_is_benchmarked_into_scores_a_result_a_report_and_plots(toy, tmp_path, capsys):
    data, config = toy
    out = tmp_path / "out"
    args = ["bench", "toy", "--config", str(config), "--data", str(data), "--output", str(out)]
    args.append("--no-progress")
    assert main(args) == 0
    printed = capsys.readouterr().out
    # Length prefers the longer response: "a" and "c" won, "b" lost.
    assert "| accuracy | 0.6667 |" in printed and f"report in {out}/report.md" in printed
    assert json.loads((out / "result.json").read_text())["subsets"]["easy"] == {"accuracy": 0.5, "items": 2}
    assert {p.name for p in out.iterdir()} >= {"scores.jsonl", "result.json", "report.md", "subsets.png"}

    # Run again: refused without --resume; with it nothing is rescored and the figures agree.
    assert main(args) == 2
    assert "--resume" in capsys.readouterr().err
    LengthReward.scored = []
    assert main([*args, "--resume"]) == 0
    assert LengthReward.scored == []
    assert "| accuracy | 0.6667 |" in capsys.readouterr().out


def test_precomputed_scores_give_the_figures_without_a_reward(toy, tmp_path, capsys):
    data, _ = toy
    scores = tmp_path / "scores.jsonl"
    scores.write_text(
        "".join(json.dumps(r) + "\n" for r in [{"id": "a", "scores": [1, 0]}, {"id": "b", "scores": [1, 0]}])
    )
    out = tmp_path / "out"
    assert main(["bench", "toy", "--scores", str(scores), "--data", str(data), "--output", str(out)]) == 0
    # "c" has no scores: it counts as lost, and its two candidates as failed.
    assert "| accuracy | 0.6667 |" in capsys.readouterr().out
    assert json.loads((out / "result.json").read_text())["failed"] == 2


def test_options_and_limit_reach_the_benchmark(toy, tmp_path, capsys):
    data, config = toy
    out = tmp_path / "out"
    args = ["bench", "toy", "--config", str(config), "--data", str(data), "--output", str(out)]
    args.append("--no-progress")
    # A margin of 5 characters: "a" wins by 8, so it still counts; "c" by 9.
    assert main([*args, "--option", "margin=5", "--limit", "2"]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["metrics"]["accuracy"] == 0.5 and sum(s["items"] for s in result["subsets"].values()) == 2


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--option", "speed=3"], "toy: unknown option(s) speed; accepted: margin"),
        (["--option", "margin"], "--option 'margin': expected KEY=VALUE"),
        (["--published"], "--published describes --scores"),
    ],
)
def test_usage_mistakes_exit_2_with_one_line(toy, tmp_path, capsys, extra, message):
    data, config = toy
    args = ["bench", "toy", "--config", str(config), "--data", str(data), "--output", str(tmp_path / "o")]
    assert main([*args, *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_malformed_benchmark_file_names_the_line_and_field(toy, tmp_path, capsys):
    _, config = toy
    data = tmp_path / "bad.jsonl"
    data.write_text(json.dumps({"id": "a", "subset": "s", "prompt": "q", "chosen": "x"}) + "\n")
    args = ["bench", "toy", "--config", str(config), "--data", str(data), "--output", str(tmp_path / "o")]
    assert main(args) == 2
    assert "bad.jsonl, line 1: missing field 'rejected'" in capsys.readouterr().err


def test_a_benchmark_without_a_published_format_says_so(toy, tmp_path, capsys):
    data, _ = toy
    scores = tmp_path / "s.jsonl"
    scores.write_text("")
    args = ["bench", "toy", "--scores", str(scores), "--published", "--data", str(data)]
    args += ["--output", str(tmp_path)]
    assert main(args) == 2
    assert "toy has no published score format" in capsys.readouterr().err


def test_the_shipped_pairs_suite_with_a_math_verifier(tmp_path, capsys):
    # The correct solution's answer line states the true answer and a corrupted one's never
    # does, so a verifier of the final answer wins every pair.
    config = tmp_path / "math.yaml"
    config.write_text("type: math_answer\n")
    out = tmp_path / "out"
    args = ["bench", "arithmetic-pairs", "--config", str(config), "--option", "size=12", "--output", str(out)]
    assert main([*args, "--no-progress"]) == 0
    assert "| accuracy | 1.0000 |" in capsys.readouterr().out
    assert len((out / "scores.jsonl").read_text().splitlines()) == 24


def test_the_shipped_steps_suite_chooses_its_threshold_on_validation(tmp_path, capsys):
    from rewardlab.benchmarks.registry import build_benchmark
    from tests.benchmarks.toy import equation_holds

    config = tmp_path / "steps.yaml"
    config.write_text("type: bench_test_equations\n")
    out = tmp_path / "out"
    args = ["bench", "arithmetic-steps", "--config", str(config), "--option", "size=40", "--output", str(out)]
    assert main([*args, "--no-progress"]) == 0
    result = json.loads((out / "result.json").read_text())
    assert list(result["subsets"]) == ["test"]
    # Every correct solution's equations hold; an erroneous one is found exactly when its first
    # wrong step computes wrongly (an arithmetic error), not when it misquotes a value.
    test_items = [
        i for i in build_benchmark("arithmetic-steps", {"size": 40}).load(None) if i.subset == "test"
    ]
    erroneous = [i for i in test_items if i.gold["label"] != -1]
    found = sum(not equation_holds(i.fields["steps"][i.gold["label"]]) for i in erroneous)
    assert 0 < found < len(erroneous)
    assert result["subsets"]["test"]["correct_accuracy"] == 1.0
    assert result["subsets"]["test"]["error_accuracy"] == pytest.approx(found / len(erroneous))
    assert any("threshold" in note for note in result["notes"])
