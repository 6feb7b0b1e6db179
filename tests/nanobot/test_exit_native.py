"""A thread abandoned at exit while it runs torch must not abort the process.

Python 3.11 ends a daemon thread that wants the GIL back during finalization with
``pthread_exit``; through torch's C++ frames that is ``std::terminate`` (exit -6). Seen in
the suite: a ``/memory-health`` process left while it loaded mem0's embedder for the turn
an earlier process had left in the outbox."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# Every test here starts a process (a server, nanobot, a bench run): not in the fast suite.
pytestmark = pytest.mark.servers

pytest.importorskip("torch")

SCRIPT = textwrap.dedent(
    """
    import asyncio, atexit, sys, time
    import torch
    from nanobot_memory_adapters.nanobot import exit_executor

    if sys.argv[1] == "without-the-exit-hook":
        atexit.unregister(exit_executor._stop_abandoned_threads)
    layer, x = torch.nn.Linear(512, 512), torch.randn(256, 512)

    def embed_for(seconds):  # an embedder at work: torch, again and again
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            layer(x)

    async def main():
        exit_executor.install()
        try:  # the caller gives up (a recall or delivery timeout); the thread runs on
            await asyncio.wait_for(asyncio.to_thread(embed_for, 20.0), 0.3)
        except TimeoutError:
            pass

    asyncio.run(main())  # the executor's shutdown abandons the thread after its grace
    print("left", len(exit_executor._abandoned))
    """
)


def run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True,
                          text=True, timeout=120)


def test_a_thread_abandoned_inside_torch_does_not_abort_the_exit():
    done = run("with-the-exit-hook")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "left 1" in done.stdout and "terminate called" not in done.stderr
    if sys.version_info >= (3, 14):  # daemon threads hang at finalization there instead
        return
    # The same process without the hook: the abort the hook prevents.
    bare = run("without-the-exit-hook")
    assert bare.returncode != 0 and "terminate called" in bare.stderr, (bare.returncode,
                                                                      bare.stderr[-500:])
