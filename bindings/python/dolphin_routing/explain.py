"""Explain's sentence, the twin of src/router/explain.ts explainWhy: which rule or cluster gave the bit and the
numbers it compared. A learned table's guard (its fallback rule, out-of-distribution bounds and load bounds) is read
back from the core's staging area right after loadTable, in the layout assembly/policy/set-table.ts documents, so
the sentence names the same bounds the core compared against.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Tuple

from . import _abi
from ._core import Core
from .errors import js_number as n

if TYPE_CHECKING:  # the types only: router.py imports this module
    from .router import Decision
    from .tables import TableInfo

_KIND_NAMES = {code: name for name, code in _abi.KINDS.items()}


@dataclass(frozen=True)
class TableGuard:
    """A learned table's fallback rule (kind, its two staged parameters) and bounds per cluster (() when none)."""

    fallback: str
    p0: float
    p1: float
    ood_bound: Tuple[float, ...]
    load_prefill: Tuple[float, ...]
    load_decode: Tuple[float, ...]


DEFAULT_GUARD = TableGuard("dynamo-isl", 2048, 0.7, (), (), ())


def read_guard(core: Core, kind: str, k: int, d: int) -> TableGuard:
    """The guard section of the learned table loadTable just staged:
    fallbackKind p0 p1 nBounds oodBound[nBounds] nLoadBounds loadBoundPrefill[n] loadBoundDecode[n]."""
    g = 3 * d + 2 * k * d + 2 * k if kind == "gmm" else 3 * d + k * d + k
    staging = int(core.call("stagingPtr"))

    def at(i: int, count: int = 1) -> Tuple[float, ...]:
        return tuple(core.read_f64s(staging + 8 * i, count)) if count > 0 else ()

    head = at(g, 4)
    n_bounds = int(head[3])
    load_at = g + 4 + n_bounds
    n_load = int(at(load_at)[0])
    return TableGuard(_KIND_NAMES.get(int(head[0]), "?"), head[1], head[2], at(g + 4, n_bounds),
                      at(load_at + 1, n_load), at(load_at + 1 + n_load, n_load))


def why(t: "TableInfo", d: "Decision", scores: Tuple[float, ...]) -> str:
    path = "remote prefill" if d.path == "remote" else "local prefill"
    if d.reason == "no-prefill-worker":
        return f"the policy said remote, but no prefill worker is registered: {path}"
    if d.reason == "first-turn":
        return f"PPD: turn 1 always goes through a prefill worker: {path}"
    if t.kind in _abi.LEARNED_KINDS:
        return _learned_why(t, d, scores, path)
    if t.kind == "ppd":
        return f"PPD: grid cell {d.cluster} holds {d.bit}: {path}"
    return f"{t.kind} rule gives {d.bit}: {path}"


def _learned_why(t: "TableInfo", d: "Decision", scores: Tuple[float, ...], path: str) -> str:
    c = d.cluster or 0
    measure = "squared distance" if t.kind == "kmeans" else "log-likelihood"
    measure += " " + (f"{scores[c]:.4f}" if c < len(scores) else "?")
    noun = "centroid" if t.kind == "kmeans" else "component"
    g = t.guard or DEFAULT_GUARD
    ruled = (f"→ rule → {'remote' if d.bit == 1 else 'local'} because {_rule_clause(g.fallback, g.p0, g.p1, d)}"
             f" ({g.fallback})")
    if d.reason == "rule-fallback":
        return f"cluster {c} {ruled}: {path}"
    if d.reason == "out-of-distribution" and c < len(g.ood_bound):
        bound = n(g.ood_bound[c])
        beyond = f"{measure} > bound {bound}" if t.kind == "kmeans" else f"{measure} < floor {bound}"
        return f"cluster {c} is out of distribution ({beyond}) {ruled}: {path}"
    if d.reason == "load-out-of-range" and c < len(g.load_decode):
        over = []
        if d.load.prefill is not None and d.load.prefill > g.load_prefill[c]:
            over.append(f"prefill load {n(d.load.prefill)} > bound {n(g.load_prefill[c])}")
        if d.load.decode > g.load_decode[c]:
            over.append(f"decode load {n(d.load.decode)} > bound {n(g.load_decode[c])}")
        return f"cluster {c} is beyond the load it was trained at ({' and '.join(over)}) {ruled}: {path}"
    loads = _load_clause(g.load_prefill[c], g.load_decode[c], d) if c < len(g.load_decode) else ""
    return f"nearest {noun} is cluster {c} ({measure}){loads} whose bit is {d.bit}: {path}"


def _load_clause(bound_p: float, bound_d: float, d: "Decision") -> str:
    """The loads as fractions of the cluster's bounds (a bound of 0 admits only a load of 0: fraction 0)."""
    def frac(load: float, bound: float) -> str:
        return f"{load / bound if bound > 0 else 0:.2f}"

    decode = f"decode load {frac(d.load.decode, bound_d)}"
    if d.load.prefill is None:
        return f" at {decode} of its bound,"
    return f" at {decode} and prefill load {frac(d.load.prefill, bound_p)} of its bounds,"


def _rule_clause(kind: str, p0: float, p1: float, d: "Decision") -> str:
    """Why a rule that decides from the request alone gave the bit; p0, p1 in their staging slots (spec "kinds")."""
    isl, eff_d = d.features.isl, d.features.eff_d
    remote = d.bit == 1
    if kind == "dynamo-isl":
        r = f"{eff_d / max(isl, 1):.3f}"
        if not remote:
            return f"eff_D {n(eff_d)} < {n(p0)} and eff_D/isl {r} < {n(p1)}"
        return f"eff_D {n(eff_d)} ≥ {n(p0)}" if eff_d >= p0 else f"eff_D/isl {r} ≥ {n(p1)}"
    if kind == "dynamo-load":
        busy = n(p0 * p1)
        return (f"the prefill worker is not busy (≤ {busy} active tokens) or its load is unknown" if remote
                else f"the prefill worker is busy (> {busy} active tokens)")
    if kind == "dynamo-legacy":
        return (f"eff_D {n(eff_d)} > {n(p0)} and the prefill queue < {n(p1)}" if remote
                else f"eff_D {n(eff_d)} ≤ {n(p0)} or the prefill queue ≥ {n(p1)}")
    if kind == "trtllm":
        return f"nothing matched on the decode worker or isl − match > {n(p0)}" if remote else f"isl − match ≤ {n(p0)}"
    if kind == "llm-d":
        return (f"isl {n(isl)} ≥ {n(p1)} and uncached tokens ≥ {n(p0)}" if remote
                else f"non_cached_tokens is 0, isl < {n(p1)} or uncached tokens < {n(p0)}")
    return f"{kind} always does"
