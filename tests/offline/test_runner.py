"""The offline runner: output records, row errors, failing batches, concurrency, resume, summary."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rewardlab import InvalidInput, Reward, RuleReward, Sample, Score
from rewardlab.offline import Columns, OutputError, RunOptions, score_file, summary_path

QUIET = RunOptions(batch_size=4, progress=False)
SCORE_FIELDS = {"value", "status", "steps", "breakdown", "reason", "usage", "details"}


def length_value(text: str) -> float:
    return len(text) % 7 / 7


def length_score(sample: Sample) -> Score:
    text = sample.completion_text
    breakdown = {"mod7": length_value(text)}
    if len(text) > 10:
        breakdown["long"] = len(text) / 100
    return Score(length_value(text), breakdown=breakdown, details={"chars": len(text)})


class LengthReward(RuleReward):
    """``len(completion) % 7 / 7``, with a ``long`` component only for completions over 10 chars."""

    name = "length_mod7"

    def check(self, sample: Sample) -> Score:
        return length_score(sample)


class NeedsReference(RuleReward):
    name = "needs_reference"

    def check(self, sample: Sample) -> Score:
        if sample.reference is None:
            raise InvalidInput("reference", "this reward needs a reference")
        return Score(float(sample.completion_text == sample.reference))


class PoisonedBatchReward(Reward):
    """Raises for any batch holding a completion "poison", like a reward with a batch-level bug."""

    name = "poisoned"

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        if any(sample.completion == "poison" for sample in samples):
            raise RuntimeError("poisoned batch")
        return [length_score(sample) for sample in samples]


class ShortChangingReward(Reward):
    """Breaks the one-score-per-sample rule."""

    name = "short_changing"

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        return []


class SlowReward(Reward):
    """Waits like a judge on a server, and records how many batches were in flight at once."""

    name = "slow"
    io_bound = True

    def __init__(self, delay: float = 0.05):
        self.delay = delay
        self.in_flight = 0
        self.peak = 0

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(self.delay)
        self.in_flight -= 1
        return [length_score(sample) for sample in samples]


class OutputWatchingReward(Reward):
    """Records how many lines the output holds when each batch starts."""

    name = "output_watching"

    def __init__(self, output: Path):
        self.output = output
        self.lines_seen: list[int] = []

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        self.lines_seen.append(len(self.output.read_text().splitlines()))
        return [length_score(sample) for sample in samples]


def completions(count: int) -> list[str]:
    return [f"completion {'x' * i}" for i in range(count)]


def write_jsonl(path: Path, records: list[dict] | list[str]) -> Path:
    lines = [record if isinstance(record, str) else json.dumps(record) for record in records]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def write_rows(path: Path, count: int) -> Path:
    records = [
        {"id": f"r{i}", "prompt": f"p{i}", "completion": text} for i, text in enumerate(completions(count))
    ]
    return write_jsonl(path, records)


def read_output(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def by_id(records: list[dict]) -> dict[str, dict]:
    return {record["id"]: record for record in records}


def test_each_output_line_has_the_id_position_and_every_score_field(tmp_path):
    source = write_rows(tmp_path / "in.jsonl", 10)
    summary = score_file(LengthReward(), source, tmp_path / "out.jsonl", options=QUIET)

    records = read_output(tmp_path / "out.jsonl")
    assert summary.rows == summary.scored == len(records) == 10
    for record in records:
        assert set(record) == {"id", "row", "line", *SCORE_FIELDS}
        text = completions(10)[record["row"]]
        assert record["id"] == f"r{record['row']}" and record["line"] == record["row"] + 1
        assert record["status"] == "ok" and record["value"] == pytest.approx(length_value(text))
        assert record["details"] == {"chars": len(text)}


def test_unreadable_rows_are_reported_and_the_rest_scored(tmp_path):
    source = write_jsonl(
        tmp_path / "in.jsonl",
        [
            {"id": "a", "prompt": "p", "completion": "abc"},
            '{"id": "b", "prompt": ',
            "42",
            {"id": "d", "prompt": "p"},
            {"id": "e", "prompt": "p", "completion": [{"role": "assistant", "content": "hello"}]},
        ],
    )
    summary = score_file(LengthReward(), source, tmp_path / "out.jsonl", options=QUIET)

    records = by_id(read_output(tmp_path / "out.jsonl"))
    assert records["d"]["status"] == "invalid_input" and records["d"]["value"] is None
    assert records["d"]["reason"] == "line 4: missing field 'completion'"
    assert records["d"]["details"] == {"row_error": "missing field 'completion'", "field": "completion"}
    assert records["row-1"]["reason"].startswith("line 2: malformed JSON")
    assert records["row-2"]["reason"] == "line 3: expected a JSON object, got int"
    assert records["a"]["value"] == pytest.approx(3 / 7) and records["e"]["value"] == pytest.approx(5 / 7)
    assert summary.row_errors == 3 and summary.statuses == Counter(ok=2, invalid_input=3)


def test_invalid_input_from_the_reward_is_recorded_per_sample(tmp_path):
    source = write_jsonl(
        tmp_path / "in.jsonl",
        [
            {"id": "x", "prompt": "p", "completion": "4", "reference": "4"},
            {"id": "y", "prompt": "p", "completion": "4"},
        ],
    )
    summary = score_file(NeedsReference(), source, tmp_path / "out.jsonl", options=QUIET)

    records = by_id(read_output(tmp_path / "out.jsonl"))
    assert records["x"]["value"] == 1.0
    assert records["y"]["status"] == "invalid_input"
    assert records["y"]["reason"] == "sample 'y': reference: this reward needs a reference"
    assert summary.row_errors == 0


@pytest.mark.parametrize(
    ("reward", "reason"),
    [
        (PoisonedBatchReward(), "reward 'poisoned' failed on the batch: RuntimeError: poisoned batch"),
        (ShortChangingReward(), "reward 'short_changing' failed on the batch: RuntimeError: "),
    ],
)
def test_a_batch_the_reward_cannot_score_fails_alone(tmp_path, reward, reason):
    texts = completions(12)
    texts[5] = "poison"
    records = [{"id": f"r{i}", "prompt": f"p{i}", "completion": text} for i, text in enumerate(texts)]
    source = write_jsonl(tmp_path / "in.jsonl", records)
    summary = score_file(reward, source, tmp_path / "out.jsonl", options=QUIET)

    output = by_id(read_output(tmp_path / "out.jsonl"))
    assert len(output) == 12
    failed = {row_id for row_id, record in output.items() if record["status"] == "error"}
    if isinstance(reward, PoisonedBatchReward):
        assert failed == {"r4", "r5", "r6", "r7"}
        assert output["r0"]["value"] == pytest.approx(length_value(texts[0]))
    else:
        assert len(failed) == 12
    assert all(output[row_id]["reason"].startswith(reason) for row_id in failed)
    assert all(output[row_id]["value"] is None for row_id in failed)
    assert summary.statuses["error"] == len(failed)


def test_batches_run_concurrently_up_to_the_limit(tmp_path):
    source = write_rows(tmp_path / "in.jsonl", 40)
    reward = SlowReward(delay=0.05)
    summary = score_file(
        reward,
        source,
        tmp_path / "out.jsonl",
        options=RunOptions(batch_size=4, concurrency=3, progress=False),
    )
    assert reward.peak == 3
    assert summary.scored == 40 and summary.statuses == Counter(ok=40)
    # 10 batches of 0.05 s, three at a time: well under the 0.5 s they would take one by one.
    assert summary.wall_s < 0.4


def test_records_are_on_disk_as_each_batch_completes(tmp_path):
    source = write_rows(tmp_path / "in.jsonl", 13)
    output = tmp_path / "out.jsonl"
    reward = OutputWatchingReward(output)
    score_file(reward, source, output, options=RunOptions(batch_size=4, concurrency=1, progress=False))
    assert reward.lines_seen == [0, 4, 8, 12]


@pytest.mark.parametrize("torn_tail", ["half a line", "a whole line without its newline"])
def test_resume_after_a_kill_scores_each_id_once_with_clean_run_values(tmp_path, torn_tail):
    source = write_rows(tmp_path / "in.jsonl", 30)
    clean = tmp_path / "clean.jsonl"
    score_file(LengthReward(), source, clean, options=QUIET)
    clean_lines = clean.read_text().splitlines(keepends=True)

    partial = tmp_path / "partial.jsonl"
    tail = clean_lines[12]
    tail = tail[: len(tail) // 2] if torn_tail == "half a line" else tail.rstrip("\n")
    partial.write_text("".join(clean_lines[:12]) + tail)
    summary = score_file(
        SlowReward(delay=0.001),
        source,
        partial,
        options=RunOptions(batch_size=5, concurrency=2, resume=True, progress=False),
    )

    resumed = read_output(partial)
    assert sorted(record["id"] for record in resumed) == sorted(f"r{i}" for i in range(30))
    assert by_id(resumed) == by_id(read_output(clean))
    assert (summary.resumed, summary.skipped, summary.scored, summary.rows) == (12, 12, 18, 30)


def test_resume_refuses_an_output_with_a_bad_line_before_the_end(tmp_path):
    source = write_rows(tmp_path / "in.jsonl", 5)
    output = tmp_path / "out.jsonl"
    score_file(LengthReward(), source, output, options=QUIET)
    lines = output.read_text().splitlines(keepends=True)
    output.write_text(lines[0] + "garbage\n" + "".join(lines[1:]))
    with pytest.raises(OutputError, match="line 2 is not a scoring record"):
        score_file(LengthReward(), source, output, options=RunOptions(resume=True, progress=False))


def test_resume_without_an_output_scores_everything(tmp_path):
    source = write_rows(tmp_path / "in.jsonl", 5)
    summary = score_file(LengthReward(), source, tmp_path / "new.jsonl", options=RunOptions(resume=True))
    assert summary.scored == 5 and summary.resumed == 0


def test_an_existing_output_is_only_replaced_when_asked(tmp_path):
    source = write_rows(tmp_path / "in.jsonl", 5)
    output = tmp_path / "out.jsonl"
    output.write_text('{"id": "old"}\n')
    with pytest.raises(OutputError, match="exists and is not empty; pass --resume"):
        score_file(LengthReward(), source, output, options=QUIET)
    assert output.read_text() == '{"id": "old"}\n'

    score_file(LengthReward(), source, output, options=RunOptions(overwrite=True, progress=False))
    assert sorted(by_id(read_output(output))) == [f"r{i}" for i in range(5)]

    output.write_text("")
    assert score_file(LengthReward(), source, output, options=QUIET).rows == 5


def test_summary_counts_and_means_match_the_output(tmp_path):
    texts = completions(25)
    lines: list[dict | str] = [
        {"id": f"r{i}", "prompt": "p", "completion": text} for i, text in enumerate(texts)
    ]
    lines[3] = "{not json"
    lines[9] = {"id": "r9", "prompt": "p", "completion": 9}
    source = write_jsonl(tmp_path / "in.jsonl", lines)
    output = tmp_path / "out.jsonl"
    summary = score_file(LengthReward(), source, output, options=QUIET)

    scored = [text for i, text in enumerate(texts) if i not in (3, 9)]
    long_ones = [text for text in scored if len(text) > 10]
    expected = {
        "reward": "length_mod7",
        "output": str(output),
        "rows": 25,
        "statuses": {"invalid_input": 2, "ok": 23},
        "row_errors": 2,
        "mean_value": pytest.approx(sum(map(length_value, scored)) / len(scored)),
        "breakdown_means": {
            "long": pytest.approx(sum(len(text) / 100 for text in long_ones) / len(long_ones)),
            "mod7": pytest.approx(sum(map(length_value, scored)) / len(scored)),
        },
        "resumed": 0,
        "skipped": 0,
        "scored": 25,
        "duplicate_ids": 0,
    }
    reported = summary.to_dict()
    assert reported["wall_s"] > 0 and reported["rows_per_s"] == pytest.approx(25 / reported["wall_s"])
    assert {key: reported[key] for key in expected} == expected
    assert json.loads(summary_path(output).read_text()) == reported
    assert summary_path(output).name == "out.jsonl.summary.json"

    table = dict(
        re.fullmatch(r"(.+?)\s{2,}(.+)", line.strip()).groups() for line in summary.table().splitlines()
    )
    assert table["mean value"] == f"{reported['mean_value']:.4f}"
    assert table["long"] == f"{reported['breakdown_means']['long']:.4f}"
    assert (table["ok"], table["invalid_input"], table["row errors"]) == ("23", "2", "2")


def test_duplicate_ids_are_all_scored_and_warned_about(tmp_path):
    source = write_jsonl(
        tmp_path / "in.jsonl",
        [{"id": row_id, "prompt": "p", "completion": "c"} for row_id in ["a", "b", "a", "a"]],
    )
    summary = score_file(LengthReward(), source, tmp_path / "out.jsonl", options=QUIET)
    assert [record["id"] for record in read_output(tmp_path / "out.jsonl")] == ["a", "b", "a", "a"]
    assert summary.duplicate_ids == 2
    assert "warning: 2 input rows repeat an earlier id" in summary.table()


def test_limit_reads_the_first_rows_and_resume_extends_it(tmp_path):
    source = write_rows(tmp_path / "in.jsonl", 10)
    output = tmp_path / "out.jsonl"
    score_file(LengthReward(), source, output, options=RunOptions(limit=4, progress=False))
    assert sorted(by_id(read_output(output))) == ["r0", "r1", "r2", "r3"]
    summary = score_file(
        LengthReward(), source, output, options=RunOptions(limit=7, resume=True, progress=False)
    )
    assert sorted(by_id(read_output(output))) == [f"r{i}" for i in range(7)]
    assert (summary.skipped, summary.scored) == (4, 3)


def test_jsonl_parquet_and_saved_dataset_give_the_same_scores(tmp_path):
    records = [
        {
            "uid": f"u{i}",
            "question": [{"role": "user", "content": f"q{i}"}],
            "answer": [{"role": "assistant", "content": text}],
        }
        for i, text in enumerate(completions(9))
    ]
    write_jsonl(tmp_path / "in.jsonl", records)
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "in.parquet", row_group_size=4)
    datasets.Dataset.from_list(records).save_to_disk(tmp_path / "in_dataset")

    columns = Columns(prompt="question", completion="answer", id="uid")
    outputs = {}
    for name in ("in.jsonl", "in.parquet", "in_dataset"):
        output = tmp_path / f"{name}.out.jsonl"
        score_file(LengthReward(), tmp_path / name, output, columns=columns, options=QUIET)
        outputs[name] = {row_id: record["value"] for row_id, record in by_id(read_output(output)).items()}
    expected = {f"u{i}": pytest.approx(length_value(text)) for i, text in enumerate(completions(9))}
    assert outputs["in.jsonl"] == outputs["in.parquet"] == outputs["in_dataset"] == expected


def test_progress_bar_goes_to_stderr_with_a_rate(tmp_path, capsys):
    source = write_rows(tmp_path / "in.jsonl", 5)
    score_file(LengthReward(), source, tmp_path / "out.jsonl", options=RunOptions(progress=True))
    captured = capsys.readouterr()
    assert "rows/s" in captured.err and captured.out == ""


def test_run_options_reject_contradictions():
    with pytest.raises(ValueError, match="exclude each other"):
        RunOptions(resume=True, overwrite=True)
    with pytest.raises(ValueError, match="at least 1"):
        RunOptions(batch_size=0)


class TupleKeyDetails(RuleReward):
    name = "tuple_key_details"

    def check(self, sample):
        return Score(1.0, details={"odd": {(1, 2): 0}, "object": object()})


def test_details_that_are_not_json_cost_fidelity_not_the_run(tmp_path):
    source = write_rows(tmp_path / "in.jsonl", 3)
    score_file(TupleKeyDetails(), source, tmp_path / "out.jsonl", options=QUIET)
    records = read_output(tmp_path / "out.jsonl")
    assert len(records) == 3 and records[0]["details"]["odd"] == {"(1, 2)": 0}


class GatedReward(Reward):
    """Finishes only when its gate opens, like a judge route behind a slow model."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        await self.gate.wait()
        return [Score(0.5) for _ in samples]


def test_a_route_moves_progress_as_each_route_finishes():
    from rewardlab.offline.rows import Row
    from rewardlab.offline.runner import score_batch
    from rewardlab.rewards.combine import Combine, Route

    async def run(reward, gated):
        rows = [
            Row(i, None, f"r{i}", Sample(completion="abc", fields={"task": task}))
            for i, task in enumerate("ffs")
        ]
        reported: list[int] = []
        batch = asyncio.create_task(score_batch(reward, rows, reported.append))
        await asyncio.sleep(0.05)
        early = list(reported)
        gated.gate.set()
        records = await batch
        return early, reported, records

    gated = GatedReward()
    early, reported, records = asyncio.run(run(Route({"f": LengthReward(), "s": gated}, by="task"), gated))
    # The two rule rows are counted while the gated route still runs, its row when it finishes.
    assert (early, reported) == ([2], [2, 1])
    assert [record["status"] for record in records] == ["ok", "ok", "ok"]
    # A route inside a combination finishes only parts of rows: it reports nothing.
    gated = GatedReward()
    nested = Combine({"routed": Route({"f": LengthReward(), "s": gated}, by="task")})
    early, reported, _ = asyncio.run(run(nested, gated))
    assert (early, reported) == ([], [])


def _rows(groups: Sequence[tuple[str, int]]) -> list:
    from rewardlab.offline.rows import Row

    rows, index = [], 0
    for prompt, count in groups:
        for _ in range(count):
            rows.append(
                Row(index=index, line=None, id=f"r{index}", sample=Sample(prompt, "c", id=f"r{index}"))
            )
            index += 1
    return rows


def test_batches_are_cut_only_where_the_group_changes():
    from rewardlab.offline.runner import batches

    rows = _rows([("a", 3), ("b", 3), ("c", 2), ("d", 5)])
    sizes = [[row.sample.prompt for row in batch] for batch in batches(rows, 4)]
    assert sizes == [["a"] * 3 + ["b"] * 3, ["c"] * 2 + ["d"] * 5]
    assert [row.id for batch in batches(rows, 4) for row in batch] == [row.id for row in rows]


def test_a_group_field_keeps_different_prompts_together():
    from rewardlab.offline.rows import Row
    from rewardlab.offline.runner import batches

    rows = [
        Row(index=i, line=None, id=str(i), sample=Sample(f"p{i}", "c", fields={"group_id": i // 3}))
        for i in range(6)
    ]
    assert [len(batch) for batch in batches(rows, 2)] == [3, 3]


def test_a_group_past_the_overflow_is_cut_with_a_warning(caplog):
    from rewardlab.offline.runner import GROUP_OVERFLOW, batches

    rows = _rows([("same", 2 * GROUP_OVERFLOW + 1)])
    with caplog.at_level("WARNING"):
        sizes = [len(batch) for batch in batches(rows, 2)]
    assert sizes == [2 * GROUP_OVERFLOW, 1]
    assert "split across batches" in caplog.text


def test_a_group_aware_reward_sees_each_group_whole(tmp_path):
    class GroupSizes(Reward):
        """Scores each sample with the size of its group as seen in its batch."""

        name = "group_sizes"

        async def ascore(self, samples):
            counts = Counter(sample.group_key() for sample in samples)
            return [Score(float(counts[sample.group_key()])) for sample in samples]

    data = tmp_path / "rows.jsonl"
    data.write_text(
        "".join(json.dumps({"prompt": f"q{i // 6}", "completion": str(i)}) + "\n" for i in range(30))
    )
    output = tmp_path / "scores.jsonl"
    score_file(GroupSizes(), data, output, options=RunOptions(batch_size=4, progress=False))
    values = [json.loads(line)["value"] for line in output.read_text().splitlines()]
    assert values == [6.0] * 30
