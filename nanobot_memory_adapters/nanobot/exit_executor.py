"""An event-loop default executor that cannot hold the process after nanobot closes.

Backends call blocking code from ``asyncio.to_thread`` (mem0 calls its LLM that way). A
call stuck there (a CPU model answering for minutes) outlives the awaiting task: when
delivery stops at exit, the thread runs on, and ``asyncio.run`` joins the default
executor's threads before the process may end (Python 3.11: without a bound). The plugin
installs this executor on nanobot's loop when it starts delivering: its threads are
daemons, and ``shutdown(wait=True)`` waits at most ``grace_s`` for them; a thread still
running then is abandoned (it ends with the process). Everything nanobot awaited has
finished by then; only work whose awaiting task was cancelled can still run.

An abandoned thread must not be inside torch when the interpreter finalizes: Python 3.11
ends a daemon thread that wants the GIL back with ``pthread_exit``, and unwinding through
torch's C++ frames (or ONNX Runtime's) aborts the process ("terminate called without an
active exception", exit -6), e.g. a ``/memory-health`` process leaving while it loads the
embedder for an earlier turn. So at exit each abandoned thread is asked to stop at its
next Python step (an asynchronous ``ProcessExiting``, which no ``except Exception``
catches). Each gets up to ``SETTLE_S`` to stop (between two torch calls a thread waits for
the GIL in plain Python, the request not yet raised), and one inside those packages
(``NATIVE_PACKAGES``) up to ``NATIVE_WAIT_S`` to get out; a thread still waiting on a socket
(a model answering) after ``SETTLE_S`` is left where it is: no C++ frame is on its stack.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures.thread as _cf_thread
import ctypes
import sys
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor

GRACE_S = 1.0
NATIVE_WAIT_S = 30.0
SETTLE_S = 1.0
# Packages whose C++ (or Rust) code releases the GIL and takes it back: torch and the
# libraries that run their models through it, ONNX Runtime (the bundled MiniLM's default
# runtime) and tokenizers (its tokenizer).
NATIVE_PACKAGES = frozenset({"torch", "sentence_transformers", "transformers", "onnxruntime",
                             "tokenizers"})
_abandoned: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


def in_native_package(thread: threading.Thread) -> bool:
    """Whether ``thread``'s innermost Python frame belongs to one of ``NATIVE_PACKAGES`` (a
    C++ call made from there); a thread in a socket below them is not "in" them."""
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None:
        return False
    return str(frame.f_globals.get("__name__", "")).partition(".")[0] in NATIVE_PACKAGES


class ProcessExiting(BaseException):
    """Raised in an abandoned thread at exit, so it stops before it can enter torch again."""


def _raise_in(thread: threading.Thread) -> None:
    set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
    set_async_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)
    if set_async_exc(thread.ident or 0, ProcessExiting) > 1:  # never expected: undo it
        set_async_exc(thread.ident or 0, None)


def _stop_abandoned_threads() -> None:
    threads = [thread for thread in _abandoned if thread.is_alive() and thread.ident]
    for thread in threads:
        _raise_in(thread)
    deadline = time.monotonic() + NATIVE_WAIT_S
    settle = time.monotonic() + SETTLE_S
    for thread in threads:
        asked = time.monotonic()
        # Between two calls into torch a thread is briefly in plain Python, often waiting
        # for the GIL with the exception not yet raised; left there, it is ended inside
        # the interpreter's finalization and the process can still abort (8 of 44 runs of
        # test_exit_native's torch script beside two busy processes). So every asked
        # thread gets SETTLE_S to stop, a native one NATIVE_WAIT_S.
        while (thread.is_alive() and time.monotonic() < deadline
               and (in_native_package(thread) or time.monotonic() < settle)):
            if time.monotonic() - asked > 0.2:  # it caught the last one (or took new work)
                _raise_in(thread)
                asked = time.monotonic()
            time.sleep(0.01)


atexit.register(_stop_abandoned_threads)


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
                _abandoned.add(thread)


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
