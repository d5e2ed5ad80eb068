import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rewardlab.rewards.process_pool import (
    KillableProcessPool,
    TaskAbandoned,
    TaskFailed,
    TaskTimeout,
    WorkerCrashed,
)


def spin_forever():
    while True:
        pass


def exit_abruptly():
    os._exit(3)


def allocate(megabytes):
    return len(bytearray(megabytes << 20))


def fail():
    raise KeyError("missing")


def room_left():
    """This worker's address-space limit less its size now, in MiB."""
    import resource

    with open("/proc/self/status") as status:
        size = next(int(line.split()[1]) << 10 for line in status if line.startswith("VmSize:"))
    return (resource.getrlimit(resource.RLIMIT_AS)[0] - size) >> 20


@pytest.fixture
def pool():
    pool = KillableProcessPool(2, memory_limit_bytes=512 << 20)
    yield pool
    pool.close()


def test_results_and_remote_exceptions(pool):
    assert pool.submit(pow, 3, 4, budget_s=10).result() == 81
    with pytest.raises(TaskFailed, match="KeyError"):
        pool.submit(fail, budget_s=10).result()


def test_overrunning_task_is_killed_and_the_pool_keeps_working(pool):
    started = time.monotonic()
    with pytest.raises(TaskTimeout, match="budget"):
        pool.submit(spin_forever, budget_s=0.5).result()
    assert time.monotonic() - started < 5
    assert pool.submit(pow, 2, 5, budget_s=10).result() == 32


def test_crash_and_memory_limit_are_contained(pool):
    with pytest.raises(WorkerCrashed, match="code 3"):
        pool.submit(exit_abruptly, budget_s=10).result()
    with pytest.raises((TaskFailed, WorkerCrashed)):
        pool.submit(allocate, 2048, budget_s=10).result()
    assert pool.submit(allocate, 16, budget_s=10).result() == 16 << 20


ROOM_WITH_PRELOADS = """
from rewardlab.rewards.process_pool import KillableProcessPool
from tests.rewards.test_process_pool import room_left
pool = KillableProcessPool(1, preload=["numpy", "sympy"], memory_limit_bytes=512 << 20)
print(pool.submit(room_left, budget_s=60).result())
pool.close()
"""


def test_the_memory_limit_is_room_on_top_of_what_the_worker_starts_with():
    # The forkserver holds every preload asked for in the process (another reward's modules: a
    # few hundred MiB of address space with these two); the worker's tasks still get 512 MiB.
    # With an absolute limit they had about 320 MiB, and a math worker failed legitimate answers
    # with MemoryError in a pipeline that also checked instructions.
    pytest.importorskip("numpy")
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run(
        [sys.executable, "-c", ROOM_WITH_PRELOADS],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        check=True,
    )
    assert 400 < int(run.stdout.split()[-1]) <= 512


def test_tasks_run_in_parallel_from_asyncio(pool):
    async def run_all():
        return await asyncio.gather(*(pool.run(pow, 2, i, budget_s=10) for i in range(20)))

    assert asyncio.run(run_all()) == [2**i for i in range(20)]


def test_closed_pool_refuses_work():
    pool = KillableProcessPool(1)
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(pow, 1, 1, budget_s=1)


def test_a_task_that_cannot_be_sent_fails_alone(pool):
    with pytest.raises(TaskFailed, match=r"pickle|Pickling|attribute"):
        pool.submit(lambda: 1, budget_s=5).result(timeout=30)
    assert pool.submit(pow, 2, 3, budget_s=10).result(timeout=30) == 8


def test_workers_do_not_rerun_an_unguarded_main_script(tmp_path):
    # A training script without an `if __name__ == "__main__":` guard, run from a file and from
    # stdin: its top level must run once, not again in every worker.
    import subprocess
    import sys

    script = (
        "print('top level ran')\n"
        "from rewardlab.rewards.process_pool import KillableProcessPool\n"
        "pool = KillableProcessPool(2)\n"
        "print(sum(pool.submit(pow, 2, i, budget_s=30).result() for i in range(4)))\n"
        "pool.close()\n"
    )
    path = tmp_path / "train.py"
    path.write_text(script)
    for command, stdin in (([sys.executable, str(path)], None), ([sys.executable, "-"], script)):
        result = subprocess.run(
            command, input=stdin, capture_output=True, text=True, timeout=120, check=False
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["top", "level", "ran", "15"]


def spin_on(item):
    """Returns the item, spinning forever on "spin" and exiting the worker on "exit"."""
    while item == "spin":
        pass
    if item == "exit":
        os._exit(4)
    if item == "fail":
        raise ValueError("bad item")
    return item * 2


def test_each_item_has_its_own_budget_and_the_rest_go_on(pool):
    started = time.monotonic()
    outcomes = pool.submit_each(spin_on, [1, "spin", 2, "exit", 3, "fail", 4], budget_s_each=0.5).result()
    elapsed = time.monotonic() - started
    assert [o.value for o in outcomes] == [2, None, 4, None, 6, None, 8]
    assert isinstance(outcomes[1].error, TaskTimeout) and "0.5s budget" in str(outcomes[1].error)
    assert isinstance(outcomes[3].error, WorkerCrashed) and "code 4" in str(outcomes[3].error)
    assert isinstance(outcomes[5].error, TaskFailed) and "bad item" in str(outcomes[5].error)
    assert elapsed < 10, elapsed


def test_shared_arguments_travel_once_per_task(pool):
    outcomes = pool.submit_each(pow, [1, 2, 3], shared=(2,), budget_s_each=5).result()
    assert [o.value for o in outcomes] == [2, 4, 8]


def test_a_task_that_cannot_be_unpickled_in_the_worker_fails_every_item(pool):
    from tests.rewards.unpicklable import Unpicklable

    outcomes = pool.submit_each(spin_on, [1, 2], shared=(), budget_s_each=5).result()
    assert [o.value for o in outcomes] == [2, 4]
    outcomes = pool.submit_each(pow, [1, 2], shared=(Unpicklable(),), budget_s_each=5).result()
    assert all(isinstance(o.error, TaskFailed) and "refuses" in str(o.error) for o in outcomes)


def test_an_abandoned_task_frees_its_worker_at_once(pool):
    future = pool.submit_each(spin_on, ["spin", 1, 2], budget_s_each=60)
    time.sleep(0.5)  # the worker is spinning on the first item
    started = time.monotonic()
    pool.abandon(future)
    outcomes = future.result(timeout=10)
    assert time.monotonic() - started < 5
    assert isinstance(outcomes[0].error, WorkerCrashed)
    assert all(isinstance(o.error, TaskAbandoned) for o in outcomes[1:])
    assert pool.submit_each(spin_on, [5], budget_s_each=5).result()[0].value == 10
