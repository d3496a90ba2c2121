"""The Python API: construction, workers, the index, errors (same messages as the Node host), thread safety, and
Hypothesis properties over random prompts, hashes and table bytes."""
from __future__ import annotations

import math
import threading
from array import array
from typing import List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dolphin_routing import (
    CoreError, DolphinError, RequestError, Router, TableError, WorkerError, describe_table, hash_blocks, js_number,
)

from .vectors import table

KMEANS = table("kmeans.msgpack")
DYNAMO = table("dynamo-isl.msgpack")
SMALL = {"max_workers": 16, "max_prompt_tokens": 1 << 16, "index_blocks": 1 << 14, "capacity_blocks": 1000}
WORKERS = [("d0", "decode"), ("d1", "decode"), ("p0", "prefill")]


def router(data: bytes = DYNAMO) -> Router:
    return Router.load(data, workers=WORKERS, **SMALL)  # type: ignore[arg-type]


def test_route_modes_agree_on_blocks() -> None:
    r = router()
    tokens = list(range(1, 257))
    by_tokens = r.route(tokens=tokens, osl_hat=10)
    by_array = r.route(tokens=array("I", tokens), osl_hat=10)
    by_hashes = r.route(block_hashes=r.hash(tokens=tokens), prompt_tokens=256, osl_hat=10)
    assert by_tokens == by_array
    assert by_tokens.blocks == by_hashes.blocks == 16
    assert by_tokens.features.isl == by_hashes.features.isl == 256


def test_index_store_match_remove_clear() -> None:
    r = router()
    hashes = r.hash(tokens=list(range(64)))
    r.index.store("d1", hashes)
    assert r.index.count("d1") == 4
    assert r.index.match(hashes) == {"d0": 0, "d1": 4, "p0": 0}
    d = r.route(tokens=list(range(64)), osl_hat=1)
    assert d.decode_worker == "d1" and d.matched_blocks.decode == 4
    r.index.remove("d1", hashes[2:])
    assert r.index.match(hashes)["d1"] == 2
    r.index.store("d0", [f"{h:016x}" for h in hashes])  # hex strings name the same hashes
    assert r.index.match(hashes)["d0"] == 4
    r.index.clear()
    assert r.index.match(hashes) == {"d0": 0, "d1": 0, "p0": 0}



def test_index_tiers_and_weights() -> None:
    r = Router.load(DYNAMO, workers=WORKERS, tier_weights={"CPU": 0.5}, **SMALL)  # type: ignore[arg-type]
    tokens = list(range(65))
    hashes = r.hash(tokens=tokens)
    r.index.store("d1", hashes, "CPU")
    assert r.index.tiers("d1", hashes[0]) == ["CPU"] and r.index.lower_count("d1") == 4
    assert r.route(tokens=tokens, osl_hat=1).features.eff_d == 65 - 4 * 0.5 * 16  # CPU blocks at weight 0.5
    r.index.store("d1", hashes[:1])
    assert r.index.tiers("d1", hashes[0]) == ["GPU", "CPU"] and r.index.lower_count("d1") == 3
    r.index.remove("d1", hashes, "CPU")
    assert r.index.count("d1") == 1
    with pytest.raises(RequestError, match='unknown tier "DISK"'):
        r.index.store("d1", hashes, "DISK")
    with pytest.raises(CoreError, match="weight must be a number in"):
        Router.load(DYNAMO, workers=WORKERS, tier_weights={"CPU": 2.0}, **SMALL)  # type: ignore[arg-type]

def test_signed_hashes_name_the_same_bits() -> None:
    r = router()
    hashes = r.hash(tokens=list(range(32)))
    signed = [h - (1 << 64) if h >= 1 << 63 else h for h in hashes]
    r.index.store("d0", signed)
    assert r.index.match(hashes)["d0"] == 2


def test_record_decisions_feeds_the_index() -> None:
    r = Router.load(DYNAMO, workers=WORKERS, record_decisions=True, **SMALL)  # type: ignore[arg-type]
    first = r.route(tokens=list(range(320)), osl_hat=1)
    second = r.route(tokens=list(range(320)), osl_hat=1)
    assert first.matched_blocks.decode == 0 and second.matched_blocks.decode == 20


def test_workers_add_remove_and_pin() -> None:
    r = router()
    r.add_worker(("d2", "both"))
    assert r.worker_ids == ("d0", "d1", "p0", "d2")
    assert r.route(tokens=[1] * 32, osl_hat=1, decode_worker="d2").decode_worker == "d2"
    r.remove_worker("d2")
    with pytest.raises(WorkerError, match='router: unknown worker "d2"'):
        r.route(tokens=[1] * 32, osl_hat=1, decode_worker="d2")
    with pytest.raises(WorkerError, match='already exists'):
        r.add_worker(("d0", "decode"))
    with pytest.raises(RequestError, match="role must be prefill, decode or both, got leader"):
        r.add_worker(("x", "leader"))


def test_loads_and_signals_steer_the_choice() -> None:
    r = router()
    r.set_load("d0", active_decode_tokens=1000)
    assert r.route(tokens=[7] * 64, osl_hat=1).decode_worker == "d1"
    r.set_signals(prefill_queue=3, qps=2.5)


def test_core_errors_have_the_node_messages() -> None:
    r = router()
    with pytest.raises(CoreError) as e:
        r.set_load("d0", active_prefill_tokens=-1)
    assert str(e.value) == "setLoad: core: load must be a finite number ≥ 0, got -1"
    assert e.value.name == "BAD_LOAD" and e.value.detail == -1
    with pytest.raises(CoreError, match=r"^setBlockSize: core: blockSize must be an integer in 1–4096, got 5000$"):
        Router.load(DYNAMO, workers=WORKERS, block_size=5000, **SMALL)  # type: ignore[arg-type]
    with pytest.raises(CoreError, match=r"^route: core: turn must be an integer ≥ 0, got 1.5$"):
        r.route(tokens=[1], osl_hat=1, turn=1.5)  # type: ignore[arg-type]
    with pytest.raises(RequestError, match=r"^route: oslHat must be a number ≥ 0, got -2$"):
        r.route(tokens=[1], osl_hat=-2)
    with pytest.raises(RequestError, match=r"^route: tokens\[1\] is not a token id \(integer 0–2\^32−1\): -1$"):
        r.route(tokens=[1, -1], osl_hat=1)
    with pytest.raises(RequestError, match="give exactly one of tokens, text or blockHashes"):
        r.route(tokens=[1], text="x", osl_hat=1)
    with pytest.raises(CoreError, match=r"^route \(262148 bytes > 262144\): core: input of 262148 items does not fit"):
        r.route(tokens=[1] * 65537, osl_hat=1)
    with pytest.raises(RequestError, match="this table uses osl_hat and has no output-length model"):
        Router.load(KMEANS, workers=WORKERS, **SMALL).route(tokens=[1])  # type: ignore[arg-type]
    assert issubclass(TableError, DolphinError) and issubclass(CoreError, DolphinError)


def test_route_by_output_length_class() -> None:
    r = router(KMEANS)  # osl_classes short, medium, long: representative 64, 512, 2048; no output-length model
    assert r.table.osl_class_names == ("short", "medium", "long")
    assert r.table.osl_class_representative == (64, 512, 2048)
    prompt = list(range(64))
    by_name = r.route(tokens=prompt, osl_class="long")
    assert by_name.features.osl_hat == 2048 and by_name.osl_class is None
    assert r.route(tokens=prompt, osl_class=0).features.osl_hat == 64
    assert r.route(tokens=prompt, osl_class=2) == by_name
    assert r.route(tokens=prompt, osl_class="long", osl_hat=7).features.osl_hat == 7  # a given osl_hat wins
    assert r.explain(tokens=prompt, osl_class="medium").decision.features.osl_hat == 512
    assert router().table.osl_class_names == ()


def test_output_length_class_errors_have_the_node_messages() -> None:
    r = router(KMEANS)
    for bad, shown in (("huge", '"huge"'), (3, "3"), (-1, "-1"), ("", '""'), ('"q"', '"\\"q\\""')):
        with pytest.raises(RequestError) as e:
            r.route(tokens=[1], osl_class=bad)
        assert str(e.value) == f"route: unknown oslClass {shown} (table classes: short, medium, long)"
    with pytest.raises(RequestError) as e:
        router().route(tokens=[1], osl_class="long")
    assert str(e.value) == "route: oslClass given but the table has no osl_classes"


def test_set_table_is_atomic() -> None:
    r = router()
    with pytest.raises(TableError, match=r"^table: bits\[2\]: expected 0 \(local\) or 1 \(remote\), got 2$"):
        r.set_table(table("invalid-bits-not-0-1.msgpack"))
    assert r.table.kind == "dynamo-isl"
    assert r.route(tokens=[1] * 64, osl_hat=1).reason == "rule"
    r.set_table(KMEANS)
    assert r.table.kind == "kmeans" and r.route(tokens=[1] * 64, osl_hat=1).reason == "cluster"


def test_explain_learned_table() -> None:
    r = router(KMEANS)
    x = r.explain(tokens=list(range(500)), osl_hat=100)
    assert x.kind == "kmeans" and len(x.scores) == 8 and len(x.standardized) == 4
    assert x.decision.cluster == min(range(8), key=lambda i: x.scores[i])
    assert x.why.startswith(f"nearest centroid is cluster {x.decision.cluster} ")


def test_threads_share_one_router() -> None:
    r = router()
    prompts = [list(range(i, i + 200)) for i in range(8)]
    expected = [r.route(tokens=p, osl_hat=5) for p in prompts]
    failures: List[str] = []

    def work() -> None:
        for _ in range(50):
            for p, e in zip(prompts, expected):
                if r.route(tokens=p, osl_hat=5) != e:
                    failures.append("mismatch")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), max_size=300), st.integers(1, 64))
def test_hash_prefix_property(tokens: List[int], block_size: int) -> None:
    """Chained hashes: the hashes of a prefix are a prefix of the hashes (what prefix matching relies on)."""
    full = hash_blocks(tokens, block_size)
    assert len(full) == len(tokens) // block_size
    cut = len(tokens) // 2
    assert hash_blocks(tokens[:cut], block_size) == full[: cut // block_size]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), max_size=400), st.floats(0, 1e6), st.integers(0, 5),
       st.floats(-1, 1e5))
def test_route_valid_inputs_never_fail(tokens: List[int], osl: float, turn: int, ctx: float) -> None:
    d = shared.route(tokens=tokens, osl_hat=osl, turn=turn, context_tokens=ctx)
    assert d.path in ("local", "remote") and d.decode_worker in ("d0", "d1")
    assert d.blocks == len(tokens) // 16 and d.features.isl == len(tokens)


shared = router()


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=400))
def test_random_table_bytes_are_refused_cleanly(data: bytes) -> None:
    try:
        describe_table(data)
    except (TableError, CoreError):
        pass


@settings(max_examples=100, deadline=None)
@given(st.integers(0, len(KMEANS) - 1), st.integers(0, 255))
def test_corrupted_tables_name_a_field(at: int, byte: int) -> None:
    data = bytearray(KMEANS)
    data[at] = byte
    try:
        describe_table(bytes(data))
    except TableError as e:
        assert str(e).startswith(f"table: {e.field}: ")


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_js_number_round_trips(x: float) -> None:
    text = js_number(x)
    if math.isnan(x):
        assert text == "NaN"
    else:
        assert float(text.replace("Infinity", "inf")) == x


def test_hash_scheme_refusals_and_reuse() -> None:
    with pytest.raises(RequestError, match="no cache salt"):
        hash_blocks([1] * 16, salt="s", hash_scheme="llm-d-cbor-fnv")
    with pytest.raises(RequestError, match="hashScheme: expected xxh64-chain or llm-d-cbor-fnv"):
        hash_blocks([1] * 16, hash_scheme="fnv")
    with pytest.raises(CoreError, match="text mode needs the xxh64-chain hash scheme"):
        hash_blocks("x" * 200, hash_scheme="llm-d-cbor-fnv")
    # the shared hashing core goes back to the default scheme after an llm-d call
    llmd = hash_blocks(list(range(16)), hash_scheme="llm-d-cbor-fnv")
    assert hash_blocks(list(range(16))) != llmd
    assert hash_blocks(list(range(16))) == hash_blocks(list(range(16)), hash_scheme="xxh64-chain")
