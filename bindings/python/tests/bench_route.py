"""The Python side of `dolphin bench bindings`: route() of a 20,000-token prompt against 16 workers, including the
call overhead of copying the prompt in. Same setup and method as bench/bindings.ts (Node) and
bindings/go/internal/bench (Go): warm up, then the median over rounds of the mean per-call time. Prints JSON (µs)."""
from __future__ import annotations

import json
import statistics
import sys
import time
from array import array
from typing import Any, Callable, List

from dolphin_routing import Router

WORKERS = 16
ROUNDS, PER_ROUND, WARMUP = 31, 20, 200


def lcg(n: int, seed: int) -> List[int]:
    out, x = [], seed
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append(x % 152064)
    return out


def median_us(call: Callable[[], Any]) -> float:
    for _ in range(WARMUP):
        call()
    rounds = []
    for _ in range(ROUNDS):
        t = time.perf_counter()
        for _ in range(PER_ROUND):
            call()
        rounds.append((time.perf_counter() - t) / PER_ROUND * 1e6)
    return statistics.median(rounds)


def main() -> None:
    table = open(sys.argv[1], "rb").read()
    router = Router.load(table, workers=[(f"w{w}", "prefill" if w < WORKERS // 2 else "decode") for w in range(WORKERS)],
                         capacity_blocks=4096, max_prompt_tokens=1 << 18)
    tokens = lcg(20_000, 42)
    hashes = router.hash(tokens=tokens)
    for w in range(WORKERS):
        router.index.store(f"w{w}", hashes[: (w + 1) * len(hashes) // (WORKERS + 1)])
        router.set_load(f"w{w}", (w * 997) % 4000, (w * 1999) % 30000)
    packed = array("I", tokens)
    print(json.dumps({
        "route_20k_tokens_us": round(median_us(lambda: router.route(tokens=packed, osl_hat=300)), 2),
        "route_20k_tokens_list_us": round(median_us(lambda: router.route(tokens=tokens, osl_hat=300)), 2),
    }))


if __name__ == "__main__":
    main()
