"""Run the Honcho double by hand: python -m tests.honcho_double --port 8010 --llm URL

Without --llm it also starts the LLM double. Binds 127.0.0.1 only."""

from __future__ import annotations

import argparse
import time

from tests.honcho_double.server import HonchoDouble
from tests.llm_double import LLMDouble


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--llm", default=None, help="OpenAI-compatible base URL ending in /v1")
    parser.add_argument("--work-unit-min-tokens", type=int, default=0)
    args = parser.parse_args()
    llm = None if args.llm else LLMDouble().start()
    base = args.llm or llm.base_url
    with HonchoDouble(llm_base_url=base, port=args.port,
                      work_unit_min_tokens=args.work_unit_min_tokens) as honcho:
        print(f"honcho double on {honcho.base_url} (LLM {base})", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    if llm:
        llm.stop()


if __name__ == "__main__":
    main()
