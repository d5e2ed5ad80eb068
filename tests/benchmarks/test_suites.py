import json
import subprocess
import sys

import pytest

from rewardlab.benchmarks.suites import ArithmeticBestOfN, ArithmeticPairs, ArithmeticSteps, write_suite
from rewardlab.errors import DataFormatError
from rewardlab.rewards.contract import Score, Status
from rewardlab.rewards.math.reward import MathAnswerReward

SUITES = [
    ArithmeticPairs(size=12, seed=1),
    ArithmeticSteps(size=6, seed=1),
    ArithmeticBestOfN(size=5, seed=1),
]


@pytest.fixture(scope="module")
def math_answer():
    reward = MathAnswerReward()
    yield reward
    reward.close()


def scored(reward, items):
    return {item.id: reward.score(item.samples()) for item in items}


@pytest.mark.parametrize("suite", SUITES, ids=lambda suite: suite.name)
def test_the_same_seed_gives_the_same_suite_and_another_seed_another(suite):
    items = suite.load(None)
    assert items == type(suite)(size=suite.size, seed=1).load(None)
    assert items != type(suite)(size=suite.size, seed=2).load(None)


def test_a_suite_is_the_same_in_another_process():
    script = (
        "import json\n"
        "from rewardlab.benchmarks.suites import ArithmeticPairs, ArithmeticSteps, ArithmeticBestOfN\n"
        "suites = (ArithmeticPairs(size=12, seed=1), ArithmeticSteps(size=6, seed=1), "
        "ArithmeticBestOfN(size=5, seed=1))\n"
        "print(json.dumps([[i.id, i.candidates] for s in suites for i in s.load(None)]))"
    )
    other = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, check=True).stdout)
    here = [[item.id, list(item.candidates)] for suite in SUITES for item in suite.load(None)]
    assert other == here


@pytest.mark.parametrize("suite", SUITES, ids=lambda suite: suite.name)
def test_a_written_suite_reads_back_as_generated(tmp_path, suite):
    path = tmp_path / f"{suite.name}.jsonl"
    assert write_suite(suite, path) == len(suite.load(None))
    assert suite.load(path) == suite.load(None)


def test_pair_items_are_a_correct_and_a_corrupted_solution_of_one_problem():
    items = ArithmeticPairs(size=40, seed=0).load(None)
    assert {item.subset for item in items} == {"arithmetic", "copy"}
    for item in items:
        right, wrong = item.candidates
        assert right.endswith(f"The answer is {item.reference}.")
        assert not wrong.endswith(f"The answer is {item.reference}.")
        assert item.prompt.startswith("Start with ")
        assert [fields["steps"] for fields in item.candidate_fields] == [right.split("\n"), wrong.split("\n")]


def test_a_rule_reward_wins_every_arithmetic_pair(math_answer):
    # By construction the correct solution states the true answer (math_answer: 1) and the
    # corrupted one never does (its error offsets the running value, and +, - and * by 2-5 never
    # bring the offset back to 0: math_answer 0), so every pair is won strictly.
    suite = ArithmeticPairs(size=30, seed=4)
    items = suite.load(None)
    result = suite.evaluate(items, scored(math_answer, items))
    assert result.metrics == {"accuracy": 1.0}
    assert all(figures["accuracy"] == 1.0 for figures in result.subsets.values())
    assert sum(figures["items"] for figures in result.subsets.values()) == 30
    assert result.failed == 0


def test_pairs_are_won_only_when_strictly_higher():
    suite = ArithmeticPairs(size=3, seed=0)
    items = suite.load(None)
    values = [(1.0, 0.0), (0.5, 0.5), (0.0, 1.0)]  # won, tie (lost), lost
    scores = {item.id: [Score(value=a), Score(value=b)] for item, (a, b) in zip(items, values, strict=True)}
    assert suite.evaluate(items, scores).metrics["accuracy"] == pytest.approx(1 / 3)
    scores[items[0].id] = [Score.failure(Status.ERROR, "x"), Score(value=0.0)]
    result = suite.evaluate(items, scores)
    assert result.metrics["accuracy"] == 0.0
    assert result.failed == 1


def test_best_of_n_with_a_verifier_is_pass_at_n(math_answer):
    # math_answer gives 1 exactly to the candidates whose answer line states the true answer,
    # which is what the suite's correctness is; the best-of-n pick is a top-scored candidate, so it
    # is correct whenever any of the first n is: best-of-n equals pass@n for every n.
    suite = ArithmeticBestOfN(size=12, seed=5)
    items = suite.load(None)
    assert {len(item.candidates) for item in items} == {8}
    result = suite.evaluate(items, scored(math_answer, items))
    assert result.curves["best-of-n"] == result.curves["pass@n"]
    assert result.benchmark == "arithmetic-bon"
    # A mix: some problems have no correct candidate, and not every candidate is correct.
    assert 0 < result.metrics["pass@8"] <= 1
    assert 0 < sum(sum(item.gold["correct"]) for item in items) < 12 * 8


def test_best_of_n_answers_and_correctness_follow_the_answer_line():
    for item in ArithmeticBestOfN(size=10, seed=2).load(None):
        for text, right, answer in zip(
            item.candidates, item.gold["correct"], item.gold["answers"], strict=True
        ):
            assert text.endswith(f"The answer is {answer}.")
            assert right == (answer == item.reference)


def test_steps_are_reported_on_test_with_a_threshold_chosen_on_validation():
    suite = ArithmeticSteps(size=20, seed=3)
    items = suite.load(None)
    assert [item.subset for item in items] == ["validation"] * 20 + ["test"] * 20
    assert len({item.prompt for item in items}) > 30  # two separately drawn sets of problems
    # A step scorer that knows the labels: 0.9 before the first error, 0.2 from it on.
    scores = {}
    for item in items:
        label, steps = item.gold["label"], item.fields["steps"]
        values = [0.9 if label == -1 or index < label else 0.2 for index in range(len(steps))]
        scores[item.id] = [Score(value=min(values), steps=values)]
    result = suite.evaluate(items, scores)
    # On validation, thresholds in (0.2, 0.9] separate the steps; the lowest such candidate is 0.9.
    assert result.notes == ["threshold 0.9 chosen on subset 'validation'"]
    assert list(result.subsets) == ["test"]
    assert result.metrics == {"f1": 1.0}
    fixed = ArithmeticSteps(size=20, seed=3, threshold=0.1).evaluate(items, scores)
    assert fixed.metrics == {"f1": 0.0}  # nothing is below 0.1: no error is found


def test_options_are_checked():
    with pytest.raises(ValueError, match="size must be at least 1, got 0"):
        ArithmeticPairs(size=0)
    with pytest.raises(ValueError, match="aggregate must be one of"):
        ArithmeticBestOfN(aggregate="mean")
    assert (ArithmeticPairs().size, ArithmeticSteps().size, ArithmeticBestOfN().size) == (200, 100, 50)


def write_records(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def frozen(tmp_path, suite):
    path = tmp_path / "suite.jsonl"
    write_suite(suite, path)
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_file_of_another_suite_is_refused(tmp_path):
    path = tmp_path / "suite.jsonl"
    write_suite(ArithmeticPairs(size=2), path)
    with pytest.raises(
        DataFormatError, match="line 1: field 'suite': this file holds 'arithmetic-pairs' items"
    ):
        ArithmeticBestOfN().load(path)


@pytest.mark.parametrize(
    ("suite", "change", "message"),
    [
        (ArithmeticPairs(size=2), {"reference": None}, "field 'reference': expected a string"),
        (
            ArithmeticPairs(size=2),
            {"candidates": ["a", "b", "c"], "candidate_fields": []},
            "expected a correct and a corrupted solution, got 3",
        ),
        (ArithmeticPairs(size=2), {"candidate_fields": [{}]}, "1 candidate_fields for 2 candidates"),
        (
            ArithmeticSteps(size=2),
            {"gold": {"label": 99}},
            "field 'gold': expected a 'label' of -1 or a step index",
        ),
        (ArithmeticSteps(size=2), {"subset": "train"}, "field 'subset': expected 'validation' or 'test'"),
        (
            ArithmeticBestOfN(size=2),
            {"gold": {"correct": [True], "answers": []}},
            "expected 'correct' with one entry per candidate",
        ),
    ],
)
def test_a_malformed_frozen_item_is_named_with_its_line_and_field(tmp_path, suite, change, message):
    records = frozen(tmp_path, suite)
    records[1].update(change)
    path = write_records(tmp_path / "broken.jsonl", records)
    with pytest.raises(DataFormatError, match=message) as error:
        suite.load(path)
    assert f"{path}, line 2" in str(error.value)


def test_a_missing_field_is_named(tmp_path):
    records = frozen(tmp_path, ArithmeticSteps(size=1))
    del records[0]["prompt"]
    path = write_records(tmp_path / "broken.jsonl", records)
    with pytest.raises(DataFormatError, match="line 1: field 'prompt': expected a string, got nothing"):
        ArithmeticSteps().load(path)


def test_unreadable_frozen_files_are_refused(tmp_path):
    with pytest.raises(DataFormatError, match="No such file"):
        ArithmeticPairs().load(tmp_path / "absent.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DataFormatError, match="no items"):
        ArithmeticPairs().load(tmp_path / "empty.jsonl")
    (tmp_path / "bad.jsonl").write_text("{\n")
    with pytest.raises(DataFormatError, match="line 1: not JSON"):
        ArithmeticPairs().load(tmp_path / "bad.jsonl")
