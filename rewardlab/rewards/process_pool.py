"""A pool of worker processes whose tasks have a wall-clock budget, enforced by killing the worker.

Why not `concurrent.futures.ProcessPoolExecutor`: it cannot stop one running task, so a single
pathological input (a CAS simplification that never ends, a 10^(10^10) power) holds a worker
forever. Why not `signal.alarm`: it only works in the main thread, and rewards run inside TRL's
event-loop thread and in thread pools. Here each worker is owned by one dispatcher thread; when a
task overruns its budget, that thread kills the worker, reports a timeout, and starts a fresh one.

Workers start from a forkserver that has already imported the modules given in ``preload``, so
replacing a killed worker costs milliseconds, not a fresh interpreter and a CAS import.

A task is one call, or (`submit_each`) one function over several items with a budget per item:
the worker answers item by item, so a pool can cut off the one item that overruns, report it,
and carry on with the rest on a fresh worker, while a batch pays one round trip.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import multiprocessing
import queue
import resource
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

_MAIN_LOCK = threading.Lock()
#: Modules every pool asked its forkserver to import. There is one forkserver per process, started
#: with the first worker; asking for all of them (not only the first pool's) keeps every pool warm.
_PRELOAD: set[str] = set()
#: How long a worker may take to receive a task (unpickling it imports the modules it needs)
#: before the first item's budget starts.
STARTUP_ALLOWANCE_S = 60.0


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    """Start a worker without re-importing the caller's ``__main__`` in it.

    multiprocessing re-runs the main script in every new worker (to find functions defined
    there). Our workers only run rewardlab functions, and a training script without an
    ``if __name__ == "__main__"`` guard would start training again inside each worker; a main
    module read from stdin or a notebook cannot be re-imported at all. So while a worker starts,
    ``__main__`` does not say where it came from.
    """
    main = sys.modules["__main__"]
    with _MAIN_LOCK:
        saved: dict[str, Any] = {
            key: main.__dict__[key] for key in ("__spec__", "__file__") if key in main.__dict__
        }
        main.__dict__["__spec__"] = None
        main.__dict__.pop("__file__", None)
        try:
            yield
        finally:
            main.__dict__.pop("__spec__", None)
            main.__dict__.update(saved)


def preload_in_workers(*modules: str) -> None:
    """Ask the forkserver to import ``modules`` before it forks any worker, so every worker
    starts with them imported. Call it when a reward is built: the forkserver starts with the
    first worker of any pool, and modules asked for after that are imported by each worker."""
    _PRELOAD.update(modules)
    multiprocessing.get_context("forkserver").set_forkserver_preload(sorted(_PRELOAD))


class TaskTimeout(TimeoutError):
    """The task ran past its budget and its worker was killed."""


class WorkerCrashed(RuntimeError):
    """The worker died while running the task (out of memory, a segfault, os._exit)."""


class TaskFailed(RuntimeError):
    """The task raised inside the worker; the message carries the remote traceback's last line."""


class TaskAbandoned(RuntimeError):
    """The caller stopped waiting (`KillableProcessPool.abandon`) before the item ran."""


def _failure(error: BaseException) -> tuple[str, str]:
    return "error", traceback.format_exception_only(type(error), error)[-1].strip()


def _address_space_bytes() -> int:
    """This process's address space now (``VmSize``), 0 where ``/proc`` does not tell."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _worker_main(connection: Connection, memory_limit_bytes: int | None) -> None:
    if memory_limit_bytes is not None:
        # The limit is what a task may add to what the worker holds when it starts: the
        # forkserver it is forked from has imported whatever every pool of this process asked it
        # to preload (an instruction checker's nltk, a CAS), so an absolute limit would leave a
        # math worker less room in a pipeline that also checks instructions than alone, and a
        # legitimate answer would fail with MemoryError depending on which rewards were built
        # first.
        limit = _address_space_bytes() + memory_limit_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    while True:
        try:
            kind, function, shared, items = connection.recv()
        except EOFError:
            return
        except BaseException as error:  # noqa: BLE001 - a task that cannot be unpickled here
            connection.send(_failure(error))
            continue
        if kind == "call":
            try:
                connection.send(("ok", function(*shared)))
            except BaseException as error:  # noqa: BLE001 - every failure must reach the caller
                connection.send(_failure(error))
            continue
        connection.send(("ready", None))
        for item in items:
            try:
                connection.send(("ok", function(*shared, item)))
            except BaseException as error:  # noqa: BLE001 - every failure must reach the caller
                connection.send(_failure(error))


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one item of `KillableProcessPool.submit_each` came to: a value, or the error
    (`TaskTimeout`, `WorkerCrashed` or `TaskFailed`) that took its place."""

    value: Any = None
    error: Exception | None = None


@dataclass(slots=True)
class _Task:
    function: Callable[..., Any]
    args: tuple
    budget_s: float
    future: concurrent.futures.Future
    #: Set for `submit_each`: the items, each given to ``function(*args, item)``.
    items: list | None = None
    #: Set by `KillableProcessPool.abandon`: nobody waits for the rest of the items.
    abandoned: threading.Event = field(default_factory=threading.Event)


class LazyPool:
    """A `KillableProcessPool` made on first use: thread-safe (rewards are called from several
    threads), closed with its owner, and left behind when the owner is pickled (a copy makes its
    own on first use)."""

    def __init__(self, factory: Callable[[], KillableProcessPool]):
        self.factory = factory
        self._pool: KillableProcessPool | None = None
        self._lock = threading.Lock()

    def get(self) -> KillableProcessPool:
        with self._lock:
            if self._pool is None:
                self._pool = self.factory()
            return self._pool

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    def __getstate__(self) -> dict[str, Any]:
        return {"factory": self.factory}

    def __setstate__(self, state: dict[str, Any]) -> None:
        LazyPool.__init__(self, state["factory"])


class KillableProcessPool:
    """Run picklable top-level functions in worker processes, each call with its own time budget.

    Args:
        size: Number of worker processes (and of tasks that run at once).
        preload: Modules the forkserver imports once, so each worker starts warm (see
            `preload_in_workers`: asked for after the forkserver has started, they are imported
            by each worker on first use instead).
        memory_limit_bytes: Address space a worker's tasks may add to what the worker holds when
            it starts (its ``RLIMIT_AS`` is that much above its size then); a task that exceeds
            it fails with a `TaskFailed` (MemoryError) or `WorkerCrashed`, never takes the host
            down.

    Example:
        >>> pool = KillableProcessPool(size=2)
        >>> pool.submit(pow, 2, 10, budget_s=5.0).result()
        1024
        >>> pool.close()
    """

    def __init__(self, size: int, preload: Sequence[str] = (), memory_limit_bytes: int | None = None):
        if size < 1:
            raise ValueError("a pool needs at least one worker")
        self.size = size
        self.memory_limit_bytes = memory_limit_bytes
        self._context = multiprocessing.get_context("forkserver")
        preload_in_workers(*preload)
        self._tasks: queue.Queue[_Task | None] = queue.Queue()
        self._busy: dict[int, BaseProcess] = {}  # dispatcher thread -> its worker at work
        self._running: dict[int, _Task] = {}  # dispatcher thread -> the task its worker runs
        self._closed = False
        self._threads = [
            threading.Thread(target=self._dispatch, name=f"rewardlab-pool-{i}", daemon=True)
            for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, function: Callable[..., Any], *args: Any, budget_s: float) -> concurrent.futures.Future:
        """Queue ``function(*args)``; the future fails with `TaskTimeout` after ``budget_s`` of running."""
        if self._closed:
            raise RuntimeError("the pool is closed")
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._tasks.put(_Task(function, args, budget_s, future))
        return future

    def submit_each(
        self, function: Callable[..., Any], items: Sequence[Any], *, shared: tuple = (), budget_s_each: float
    ) -> concurrent.futures.Future:
        """Queue ``function(*shared, item)`` for every item, run in order in one worker; the future's
        result is one `Outcome` per item. An item that runs past ``budget_s_each`` gets a
        `TaskTimeout` and its worker is killed; the items after it go on in a fresh worker."""
        if self._closed:
            raise RuntimeError("the pool is closed")
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._tasks.put(_Task(function, shared, budget_s_each, future, list(items)))
        return future

    def abandon(self, future: concurrent.futures.Future) -> None:
        """Stop a `submit_each` task whose caller no longer waits (a request past its deadline):
        the worker running it is killed and the items not yet run are not run."""
        for ident, task in list(self._running.items()):
            if task.future is future:
                task.abandoned.set()
                process = self._busy.get(ident)
                if process is not None:
                    process.kill()

    async def run(self, function: Callable[..., Any], *args: Any, budget_s: float) -> Any:
        """`submit` for asyncio callers; awaiting does not block the event loop."""
        return await asyncio.wrap_future(self.submit(function, *args, budget_s=budget_s))

    def close(self) -> None:
        """Stop the workers: queued tasks that have not started are cancelled, running ones are
        killed (their futures fail with `WorkerCrashed`)."""
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._tasks.put(None)
        for process in list(self._busy.values()):
            process.kill()
        for thread in self._threads:
            thread.join(timeout=5)

    def _start_worker(self) -> tuple[BaseProcess, Connection]:
        parent, child = self._context.Pipe()
        process = self._context.Process(
            target=_worker_main, args=(child, self.memory_limit_bytes), daemon=True
        )
        with _main_module_hidden():
            process.start()
        child.close()
        return process, parent

    @classmethod
    def _retire_worker(cls, worker: tuple[BaseProcess, Connection] | None) -> None:
        """Let an idle worker exit on its own (so its exit handlers release what it holds, such
        as sandboxes), and kill it only if it does not."""
        if worker is None:
            return
        process, connection = worker
        connection.close()
        process.join(timeout=2)
        cls._stop_worker(worker)

    @staticmethod
    def _stop_worker(worker: tuple[BaseProcess, Connection] | None) -> None:
        if worker is None:
            return
        process, connection = worker
        process.kill()
        process.join(timeout=5)
        connection.close()

    def _dispatch(self) -> None:
        worker: tuple[BaseProcess, Connection] | None = None
        try:
            while (task := self._tasks.get()) is not None:
                if self._closed:
                    task.future.cancel()
                    continue
                if not task.future.set_running_or_notify_cancel():
                    continue
                try:
                    if worker is None or not worker[0].is_alive():
                        self._stop_worker(worker)
                        worker = self._start_worker()
                    worker = self._run(worker, task) if task.items is None else self._run_each(worker, task)
                except BaseException as error:  # noqa: BLE001 - the thread must outlive any one task
                    # A task that cannot be sent (unpicklable), or a worker that cannot start:
                    # fail this task, start afresh for the next.
                    if not task.future.done():
                        task.future.set_exception(TaskFailed(f"{type(error).__name__}: {error}"))
                    self._stop_worker(worker)
                    worker = None
        finally:
            self._retire_worker(worker)

    def _run(
        self, worker: tuple[BaseProcess, Connection], task: _Task
    ) -> tuple[BaseProcess, Connection] | None:
        """Run one task; return the worker if it is still usable, else None."""
        process, connection = worker
        started = time.monotonic()
        self._busy[threading.get_ident()] = process
        try:
            connection.send(("call", task.function, task.args, None))
            if not connection.poll(task.budget_s):
                self._stop_worker(worker)
                task.future.set_exception(
                    TaskTimeout(f"ran past its {task.budget_s:g}s budget ({time.monotonic() - started:.1f}s)")
                )
                return None
            outcome, payload = connection.recv()
        except (EOFError, OSError, BrokenPipeError):
            self._stop_worker(worker)
            task.future.set_exception(WorkerCrashed(f"worker exited with code {process.exitcode}"))
            return None
        finally:
            self._busy.pop(threading.get_ident(), None)
        if outcome == "ok":
            task.future.set_result(payload)
        else:
            task.future.set_exception(TaskFailed(payload))
        return worker

    def _run_each(
        self, worker: tuple[BaseProcess, Connection] | None, task: _Task
    ) -> tuple[BaseProcess, Connection] | None:
        """Run a `submit_each` task, restarting the worker after an item that overran or crashed."""
        assert task.items is not None
        outcomes: list[Outcome] = []
        self._running[threading.get_ident()] = task
        while len(outcomes) < len(task.items):
            if task.abandoned.is_set():
                outcomes.extend(
                    Outcome(error=TaskAbandoned("abandoned")) for _ in task.items[len(outcomes) :]
                )
                break
            if worker is None or not worker[0].is_alive():
                self._stop_worker(worker)
                worker = self._start_worker()
            worker = self._run_items(worker, task, outcomes)
        self._running.pop(threading.get_ident(), None)
        task.future.set_result(outcomes)
        return worker

    def _run_items(
        self, worker: tuple[BaseProcess, Connection], task: _Task, outcomes: list[Outcome]
    ) -> tuple[BaseProcess, Connection] | None:
        """Send the items not yet run; add an outcome per item answered; return the worker if it
        is still usable (None after an overrun or a crash, with that item's outcome added)."""
        assert task.items is not None
        process, connection = worker
        remaining = task.items[len(outcomes) :]
        self._busy[threading.get_ident()] = process
        try:
            connection.send(("each", task.function, task.args, remaining))
            if not connection.poll(STARTUP_ALLOWANCE_S):
                raise EOFError
            kind, payload = connection.recv()
            if kind == "error":  # the task could not be unpickled: no item can run
                outcomes.extend(Outcome(error=TaskFailed(payload)) for _ in remaining)
                return worker
            for _ in remaining:
                started = time.monotonic()
                if not connection.poll(task.budget_s):
                    self._stop_worker(worker)
                    elapsed = time.monotonic() - started
                    error = TaskTimeout(f"ran past its {task.budget_s:g}s budget ({elapsed:.1f}s)")
                    outcomes.append(Outcome(error=error))
                    return None
                kind, payload = connection.recv()
                outcomes.append(Outcome(payload) if kind == "ok" else Outcome(error=TaskFailed(payload)))
        except (EOFError, OSError, BrokenPipeError):
            self._stop_worker(worker)
            outcomes.append(Outcome(error=WorkerCrashed(f"worker exited with code {process.exitcode}")))
            return None
        finally:
            self._busy.pop(threading.get_ident(), None)
        return worker
