"""A pool of worker processes whose tasks have a wall-clock budget, enforced by killing the worker.

Why not `concurrent.futures.ProcessPoolExecutor`: it cannot stop one running task, so a single
pathological input (a CAS simplification that never ends, a 10^(10^10) power) holds a worker
forever. Why not `signal.alarm`: it only works in the main thread, and rewards run inside TRL's
event-loop thread and in thread pools. Here each worker is owned by one dispatcher thread; when a
task overruns its budget, that thread kills the worker, reports a timeout, and starts a fresh one.

Workers start from a forkserver that has already imported the modules given in ``preload``, so
replacing a killed worker costs milliseconds, not a fresh interpreter and a CAS import.
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
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

_MAIN_LOCK = threading.Lock()


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
        saved = {key: main.__dict__[key] for key in ("__spec__", "__file__") if key in main.__dict__}
        main.__dict__["__spec__"] = None
        main.__dict__.pop("__file__", None)
        try:
            yield
        finally:
            main.__dict__.pop("__spec__", None)
            main.__dict__.update(saved)


class TaskTimeout(TimeoutError):
    """The task ran past its budget and its worker was killed."""


class WorkerCrashed(RuntimeError):
    """The worker died while running the task (out of memory, a segfault, os._exit)."""


class TaskFailed(RuntimeError):
    """The task raised inside the worker; the message carries the remote traceback's last line."""


def _worker_main(connection: Connection, memory_limit_bytes: int | None) -> None:
    if memory_limit_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
    while True:
        try:
            function, args = connection.recv()
        except EOFError:
            return
        try:
            connection.send(("ok", function(*args)))
        except BaseException as error:  # noqa: BLE001 - every failure must reach the caller
            detail = traceback.format_exception_only(type(error), error)[-1].strip()
            connection.send(("error", detail))


@dataclass(slots=True)
class _Task:
    function: Callable[..., Any]
    args: tuple
    budget_s: float
    future: concurrent.futures.Future


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
        self.__init__(state["factory"])


class KillableProcessPool:
    """Run picklable top-level functions in worker processes, each call with its own time budget.

    Args:
        size: Number of worker processes (and of tasks that run at once).
        preload: Modules the forkserver imports once, so each worker starts warm. The forkserver
            is one per process: only the first pool's preload takes effect, later pools' workers
            import what they need on first use.
        memory_limit_bytes: Address-space limit per worker (``RLIMIT_AS``); a task that exceeds it
            fails with a `TaskFailed` (MemoryError) or `WorkerCrashed`, never takes the host down.

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
        self._context.set_forkserver_preload(list(preload))
        self._tasks: queue.Queue[_Task | None] = queue.Queue()
        self._busy: dict[int, multiprocessing.Process] = {}  # dispatcher thread -> its worker at work
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

    def _start_worker(self) -> tuple[multiprocessing.Process, Connection]:
        parent, child = self._context.Pipe()
        process = self._context.Process(
            target=_worker_main, args=(child, self.memory_limit_bytes), daemon=True
        )
        with _main_module_hidden():
            process.start()
        child.close()
        return process, parent

    @classmethod
    def _retire_worker(cls, worker: tuple[multiprocessing.Process, Connection] | None) -> None:
        """Let an idle worker exit on its own (so its exit handlers release what it holds, such
        as sandboxes), and kill it only if it does not."""
        if worker is None:
            return
        process, connection = worker
        connection.close()
        process.join(timeout=2)
        cls._stop_worker(worker)

    @staticmethod
    def _stop_worker(worker: tuple[multiprocessing.Process, Connection] | None) -> None:
        if worker is None:
            return
        process, connection = worker
        process.kill()
        process.join(timeout=5)
        connection.close()

    def _dispatch(self) -> None:
        worker: tuple[multiprocessing.Process, Connection] | None = None
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
                    worker = self._run(worker, task)
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
        self, worker: tuple[multiprocessing.Process, Connection], task: _Task
    ) -> tuple[multiprocessing.Process, Connection] | None:
        """Run one task; return the worker if it is still usable, else None."""
        process, connection = worker
        started = time.monotonic()
        self._busy[threading.get_ident()] = process
        try:
            connection.send((task.function, task.args))
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
