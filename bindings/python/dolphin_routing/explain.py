"""Explain's sentence, the twin of src/router/explain.ts explainWhy: which rule or cluster gave the bit and the
numbers it compared. The words are each kind's explain templates, generated from spec/abi.json into _abi.py
(KIND_EXPLAIN); here only the frame around them, the values they may name and the filler. A rule's parameters and a
learned table's guard (its fallback rule, out-of-distribution bounds and load bounds) are read back from the core's
staging area right after loadTable, in the layout assembly/policy/set-table.ts documents, so the sentence names the
same numbers the core compared.
"""
from __future__ import annotations

import decimal
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Dict, Mapping, Tuple, Union

from . import _abi
from ._core import Core
from .errors import js_number as n

if TYPE_CHECKING:  # the types only: router.py imports this module
    from .router import Decision
    from .tables import TableInfo

_KIND_NAMES = {code: name for name, code in _abi.KINDS.items()}


@dataclass(frozen=True)
class TableGuard:
    """A table's staged numbers: a rule table's parameters; a learned table's fallback rule (kind, its staged
    parameters) and bounds per cluster (() when none)."""

    params: Mapping[str, float] = field(default_factory=dict)
    fallback: str = ""  # none: a rule table
    fallback_params: Mapping[str, float] = field(default_factory=dict)
    ood_bound: Tuple[float, ...] = ()
    load_prefill: Tuple[float, ...] = ()
    load_decode: Tuple[float, ...] = ()


def staged_params(kind: str, *slots: float) -> Dict[str, float]:
    """A rule's staged values (LIMIT_RULE_SLOTS of them), named by its parameters in those slots (spec "stage")."""
    return dict(zip(_abi.KIND_STAGED_PARAMS.get(kind, ()), slots))


# the fallback of a table that names none (src/table/table.ts DEFAULT_FALLBACK)
DEFAULT_GUARD = TableGuard(fallback="dynamo-isl", fallback_params=staged_params("dynamo-isl", 2048, 0.7))


def read_guard(core: Core, kind: str, k: int, d: int) -> TableGuard:
    """What loadTable just staged: a rule's parameters (KIND_STAGED_PARAMS), or a learned table's guard section:
    fallbackKind p[LIMIT_RULE_SLOTS] nBounds oodBound[nBounds] nLoadBounds loadBoundPrefill[n] loadBoundDecode[n]."""
    staging = int(core.call("stagingPtr"))

    def at(i: int, count: int = 1) -> Tuple[float, ...]:
        return tuple(core.read_f64s(staging + 8 * i, count)) if count > 0 else ()

    if kind not in _abi.LEARNED_KINDS:
        return TableGuard(params=staged_params(kind, *at(0, _abi.LIMIT_RULE_SLOTS)))
    g = 3 * d + 2 * k * d + 2 * k if kind == "gmm" else 3 * d + k * d + k
    bounds_at = g + 1 + _abi.LIMIT_RULE_SLOTS
    n_bounds = int(at(bounds_at)[0])
    load_at = bounds_at + 1 + n_bounds
    n_load = int(at(load_at)[0])
    fallback = _KIND_NAMES.get(int(at(g)[0]), "?")
    return TableGuard({}, fallback, staged_params(fallback, *at(g + 1, _abi.LIMIT_RULE_SLOTS)),
                      at(bounds_at + 1, n_bounds), at(load_at + 1, n_load), at(load_at + 1 + n_load, n_load))


def why(t: "TableInfo", d: "Decision", scores: Tuple[float, ...]) -> str:
    path = "remote prefill" if d.path == "remote" else "local prefill"
    if d.reason == "no-prefill-worker":
        return f"the policy said remote, but no prefill worker is registered: {path}"
    if d.reason == "first-turn":
        return f"PPD: turn 1 always goes through a prefill worker: {path}"
    if t.kind in _abi.LEARNED_KINDS:
        return _learned_why(t, d, scores, path)
    rule = _explain(t.kind).rule
    if rule is not None:
        return f"{fill(rule, d, t.guard.params if t.guard else {})}: {path}"
    return f"{t.kind} rule gives {d.bit}: {path}"


def _explain(kind: str) -> _abi.KindExplain:
    return _abi.KIND_EXPLAIN.get(kind, _abi.KindExplain())


def _learned_why(t: "TableInfo", d: "Decision", scores: Tuple[float, ...], path: str) -> str:
    c = d.cluster or 0
    e = _explain(t.kind)
    measure = f"{e.score} {to_fixed(scores[c], 4) if c < len(scores) else '?'}"
    g = t.guard or DEFAULT_GUARD
    why_rule = _rule_clause(g.fallback, g.fallback_params, d)
    ruled = f"→ rule → {'remote' if d.bit == 1 else 'local'} because {why_rule} ({g.fallback})"
    if d.reason == "rule-fallback":
        return f"cluster {c} {ruled}: {path}"
    if d.reason == "out-of-distribution" and c < len(g.ood_bound):
        return f"cluster {c} is out of distribution ({measure} {e.beyond} {n(g.ood_bound[c])}) {ruled}: {path}"
    if d.reason == "load-out-of-range" and c < len(g.load_decode):
        over = []
        if d.load.prefill is not None and d.load.prefill > g.load_prefill[c]:
            over.append(f"prefill load {n(d.load.prefill)} > bound {n(g.load_prefill[c])}")
        if d.load.decode > g.load_decode[c]:
            over.append(f"decode load {n(d.load.decode)} > bound {n(g.load_decode[c])}")
        return f"cluster {c} is beyond the load it was trained at ({' and '.join(over)}) {ruled}: {path}"
    loads = _load_clause(g.load_prefill[c], g.load_decode[c], d) if c < len(g.load_decode) else ""
    return f"nearest {e.nearest} is cluster {c} ({measure}){loads} whose bit is {d.bit}: {path}"


def _load_clause(bound_p: float, bound_d: float, d: "Decision") -> str:
    """The loads as fractions of the cluster's bounds (a bound of 0 admits only a load of 0: fraction 0)."""
    def frac(load: float, bound: float) -> str:
        return to_fixed(load / bound if bound > 0 else 0, 2)

    decode = f"decode load {frac(d.load.decode, bound_d)}"
    if d.load.prefill is None:
        return f" at {decode} of its bound,"
    return f" at {decode} and prefill load {frac(d.load.prefill, bound_p)} of its bounds,"


def _rule_clause(kind: str, params: Mapping[str, float], d: "Decision") -> str:
    """Why a rule that decides from the request alone gave the bit (the fallback of a learned table)."""
    e = _explain(kind)
    for when, say in (e.remote if d.bit == 1 else e.local) or ():
        # the first alternative that holds; gen-abi.mjs checks the last one always does
        if when is None or _holds(when, d, params):
            return fill(say, d, params)
    return f"{kind} always does"


# ---- the template filler (src/router/explain.ts fill, holds) ---------------------------------------------------

Value = Union[float, bool, None]

# The decision's values a template may name besides the rule's parameters (spec "explain_values"; a test checks
# every one has its value).
DECISION_VALUES: Mapping[str, Callable[["Decision"], Value]] = {
    "isl": lambda d: d.features.isl,
    "eff_P": lambda d: d.features.eff_p,
    "eff_D": lambda d: d.features.eff_d,
    "osl_hat": lambda d: d.features.osl_hat,
    "eff_D/isl": lambda d: d.features.eff_d / max(d.features.isl, 1),
    "load_P": lambda d: -1 if d.load.prefill is None else d.load.prefill,
    "load_D": lambda d: d.load.decode,
    "bit": lambda d: d.bit,
    "local": lambda d: d.bit == 0,
    "cluster": lambda d: d.cluster,
}
# the values a template writes other than as JavaScript's String(x) does
_WRITTEN: Mapping[str, Callable[[float], str]] = {"eff_D/isl": lambda x: to_fixed(x, 3)}
_PLACEHOLDER = re.compile(r"\{([^}]*)\}")


def _value(name: str, d: "Decision", params: Mapping[str, float]) -> Union[Value, str]:
    if name in DECISION_VALUES:
        return DECISION_VALUES[name](d)
    return params.get(name, "undefined")  # gen-abi.mjs checks every name, so never "undefined"


def _number(v: Union[Value, str]) -> float:
    """A value as a JavaScript number (true 1, false and null 0)."""
    return float(v) if isinstance(v, (int, float)) else 0.0


def fill(template: str, d: "Decision", params: Mapping[str, float]) -> str:
    """Writes `{name}` and `{a × b}` (a product) with the decision's values and the rule's parameters."""
    def one(m: "re.Match[str]") -> str:
        inside = m.group(1)
        factors = inside.split(" × ")
        if len(factors) == 2:
            return n(_number(_value(factors[0], d, params)) * _number(_value(factors[1], d, params)))
        v = _value(inside, d, params)
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return v
        return _WRITTEN[inside](v) if inside in _WRITTEN else n(v)

    return _PLACEHOLDER.sub(one, template)


def _holds(when: str, d: "Decision", params: Mapping[str, float]) -> bool:
    """Whether `a op b` holds (a "when" of the spec: op one of <, ≤, >, ≥)."""
    a, op, b = when.split(" ")
    x, y = _number(_value(a, d, params)), _number(_value(b, d, params))
    return x < y if op == "<" else x <= y if op == "≤" else x > y if op == ">" else x >= y


def to_fixed(x: float, digits: int) -> str:
    """x with `digits` decimals as JavaScript's x.toFixed(digits) writes it: an exact tie (0.625 to two decimals)
    goes to the larger magnitude ("0.63"), where Python's format rounds it to even ("0.62")."""
    if math.isnan(x) or math.isinf(x) or abs(x) >= 1e21:
        return n(x)  # what toFixed gives there
    with decimal.localcontext() as ctx:
        ctx.prec = 64  # the result has at most 21 + digits digits; the double's exact value is read in whole
        q = decimal.Decimal(x or 0.0).quantize(decimal.Decimal(1).scaleb(-digits), rounding=decimal.ROUND_HALF_UP)
    return f"{q:f}"  # -0 is written "0.00" (toFixed's x < 0 is false), -0.001 "-0.00"
