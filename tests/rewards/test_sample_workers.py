"""Rule rewards check samples in killable workers: a budget per sample, failures per sample,
order kept, and the caller never stalls."""

import itertools
import threading
import time

import pytest

from rewardlab import RuleReward, Sample, Score, Status, build


class SpinsOnDemand(RuleReward):
    """1.0 for every sample, after spinning forever on "spin" (holding the GIL, as a C regex does)."""

    def __init__(self, **options):
        self.name = "spins"
        self.configure_rule(**options)

    def check(self, sample):
        while sample.completion == "spin":
            pass
        if sample.completion == "raise":
            raise KeyError("boom")
        return Score(float(len(sample.completion)))


class Unpicklable(SpinsOnDemand):
    def __init__(self, **options):
        super().__init__(**options)
        self.lock = threading.Lock()  # locks do not pickle


def test_results_keep_their_order_and_fail_one_by_one():
    reward = SpinsOnDemand(sample_budget_s=0.5)
    completions = ["a", "bb", "spin", "ccc", "raise", "dddd", "spin", "e"]
    started = time.monotonic()
    scores = reward.score([Sample(completion=c, id=f"s{i}") for i, c in enumerate(completions)])
    elapsed = time.monotonic() - started
    assert [s.status for s in scores] == [
        Status.OK, Status.OK, Status.TIMEOUT, Status.OK, Status.ERROR, Status.OK, Status.TIMEOUT, Status.OK,
    ]  # fmt: skip
    assert [s.value for s in scores if s.ok] == [1.0, 2.0, 3.0, 4.0, 1.0]
    assert "'s2'" in scores[2].reason and "budget" in scores[2].reason
    assert "'s4'" in scores[4].reason and "KeyError" in scores[4].reason
    assert elapsed < 10, elapsed


def test_a_reward_that_cannot_reach_a_worker_fails_every_sample_with_the_reason():
    scores = Unpicklable().score([Sample(completion="a"), Sample(completion="b")])
    assert all(s.status is Status.ERROR and "worker process" in s.reason for s in scores)
    inline = Unpicklable(execution="inline").score([Sample(completion="a")])
    assert inline[0].value == 1.0


def test_a_stalled_check_does_not_stall_the_caller():
    """While a worker grinds on one sample, the calling process keeps running its threads."""
    reward = SpinsOnDemand(sample_budget_s=1.5)
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.05)

    ticker = threading.Thread(target=tick)
    ticker.start()
    scores = reward.score([Sample(completion="spin")])
    stop.set()
    ticker.join()
    assert scores[0].status is Status.TIMEOUT
    gaps = [later - earlier for earlier, later in itertools.pairwise(ticks)]
    assert len(ticks) > 10 and max(gaps) < 0.5, max(gaps)


@pytest.mark.parametrize(("option", "value"), [("execution", "thread"), ("sample_budget_s", 0)])
def test_options_are_checked(option, value):
    with pytest.raises(ValueError, match=option):
        build({"type": "string_match", option: value})


def test_built_in_rule_rewards_run_in_workers_and_your_own_inline():
    assert build({"type": "string_match"}).execution == "worker"
    assert build({"type": "math_answer"}).execution == "worker"

    class Mine(RuleReward):
        def check(self, sample):
            return Score(1.0)

    assert Mine().execution == "inline" and Mine().score([Sample()])[0].value == 1.0


def test_a_sample_that_cannot_reach_a_worker_fails_alone():
    reward = SpinsOnDemand()
    samples = [
        Sample(completion="a" * n, fields={"lock": threading.Lock()} if n == 3 else {}) for n in range(1, 7)
    ]
    scores = reward.score(samples)
    assert [s.status for s in scores] == [Status.OK] * 2 + [Status.ERROR] + [Status.OK] * 3
    assert "worker process" in scores[2].reason
    assert [s.value for s in scores if s.ok] == [1.0, 2.0, 4.0, 5.0, 6.0]
