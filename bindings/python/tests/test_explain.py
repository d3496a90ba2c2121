"""Explain's sentences for a table with load bounds (spec/vectors/tables/kmeans-load.msgpack), the same as
src/router/explain.ts gives (test/table-v3.test.ts checks the Node host with the same inputs), a rule table's
template, and the filler's pieces. test/bindings-agree.test.ts compares every host's sentences with Node's."""
from __future__ import annotations

import math
import re
from typing import Dict, List, Tuple

import pytest

from dolphin_routing import Router, _abi
from dolphin_routing.explain import DECISION_VALUES, to_fixed
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


def test_a_rule_tables_sentence_is_its_rule_template_filled_with_the_staged_parameters() -> None:
    r = Router.load(table("dynamo-isl.msgpack"), workers=BOTH)
    assert r.explain(tokens=TOKENS, osl_hat=16).why == (
        "Dynamo isl_bounding: eff_D 16 < 2048 and eff_D/isl 1.000 < 0.7 is false: remote prefill")


def test_every_explain_value_of_the_spec_has_its_value() -> None:
    assert sorted(DECISION_VALUES) == sorted(_abi.EXPLAIN_VALUES)


@pytest.mark.parametrize("x, digits, want", [
    (0.625, 2, "0.63"), (0.0625, 3, "0.063"), (0.125, 2, "0.13"), (-0.625, 2, "-0.63"), (0.375, 2, "0.38"),
    (1.005, 2, "1.00"), (-0.0, 2, "0.00"), (-0.001, 2, "-0.00"), (2.5, 0, "3"), (123.456, 4, "123.4560"),
    (1e21, 2, "1e+21"), (math.nan, 2, "NaN"), (-12.34565, 4, "-12.3456"), (0.00005, 4, "0.0001"),
])
def test_to_fixed_writes_what_javascripts_to_fixed_writes(x: float, digits: int, want: str) -> None:
    # exact ties (0.625) go to the larger magnitude, where Python's format rounds them to even
    assert to_fixed(x, digits) == want
