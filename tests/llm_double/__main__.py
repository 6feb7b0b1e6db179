"""Run the double by hand: ``python -m tests.llm_double --port 8999`` (binds 127.0.0.1)."""

import argparse
import time

from tests.llm_double.server import LLMDouble

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, default=0)
parser.add_argument("--embedding-dim", type=int, default=384)
args = parser.parse_args()
double = LLMDouble(port=args.port, embedding_dim=args.embedding_dim).start()
print(double.base_url, flush=True)
try:
    while True:
        time.sleep(3600)
except KeyboardInterrupt:
    double.stop()
