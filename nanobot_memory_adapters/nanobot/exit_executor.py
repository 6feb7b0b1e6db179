"""An event-loop default executor that cannot hold the process after nanobot closes.

Backends call blocking code from ``asyncio.to_thread`` (mem0 calls its LLM that way). A
call stuck there (a CPU model answering for minutes) outlives the awaiting task: when
delivery stops at exit, the thread runs on, and ``asyncio.run`` joins the default
executor's threads before the process may end (Python 3.11: without a bound). The plugin
installs this executor on nanobot's loop when it starts delivering: its threads are
daemons, and ``shutdown(wait=True)`` waits at most ``grace_s`` for them; a thread still
running then is abandoned (it ends with the process). Everything nanobot awaited has
finished by then; only work whose awaiting task was cancelled can still run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures.thread as _cf_thread
import threading
import time
from concurrent.futures import ThreadPoolExecutor

GRACE_S = 1.0


class ExitSafeExecutor(ThreadPoolExecutor):
    def __init__(self, grace_s: float = GRACE_S) -> None:
        super().__init__(thread_name_prefix="nanobot-memory-io")
        self.grace_s = grace_s

    def _adjust_thread_count(self) -> None:
        # The pool's own first checks, here so a submit an idle worker takes (or a full
        # pool) does not pay for a helper thread: an idle worker takes the job.
        if self._idle_semaphore.acquire(timeout=0):  # type: ignore[attr-defined]
            return
        if len(self._threads) >= self._max_workers:  # type: ignore[attr-defined]
            return
        # A thread inherits ``daemon`` from the thread that creates it: create the worker
        # from a short-lived daemon thread (the pool's own logic, unchanged).
        helper = threading.Thread(target=super()._adjust_thread_count, daemon=True)
        helper.start()
        helper.join()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=cancel_futures)
        if not wait:
            return
        deadline = time.monotonic() + self.grace_s
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))
        for thread in list(self._threads):
            if thread.is_alive():  # abandoned: interpreter exit must not join it either
                _cf_thread._threads_queues.pop(thread, None)  # type: ignore[attr-defined]


def install(loop: asyncio.AbstractEventLoop | None = None) -> bool:
    """Make ``ExitSafeExecutor`` the running loop's default executor (once per loop).
    True when installed now or before."""
    try:
        loop = loop or asyncio.get_running_loop()
    except RuntimeError:
        return False
    current = getattr(loop, "_default_executor", None)
    if isinstance(current, ExitSafeExecutor):
        return True
    loop.set_default_executor(ExitSafeExecutor())
    if isinstance(current, ThreadPoolExecutor):
        current.shutdown(wait=False)  # its idle threads end; running work completes
    return True
