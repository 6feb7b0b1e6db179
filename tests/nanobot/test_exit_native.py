"""A thread abandoned at exit while it runs torch or ONNX Runtime must not abort the process.

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

# The model a thread runs, one per native runtime: torch (sentence-transformers) and ONNX
# Runtime (the bundled MiniLM's default runtime; found aborting CI's exit 2026-12-02).
MODELS = {
    "torch": """
    import torch
    layer, x = torch.nn.Linear(512, 512), torch.randn(256, 512)
    step = lambda: layer(x)
    """,
    "onnxruntime": """
    import numpy as np, onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    weights = numpy_helper.from_array(np.random.rand(512, 512).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 512])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 512])], [weights])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        .SerializeToString(), options, providers=["CPUExecutionProvider"])
    x = np.random.rand(256, 512).astype(np.float32)
    step = lambda: session.run(None, {"x": x})
    """,
}

SCRIPT = textwrap.dedent(
    """
    import asyncio, atexit, sys, time
    from nanobot_memory_adapters.nanobot import exit_executor

    if sys.argv[1] == "without-the-exit-hook":
        atexit.unregister(exit_executor._stop_abandoned_threads)
    MODEL

    def embed_for(seconds):  # an embedder at work: its runtime, again and again
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            step()

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


def run(runtime: str, mode: str) -> subprocess.CompletedProcess[str]:
    script = SCRIPT.replace("MODEL", textwrap.dedent(MODELS[runtime]).strip())
    return subprocess.run([sys.executable, "-c", script, mode], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("runtime", sorted(MODELS))
def test_a_thread_abandoned_inside_a_native_runtime_does_not_abort_the_exit(runtime):
    pytest.importorskip(runtime)
    if runtime == "onnxruntime":
        pytest.importorskip("onnx")
    done = run(runtime, "with-the-exit-hook")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "left 1" in done.stdout and "terminate called" not in done.stderr
    if sys.version_info >= (3, 14):  # daemon threads hang at finalization there instead
        return
    # The same process without the hook: the abort the hook prevents.
    bare = run(runtime, "without-the-exit-hook")
    assert bare.returncode != 0 and "terminate called" in bare.stderr, (bare.returncode,
                                                                      bare.stderr[-500:])
