"""The API users touch, mirroring the TypeScript `Router` (src/router/router.ts): workers by name, one table, one core.

`route(...)` copies the prompt into the core's input buffer, writes the request record, calls the core once and
reads the decision record. Tables are decoded and validated by the core (`loadTable`); hashing, matching, worker
choice and the policies all happen there too. A Router is safe to share between threads: one lock guards its core.
"""
from __future__ import annotations

import json
import math
import threading
from array import array
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _abi
from ._core import Core
from .errors import RequestError, WorkerError, js_number
from .explain import why
from .schemes import set_scheme
from .tables import TableInfo, _js_json, load_table

TIERS = _abi.TIERS

TokensInput = Union[Sequence[int], "array[int]", memoryview]
"""Token ids: a sequence of ints, or (fastest) an array('I') / any buffer of unsigned 32-bit ints (numpy uint32)."""
TextInput = Union[str, bytes, bytearray]
HashesInput = Union[Sequence[Union[int, str]], "array[int]"]
"""Block hashes: ints (unsigned or signed 64-bit, as vLLM publishes them), 16-hex-digit strings, or array('Q')."""
WorkerInput = Union["Worker", Tuple[str, str], Tuple[str, str, int], Mapping[str, object]]
OslClassInput = Union[str, int]
"""An output-length class: its name or its index in the table's osl_classes (TableInfo.osl_class_names)."""

DEFAULT_CAPACITY = 31_250  # GIE's LRU size per pod, the TypeScript default
DEFAULT_MAX_WORKERS = 1024
DEFAULT_MAX_PROMPT_TOKENS = (4 << 20) // 4
DEFAULT_INDEX_BLOCKS = 1 << 20
_U32_FORMATS = frozenset({"I", "<I", "=I", "@I", "L", "<L", "=L", "@L"})


@dataclass(frozen=True)
class Worker:
    id: str
    role: str  # "prefill", "decode" or "both"
    capacity_blocks: Optional[int] = None


@dataclass(frozen=True)
class Features:
    isl: float
    eff_p: float
    eff_d: float
    osl_hat: float


@dataclass(frozen=True)
class PerWorker:
    decode: float
    prefill: float


@dataclass(frozen=True)
class Load:
    """The loads a table's load bounds are checked against (table version 3), in tokens."""
    prefill: Optional[float]  # the chosen prefill worker's active prefill tokens; None when none was chosen
    decode: float  # the chosen decode worker's active prefill + active decode tokens


@dataclass(frozen=True)
class MatchedBlocks:
    decode: int
    prefill: int


@dataclass(frozen=True)
class Decision:
    path: str  # "local" or "remote"
    bit: int  # the policy's bit before worker constraints (1 = remote)
    reason: str  # one of spec "reasons"
    decode_worker: str
    prefill_worker: Optional[str]  # also set when the path is local: it is where eff_P was measured
    cluster: Optional[int]  # the cluster (k-means, GMM) or PPD cell; None for other rules
    features: Features
    matched_blocks: MatchedBlocks
    blocks: int
    osl_class: Optional[int]  # the class the output-length model predicted (None when osl_hat or osl_class given)
    reuse: float
    cost: PerWorker
    load: Load


@dataclass(frozen=True)
class Explanation:
    decision: Decision
    kind: str
    feature_names: Tuple[str, ...]
    standardized: Tuple[float, ...]  # log1p + standardized features (learned kinds)
    scores: Tuple[float, ...]  # squared distance per centroid (k-means) or log-likelihood per component (GMM)
    why: str


def _worker(spec: WorkerInput) -> Worker:
    if isinstance(spec, Worker):
        return spec
    if isinstance(spec, tuple):
        if len(spec) == 2:
            return Worker(spec[0], spec[1])
        if len(spec) == 3:
            return Worker(spec[0], spec[1], spec[2])
    if isinstance(spec, Mapping):
        capacity = spec.get("capacity_blocks")
        return Worker(str(spec.get("id", "")), str(spec.get("role", "")), None if capacity is None else int(str(capacity)))
    raise RequestError(f"router: a worker is a Worker, an (id, role[, capacity_blocks]) tuple or a mapping, got {spec!r}")


def _show(value: object) -> str:
    return js_number(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else repr(value)


def _class_index(names: Tuple[str, ...], osl_class: object) -> Optional[int]:
    """The class a name or an index picks, as Node's `representative[i]` does (an integral number in range), or None."""
    if isinstance(osl_class, str):
        return names.index(osl_class) if osl_class in names else None
    if isinstance(osl_class, float) and osl_class.is_integer():
        osl_class = int(osl_class)
    if isinstance(osl_class, int) and not isinstance(osl_class, bool) and 0 <= osl_class < len(names):
        return osl_class
    return None


def _js_stringify(value: object) -> str:
    """JSON.stringify of a class name or index, as the Node host quotes it in messages."""
    if isinstance(value, str):
        return _js_json(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        try:
            x = float(value)
        except OverflowError:  # an int beyond any double: Node cannot be given one
            return str(value)
        return js_number(x) if math.isfinite(x) else "null"
    return repr(value)


def token_array(tokens: TokensInput, what: str = "route") -> "array[int] | memoryview":
    """Token ids as 4-byte unsigned ints, checked (no silent wrap-around), copied only when they are not already."""
    try:
        view = memoryview(tokens)  # type: ignore[arg-type]
    except TypeError:
        view = None
    if view is not None and view.itemsize == 4 and view.format in _U32_FORMATS and view.ndim == 1:
        return view
    if isinstance(tokens, (str, bytes, bytearray)) or not isinstance(tokens, Iterable):
        raise RequestError(f"{what}: tokens must be a sequence of token ids")
    try:
        return array("I", tokens)
    except (TypeError, OverflowError, ValueError):
        for i, t in enumerate(tokens):
            if not (isinstance(t, int) and not isinstance(t, bool) and 0 <= t <= 0xFFFFFFFF):
                raise RequestError(f"{what}: tokens[{i}] is not a token id (integer 0–2^32−1): {_show(t)}") from None
        raise


def hash_array(hashes: HashesInput, what: str) -> "array[int]":
    """Block hashes as u64s: ints (signed 64-bit ones name the same 64 bits), 16 hex digits, or array('Q')."""
    if isinstance(hashes, array) and hashes.typecode in ("Q", "L") and hashes.itemsize == 8:
        return hashes
    if isinstance(hashes, (str, bytes, bytearray)) or not isinstance(hashes, Iterable):
        raise RequestError(f"{what}: expected a sequence of hashes")
    out = array("Q", bytes(8 * len(hashes)))
    for i, h in enumerate(hashes):
        if isinstance(h, str):
            if len(h) != 16 or any(c not in "0123456789abcdefABCDEF" for c in h):
                raise RequestError(f'{what}[{i}]: expected 16 hex digits, got "{h}"')
            out[i] = int(h, 16)
        elif isinstance(h, int) and not isinstance(h, bool):
            if h < -(1 << 63) or h >= 1 << 64:
                raise RequestError(f"{what}[{i}]: {h} does not fit in 64 bits")
            out[i] = h & 0xFFFFFFFFFFFFFFFF
        else:
            raise RequestError(f"{what}[{i}]: expected a bigint, a safe integer or 16 hex digits, got {_show(h)}")
    return out


class Index:
    """The prefix index, fed by KV events (precise mode) or by the router's own decisions."""

    def __init__(self, router: "Router") -> None:
        self._router = router

    def store(self, worker: str, hashes: HashesInput, tier: str = "GPU") -> None:
        """The worker holds these blocks in `tier` (TIERS: "GPU", the device; "CPU", a lower tier)."""
        self._router._index_op("indexStore", worker, hashes, tier)

    def remove(self, worker: str, hashes: HashesInput, tier: str = "GPU") -> None:
        """The worker no longer holds these blocks in `tier`; a block no tier holds is forgotten."""
        self._router._index_op("indexRemove", worker, hashes, tier)

    def tiers(self, worker: str, block_hash: int) -> List[str]:
        """The tiers in which the worker holds one block hash."""
        r = self._router
        with r._lock:
            r._core.write_input(memoryview(hash_array([block_hash], "indexTiers")), "indexTiers")
            bits = int(r._core.call("indexTiers", r._index_of(worker)))
        return [name for name, code in TIERS.items() if bits & (1 << code)]

    def lower_count(self, worker: str) -> int:
        """Blocks the worker holds in a lower tier only."""
        r = self._router
        with r._lock:
            return int(r._core.call("indexLowerCount", r._index_of(worker)))

    def clear(self, worker: Optional[str] = None) -> None:
        r = self._router
        with r._lock:
            r._core.check(r._core.call("indexClear", -1 if worker is None else r._index_of(worker)), "indexClear")

    def count(self, worker: str) -> int:
        r = self._router
        with r._lock:
            return int(r._core.call("indexCount", r._index_of(worker)))

    def match(self, hashes: HashesInput) -> Dict[str, int]:
        """Longest cached prefix (blocks) of these hashes on every worker."""
        r = self._router
        data = hash_array(hashes, "match")
        with r._lock:
            core = r._core
            n = core.write_input(memoryview(data), "match") // 8
            core.check_count(int(core.call("match", n, 0)), "match")
            matched = core.read_u32s(core.matched_ptr, int(core.call("workerSpanNow")))
        return {name: (matched[i] if i < len(matched) else 0) for i, name in enumerate(r._ids) if name}


class Router:
    """Routes requests with one table over named workers. Build it with `Router.load`."""

    def __init__(self, core: Core, table: TableInfo, workers: Iterable[WorkerInput], record_decisions: bool,
                 capacity_blocks: int, max_workers: int) -> None:
        self._core = core
        self._lock = threading.Lock()
        self._ids: List[str] = []
        self._by_id: Dict[str, int] = {}
        self._free: List[int] = []
        self._record = record_decisions
        self._capacity = capacity_blocks
        self._max_workers = max_workers
        self._table = table
        self.index = Index(self)
        for w in workers:
            self.add_worker(w)

    @classmethod
    def load(cls, table_bytes: bytes, workers: Sequence[WorkerInput] = (), block_size: int = 16,
             model: Optional[str] = None, salt: Optional[str] = None, record_decisions: bool = False, *,
             capacity_blocks: int = DEFAULT_CAPACITY, load_scale: Optional[float] = None,
             max_workers: int = DEFAULT_MAX_WORKERS, max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
             index_blocks: Optional[int] = None, hash_scheme: str = "xxh64-chain",
             hash_seed: Optional[str] = None, tier_weights: Optional[Mapping[str, float]] = None) -> "Router":
        """Loads a table file (msgpack bytes, decoded and validated by the core) into a new router. `hash_scheme`
        "llm-d-cbor-fnv" hashes token prompts as llm-d-kv-cache v0.9.0 does (seeded by `hash_seed` and `model`)."""
        if not isinstance(capacity_blocks, int) or capacity_blocks < 0:
            raise RequestError(f"router: capacityBlocks must be an integer ≥ 0, got {_show(capacity_blocks)}")
        if not isinstance(max_prompt_tokens, int) or not 16 <= max_prompt_tokens <= 1 << 26:
            raise RequestError(f"router: maxPromptTokens must be an integer in 16–67,108,864, got {_show(max_prompt_tokens)}")
        specs = [_worker(w) for w in workers]
        total = sum(capacity_blocks if w.capacity_blocks is None else w.capacity_blocks for w in specs)
        core = Core(max_workers, max_prompt_tokens * 4,
                    index_blocks if index_blocks is not None else max(DEFAULT_INDEX_BLOCKS, total))
        core.check(core.call("setBlockSize", block_size), "setBlockSize")
        set_scheme(core, hash_scheme, hash_seed, model, salt)
        if load_scale is not None:
            core.check(core.call("setLoadScale", float(load_scale)), "setLoadScale")
        for name, weight in (tier_weights or {}).items():  # what a lower tier's block counts for (GPU: 1)
            if name not in TIERS:
                raise RequestError(f"router: tierWeights: unknown tier {json.dumps(name)} (tiers: {', '.join(TIERS)})")
            core.check(core.call("setTierWeight", TIERS[name], float(weight)), "setTierWeight")
        info = load_table(core, table_bytes)
        return cls(core, info, specs, record_decisions, capacity_blocks, max_workers)

    # ---- table -------------------------------------------------------------------------------------------

    @property
    def table(self) -> TableInfo:
        return self._table

    def set_table(self, table_bytes: bytes) -> None:
        """Swaps the table atomically: a table the core rejects leaves the old one in place."""
        with self._lock:
            self._table = load_table(self._core, table_bytes)

    # ---- workers -----------------------------------------------------------------------------------------

    @property
    def worker_ids(self) -> Tuple[str, ...]:
        return tuple(i for i in self._ids if i)

    def add_worker(self, spec: WorkerInput) -> None:
        w = _worker(spec)
        if not isinstance(w.id, str) or w.id == "":
            raise RequestError("router: worker id must be a non-empty string")
        if w.id in self._by_id:
            raise WorkerError(f'router: worker "{w.id}" already exists')
        role = _abi.ROLES.get(w.role, 0)
        if role == 0:
            raise RequestError(f'router: worker "{w.id}": role must be prefill, decode or both, got {w.role}')
        with self._lock:
            index = self._free.pop() if self._free else len(self._ids)
            if index >= self._max_workers:
                raise RequestError(f"router: more than maxWorkers ({self._max_workers}) workers")
            capacity = self._capacity if w.capacity_blocks is None else w.capacity_blocks
            try:
                self._core.check(self._core.call("setWorker", index, role, capacity), "setWorker")
            except Exception:
                if index < len(self._ids):
                    self._free.append(index)
                raise
            if index == len(self._ids):
                self._ids.append(w.id)
            else:
                self._ids[index] = w.id
            self._by_id[w.id] = index

    def remove_worker(self, worker: str) -> None:
        with self._lock:
            index = self._index_of(worker)
            self._core.check(self._core.call("setWorker", index, 0, 0), "setWorker")
            del self._by_id[worker]
            self._ids[index] = ""
            self._free.append(index)

    def _index_of(self, worker: str) -> int:
        i = self._by_id.get(worker)
        if i is None:
            raise WorkerError(f'router: unknown worker "{worker}"')
        return i

    def set_load(self, worker: str, active_prefill_tokens: float = 0, active_decode_tokens: float = 0) -> None:
        with self._lock:
            self._core.check(self._core.call("setLoad", self._index_of(worker), float(active_prefill_tokens),
                                             float(active_decode_tokens)), "setLoad")

    def set_signals(self, prefill_queue: float = 0, qps: float = 0) -> None:
        with self._lock:
            self._core.check(self._core.call("setSignals", float(prefill_queue), float(qps)), "setSignals")

    def _index_op(self, export: str, worker: str, hashes: HashesInput, tier: str) -> None:
        if tier not in TIERS:
            raise RequestError(f"router: unknown tier {json.dumps(tier)} (tiers: {', '.join(TIERS)})")
        export = export if TIERS[tier] == 0 else f"{export}Tier"
        data = hash_array(hashes, export)
        with self._lock:
            index = self._index_of(worker)
            n = self._core.write_input(memoryview(data), export) // 8
            args = (index, n) if TIERS[tier] == 0 else (index, n, TIERS[tier])
            self._core.check(self._core.call(export, *args), export)

    # ---- hashing -----------------------------------------------------------------------------------------

    def hash(self, tokens: Optional[TokensInput] = None, text: Optional[TextInput] = None) -> List[int]:
        """Chained block hashes of a prompt under this router's block size and root (u64 ints)."""
        with self._lock:
            return _hash(self._core, tokens, text)

    # ---- routing -----------------------------------------------------------------------------------------

    def route(self, tokens: Optional[TokensInput] = None, text: Optional[TextInput] = None,
              block_hashes: Optional[HashesInput] = None, *, prompt_tokens: int = 0, osl_hat: Optional[float] = None,
              osl_class: Optional[OslClassInput] = None, turn: int = 1, decode_worker: Optional[str] = None,
              context_tokens: float = -1, prev_output_tokens: float = 0, max_tokens: float = 0) -> Decision:
        """Routes one request: give exactly one of tokens, text or block_hashes.

        The predicted output length is osl_hat when given, else the representative length of osl_class (a name or
        an index in the table's osl_classes), else what the table's output-length model predicts."""
        with self._lock:
            record = self._run_locked(tokens, text, block_hashes, prompt_tokens, osl_hat, osl_class, turn,
                                      decode_worker, context_tokens, prev_output_tokens, max_tokens, self._record)
        return self._decision(record)

    def explain(self, tokens: Optional[TokensInput] = None, text: Optional[TextInput] = None,
                block_hashes: Optional[HashesInput] = None, *, prompt_tokens: int = 0, osl_hat: Optional[float] = None,
                osl_class: Optional[OslClassInput] = None, turn: int = 1, decode_worker: Optional[str] = None,
                context_tokens: float = -1, prev_output_tokens: float = 0, max_tokens: float = 0) -> Explanation:
        """Routes without recording and says why: the standardized features and every cluster's score."""
        with self._lock:
            record = self._run_locked(tokens, text, block_hashes, prompt_tokens, osl_hat, osl_class, turn,
                                      decode_worker, context_tokens, prev_output_tokens, max_tokens, False)
            t = self._table
            learned = t.kind in _abi.LEARNED_KINDS
            scores = tuple(self._core.read_f64s(self._core.scores_ptr, t.clusters or 0)) if learned else ()
            standardized = tuple(self._core.read_f64s(self._core.standardized_ptr, t.dims or 0)) if learned else ()
        d = self._decision(record)
        return Explanation(d, t.kind, t.features if learned else (), standardized, scores, why(t, d, scores))

    def _osl_hat(self, osl_hat: Optional[float], osl_class: Optional[OslClassInput]) -> float:
        """osl_hat for the core, in Node's order (src/router/router.ts oslHatOf): given, from a class, or −1 (the model)."""
        if osl_hat is not None:
            if not osl_hat >= 0:
                raise RequestError(f"route: oslHat must be a number ≥ 0, got {_show(osl_hat)}")
            return float(osl_hat)
        if osl_class is not None:
            names = self._table.osl_class_names
            if not names:
                raise RequestError("route: oslClass given but the table has no osl_classes")
            i = _class_index(names, osl_class)
            if i is None:
                raise RequestError(
                    f"route: unknown oslClass {_js_stringify(osl_class)} (table classes: {', '.join(names)})")
            return self._table.osl_class_representative[i]
        if self._table.osl_model:
            return -1.0
        if "osl_hat" in self._table.features:
            raise RequestError("route: this table uses osl_hat and has no output-length model: give oslHat or oslClass")
        return 0.0

    def _run_locked(self, tokens: Optional[TokensInput], text: Optional[TextInput], block_hashes: Optional[HashesInput],
                    prompt_tokens: int, osl_hat: Optional[float], osl_class: Optional[OslClassInput], turn: int,
                    decode_worker: Optional[str], context_tokens: float, prev_output_tokens: float, max_tokens: float,
                    record: bool) -> List[float]:
        core = self._core
        flags = _abi.FLAG_RECORD if record else 0
        if (tokens is not None) + (text is not None) + (block_hashes is not None) != 1:
            raise RequestError("route: give exactly one of tokens, text or blockHashes")
        if text is not None:
            length = core.write_input(text.encode() if isinstance(text, str) else text, "route")
            flags |= _abi.FLAG_TEXT
        elif block_hashes is not None:
            length = core.write_input(memoryview(hash_array(block_hashes, "route: blockHashes")), "route") // 8
            flags |= _abi.FLAG_HASHES
        elif tokens is not None:
            length = core.write_input(memoryview(token_array(tokens, "route")), "route") // 4
        pinned = -1 if decode_worker is None else self._index_of(decode_worker)
        osl = self._osl_hat(osl_hat, osl_class)
        core.request[:] = [float(length), float(flags), float(prompt_tokens), osl, float(turn), float(pinned),
                           float(context_tokens), float(prev_output_tokens), float(max_tokens)]
        core.route()
        return core.decision[:]

    def _decision(self, d: List[float]) -> Decision:
        ids = self._ids
        decode = int(d[_abi.D_DECODE])
        prefill = int(d[_abi.D_PREFILL])
        cluster = d[_abi.D_CLUSTER]
        osl_class = d[_abi.D_OSL_CLASS]
        reason = int(d[_abi.D_REASON])
        return Decision(
            path="remote" if d[_abi.D_PATH] == 1 else "local",
            bit=1 if d[_abi.D_BIT] == 1 else 0,
            reason=_abi.REASONS[reason] if 0 <= reason < len(_abi.REASONS) else "rule",
            decode_worker=ids[decode] if 0 <= decode < len(ids) else "",
            prefill_worker=(ids[prefill] or None) if 0 <= prefill < len(ids) else None,
            cluster=int(cluster) if cluster >= 0 else None,
            features=Features(d[_abi.D_ISL], d[_abi.D_EFF_P], d[_abi.D_EFF_D], d[_abi.D_OSL_HAT]),
            matched_blocks=MatchedBlocks(int(d[_abi.D_MATCHED_D]), int(d[_abi.D_MATCHED_P])),
            blocks=int(d[_abi.D_BLOCKS]),
            osl_class=int(osl_class) if osl_class >= 0 else None,
            reuse=d[_abi.D_REUSE],
            cost=PerWorker(d[_abi.D_COST_D], d[_abi.D_COST_P]),
            load=Load(d[_abi.D_LOAD_P] if d[_abi.D_LOAD_P] >= 0 else None, d[_abi.D_LOAD_D]),
        )


def _hash(core: Core, tokens: Optional[TokensInput], text: Optional[TextInput]) -> List[int]:
    if (tokens is None) == (text is None):
        raise RequestError("router.hash: give tokens or text")
    if text is not None:
        n = core.write_input(text.encode() if isinstance(text, str) else text, "hashText")
        blocks = core.check_count(int(core.call("hashText", n)), "hashText")
    elif tokens is not None:
        n = core.write_input(memoryview(token_array(tokens, "hashTokens")), "hashTokens") // 4
        blocks = core.check_count(int(core.call("hashTokens", n)), "hashTokens")
    return core.read_u64s(core.hashes_ptr, blocks)


_hash_lock = threading.Lock()
_hash_core: Optional[Core] = None


def hash_blocks(prompt: Union[TokensInput, TextInput], block_size: int = 16, model: Optional[str] = None,
                salt: Optional[str] = None, *, hash_scheme: str = "xxh64-chain",
                hash_seed: Optional[str] = None) -> List[int]:
    """Chained block hashes of a prompt: token ids (block_size tokens a block) or text (str or UTF-8 bytes, 64 bytes
    a block), under the root xxh64(model ‖ "\\0" ‖ salt) (or the empty root when neither is given); or, with
    hash_scheme "llm-d-cbor-fnv", llm-d-kv-cache v0.9.0's hashes of token ids seeded by hash_seed and model."""
    global _hash_core
    with _hash_lock:
        if _hash_core is None:
            _hash_core = Core(1, 4 << 20, 16)
        core = _hash_core
        core.check(core.call("setBlockSize", block_size), "setBlockSize")
        set_scheme(core, hash_scheme, hash_seed, model, salt)
        if isinstance(prompt, (str, bytes, bytearray)):
            return _hash(core, None, prompt)
        return _hash(core, prompt, None)
