"""Explain's sentences for a table with load bounds (spec/vectors/tables/kmeans-load.msgpack), the same as
src/router/explain.ts gives (test/table-v3.test.ts checks the Node host with the same inputs)."""
from __future__ import annotations

import re
from typing import Dict, List, Tuple

from dolphin_routing import Router
from dolphin_routing.router import Explanation

from .vectors import table

BOTH = [("d0", "decode"), ("p0", "prefill")]
TOKENS = [(i * 7919 + 3) % 50000 for i in range(16)]  # uncached, osl_hat 16: cluster 3 (value 0; bounds 16384, 10000)


def _explain(workers: List[Tuple[str, str]], loads: Dict[str, Tuple[float, float]]) -> Explanation:
    r = Router.load(table("kmeans-load.msgpack"), workers=workers)
    for worker, (p, d) in loads.items():
        r.set_load(worker, p, d)
    return r.explain(tokens=TOKENS, osl_hat=16)


def test_within_bounds_names_the_loads_as_fractions() -> None:
    x = _explain(BOTH, {"d0": (1000, 7000), "p0": (8192, 0)})
    assert x.decision.reason == "cluster" and x.decision.load.prefill == 8192 and x.decision.load.decode == 8000
    assert re.fullmatch(r"nearest centroid is cluster 3 \(squared distance \d+\.\d{4}\) at decode load 0\.80 and "
                        r"prefill load 0\.50 of its bounds, whose bit is 0: local prefill", x.why)


def test_above_a_bound_the_fallback_rule_decides() -> None:
    x = _explain(BOTH, {"d0": (2000, 10000)})
    assert x.decision.reason == "load-out-of-range"
    assert x.why == ("cluster 3 is beyond the load it was trained at (decode load 12000 > bound 10000) → rule → remote"
                     " because nothing matched on the decode worker or isl − match > 512 (trtllm): remote prefill")
    assert "(prefill load 16385 > bound 16384) → rule → remote" in _explain(BOTH, {"p0": (16385, 0)}).why


def test_without_a_prefill_worker_only_the_decode_load_counts() -> None:
    x = _explain(BOTH[:1], {"d0": (0, 5000)})
    assert x.decision.load.prefill is None
    assert x.why.endswith("at decode load 0.50 of its bound, whose bit is 0: local prefill")
