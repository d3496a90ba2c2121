"""Replays every conformance vector in spec/vectors/ through the Python binding: chained hashes, valid and invalid
tables, decide cases (the policy alone) and whole-route scenarios, as test/vectors-*.test.ts do for Node."""
from __future__ import annotations

from typing import Any, Dict, List

import pytest

from dolphin_routing import Router, TableError, describe_table, hash_blocks
from dolphin_routing import _abi

from .vectors import lcg_tokens, load, prompt_input, table

HASHES = load("hashes.json")["cases"]
DECISIONS = load("decisions.json")
MANIFEST = load("tables/manifest.json")
SMALL = {"max_workers": 16, "max_prompt_tokens": 1 << 16, "index_blocks": 1 << 14}


@pytest.mark.parametrize("case", HASHES, ids=[c["name"] for c in HASHES])
def test_hash_vectors(case: Dict[str, Any]) -> None:
    if case["mode"] == "tokens":
        tokens = case["tokens"] if "tokens" in case else lcg_tokens(case["tokens_formula"]["n"], case["tokens_formula"]["seed"])
        if "tokens_first" in case:
            assert tokens[:8] == case["tokens_first"]
        got = hash_blocks(tokens, case["block_size"], case["model"], case["salt"])
    else:
        text = case["text"] if "text" in case else case["text_formula"]["unit"] * case["text_formula"]["count"]
        assert len(text.encode()) == case["text_bytes"]
        got = hash_blocks(text, 16, case["model"], case["salt"])
    _check_hashes(case, got)


def _check_hashes(case: Dict[str, Any], got: List[int]) -> None:
    """The case's expected hashes: all of them, or the first 4 and the last."""
    hexes = [f"{h:016x}" for h in got]
    assert len(hexes) == case["hash_count"]
    if "hashes" in case:
        assert hexes == case["hashes"]
    else:
        assert hexes[:4] == case["hashes_head"] and hexes[-1] == case["hash_last"]


@pytest.mark.parametrize("entry", MANIFEST["valid"], ids=[e["file"] for e in MANIFEST["valid"]])
def test_valid_tables(entry: Dict[str, Any]) -> None:
    info = describe_table(table(entry["file"]))
    assert (info.kind, info.clusters, info.dims, info.checksum) == (entry["kind"], entry["clusters"], entry["dims"], entry["checksum"])


@pytest.mark.parametrize("entry", MANIFEST["invalid"], ids=[e["file"] for e in MANIFEST["invalid"]])
def test_invalid_tables(entry: Dict[str, Any]) -> None:
    with pytest.raises(TableError) as e:
        describe_table(table(entry["file"]))
    assert e.value.field == entry["field"]
    assert str(e.value).startswith(f"table: {entry['field']}: ")


_routers: Dict[str, Router] = {}


def _router_for(file: str) -> Router:
    if file not in _routers:
        _routers[file] = Router.load(table(file), **SMALL)  # type: ignore[arg-type]
    return _routers[file]


def _near(actual: List[float], expected: List[float], tol: float, what: str) -> None:
    assert len(actual) == len(expected), what
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert abs(a - e) <= tol * max(1.0, abs(e)), f"{what}[{i}]: got {a}, expected {e}"


DECIDE = DECISIONS["decide"]


@pytest.mark.parametrize("case", DECIDE, ids=[f"#{i} {c['table']}" for i, c in enumerate(DECIDE)])
def test_decide_vectors(case: Dict[str, Any]) -> None:
    router = _router_for(case["table"])
    router.set_signals(case["signals"]["prefill_queue"], case["signals"]["qps"])
    core = router._core
    core.check(core.call("decideFeatures", float(case["isl"]), float(case["eff_P"]), float(case["eff_D"]),
                         float(case["osl_hat"]), case["turn"], float(case["context_tokens"])), "decide")
    d = core.decision[:]
    got = {"bit": d[_abi.D_BIT], "cluster": d[_abi.D_CLUSTER], "reason": _abi.REASONS[int(d[_abi.D_REASON])]}
    assert got == case["expected"]
    assert d[_abi.D_PATH] == case["expected"]["bit"]
    assert [d[_abi.D_ISL], d[_abi.D_EFF_P], d[_abi.D_EFF_D], d[_abi.D_OSL_HAT]] == [case["isl"], case["eff_P"], case["eff_D"], case["osl_hat"]]
    if "scores" in case:
        tol = DECISIONS["tolerance"]
        _near(core.read_f64s(core.standardized_ptr, len(case["standardized"])), case["standardized"], tol["standardized"], "standardized")
        _near(core.read_f64s(core.scores_ptr, len(case["scores"])), case["scores"], tol["scores"], "scores")
        _near([d[_abi.D_SCORE]], [case["scores"][case["expected"]["cluster"]]], tol["scores"], "score")


ROUTE = DECISIONS["route"]


@pytest.mark.parametrize("case", ROUTE, ids=[f"{c['type']}: {c['name']}" for c in ROUTE])
def test_route_vectors(case: Dict[str, Any]) -> None:
    router = Router.load(table(case["table"]), workers=[(w["id"], w["role"], w["capacity_blocks"]) for w in case["workers"]],
                         block_size=case["block_size"], model=case["model"], salt=case["salt"],
                         load_scale=case["load_scale"], tier_weights=case.get("tier_weights"),
                         **SMALL)  # type: ignore[arg-type]
    prompts = {name: prompt_input(p) for name, p in case["prompts"].items()}
    for op in case["index"]:
        p = prompts[op["prompt"]]
        hashes = (router.hash(tokens=p["tokens"][:op["prefix_tokens"]]) if "tokens" in p
                  else router.hash(text=p["text"][:op["prefix_bytes"]]))
        apply = router.index.remove if op.get("remove") else router.index.store
        apply(op["worker"], hashes, op.get("tier", "GPU"))
    for worker, load_ in case["loads"].items():
        router.set_load(worker, load_["active_prefill_tokens"], load_["active_decode_tokens"])
    router.set_signals(case["signals"]["prefill_queue"], case["signals"]["qps"])
    r = case["request"]
    d = router.route(**prompts[r["prompt"]], prompt_tokens=r.get("prompt_tokens", 0), osl_hat=r["osl_hat"], turn=r["turn"],
                     decode_worker=r.get("decode_worker"), context_tokens=r["context_tokens"])
    got = {
        "path": d.path, "bit": d.bit, "reason": d.reason, "decode_worker": d.decode_worker,
        "prefill_worker": d.prefill_worker, "cluster": d.cluster,
        "features": {"isl": d.features.isl, "eff_P": d.features.eff_p, "eff_D": d.features.eff_d, "osl_hat": d.features.osl_hat},
        "matched_blocks": {"decode": d.matched_blocks.decode, "prefill": d.matched_blocks.prefill},
        "blocks": d.blocks, "cost": {"decode": d.cost.decode, "prefill": d.cost.prefill},
        "load": {"prefill": d.load.prefill, "decode": d.load.decode},
    }
    assert got == case["expected"]


CBOR_FNV = load("hashes-cbor-fnv.json")["cases"]


@pytest.mark.parametrize("case", CBOR_FNV, ids=[c["name"] for c in CBOR_FNV])
def test_cbor_fnv_vectors(case: Dict[str, Any]) -> None:
    tokens = case["tokens"] if "tokens" in case else lcg_tokens(case["tokens_formula"]["n"], case["tokens_formula"]["seed"])
    got = hash_blocks(tokens, case["block_size"], case["model"], hash_scheme="llm-d-cbor-fnv", hash_seed=case["hash_seed"])
    _check_hashes(case, got)
