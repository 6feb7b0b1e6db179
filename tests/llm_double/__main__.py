"""Run the double by hand: ``python -m tests.llm_double --port 8999`` (binds 127.0.0.1);
``--latency-ms 300`` makes every chat call take that long, like a real endpoint, so
LLM-bound runs can be timed without one (calls overlap: it is a latency, not a queue)."""

import argparse
import time

from tests.llm_double.server import LLMDouble

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, default=0)
parser.add_argument("--embedding-dim", type=int, default=384)
parser.add_argument("--latency-ms", type=float, default=0.0,
                    help="per chat call, e.g. 300 (default 0)")
args = parser.parse_args()
double = LLMDouble(
    port=args.port, embedding_dim=args.embedding_dim, delay_s=args.latency_ms / 1000
).start()
print(double.base_url, flush=True)
try:
    while True:
        time.sleep(3600)
except KeyboardInterrupt:
    double.stop()
