"""Table files, loaded by the core's own decoder (`loadTable`): this module only copies the bytes in and reads back
the table info record and the output-length class records, or turns the table error record into the message the
Node host gives ("table: <field>: <problem>", from the generated table_problems templates). No msgpack decoding
happens in Python.
"""
from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from . import _abi
from ._core import Core
from .errors import CoreError, TableError, js_number
from .explain import TableGuard, read_guard

_KIND_NAMES = {code: name for name, code in _abi.KINDS.items()}


@dataclass(frozen=True)
class TableInfo:
    """What the core reports about a table it accepted (its info record; strings sliced from the table bytes)."""

    kind: str
    clusters: Optional[int]  # K for learned kinds, None for rules
    dims: Optional[int]  # feature count for learned kinds, None for rules
    features: Tuple[str, ...]
    remote_bits: int
    cells: int
    osl_classes: int
    osl_class_names: Tuple[str, ...]  # osl_classes.names (what route's osl_class may name), () when none
    osl_class_representative: Tuple[float, ...]  # each class's representative length: its osl_hat
    osl_model: bool
    checksum: str  # "xxh64:<16 hex digits>"
    split: Optional[str]
    seed: float
    slo: Optional[Tuple[float, float]]  # (ttft_ms, tpot_ms)
    provenance: Dict[str, str]
    # a rule table's parameters, a learned table's fallback rule and bounds: for explain's sentence
    guard: Optional[TableGuard] = field(default=None, repr=False, compare=False)


def load_table(core: Core, data: bytes) -> TableInfo:
    """Makes `data` (a table file) the core's active table; raises TableError naming the field when it is invalid.

    A rejected table leaves the active one in place (the core checks everything before switching)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"table: expected the table file's bytes, got {type(data).__name__}")
    table = bytes(data)
    n = core.write_input(table, "loadTable")
    rc = int(core.call("loadTable", n))
    if rc == _abi.E_BAD_TABLE:
        raise _table_error(core, table)
    if rc != 0:
        raise CoreError(rc, float(core.call("errorDetail")), "loadTable")
    return _table_info(core, table)


_describe_lock = threading.Lock()
_describe_core: Optional[Core] = None


def describe_table(data: bytes) -> TableInfo:
    """Validates a table file with the core's decoder and describes it (raises TableError as Router.load does)."""
    global _describe_core
    with _describe_lock:
        if _describe_core is None:
            _describe_core = Core(1, 4 << 20, 16)
        return load_table(_describe_core, data)


def _text(table: bytes, at: float, length: float) -> str:
    return table[int(at):int(at) + int(length)].decode("utf-8", errors="replace")


def _integer64(table: bytes, at: float, signed: bool) -> int:
    return int.from_bytes(table[int(at):int(at) + 8], "big", signed=signed)


def _js_json(s: str) -> str:
    """JSON.stringify of a string: like json.dumps, but lone surrogates escaped as \\udxxx (well-formed JSON)."""
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group(0)):04x}", json.dumps(s, ensure_ascii=False))


def _js_slice_40(s: str) -> str:
    """The first 40 UTF-16 code units of s (JavaScript's s.slice(0, 40)), a split pair kept as a lone surrogate."""
    units = s.encode("utf-16-le", errors="surrogatepass")
    if len(units) <= 80:
        return s
    return units[:80].decode("utf-16-le", errors="surrogatepass") + "…"


def _describe_value(r: List[float], table: bytes) -> str:
    """The offending value in words, as src/table/table.ts describe() writes it."""
    n = r[_abi.TE_VALUE_NUMBER]
    at = r[_abi.TE_VALUE_AT]
    t = int(r[_abi.TE_VALUE_TYPE])
    kind = _abi.TABLE_VALUE_TYPES[t] if 0 <= t < len(_abi.TABLE_VALUE_TYPES) else ""
    if kind == "nil":
        return "null"
    if kind == "boolean":
        return "true" if n == 1 else "false"
    if kind == "number":
        return js_number(n)
    if kind == "string":
        return f"the string {_js_json(_js_slice_40(_text(table, at, r[_abi.TE_VALUE_LENGTH])))}"
    if kind == "array":
        return f"an array of {js_number(n)}"
    if kind in ("map", "object"):
        return "a map"
    if kind == "integer64":
        return f"the integer {_integer64(table, at, n == 1)}"
    if kind == "bin":
        return f"binary data ({js_number(n)} bytes)"
    if kind == "map_object":
        return "a Map object"
    if kind == "undefined":
        return "a undefined"
    return "nothing"


def _problem_text(r: List[float], table: bytes) -> str:
    p = int(r[_abi.TE_PROBLEM])
    if not 0 <= p < len(_abi.TABLE_PROBLEMS):
        return f"unknown problem {js_number(r[_abi.TE_PROBLEM])} (a core newer than this host?)"
    _, message, missing_template = _abi.TABLE_PROBLEMS[p]
    missing = _abi.TABLE_VALUE_TYPES[int(r[_abi.TE_VALUE_TYPE])] == "missing"
    template = missing_template if missing and missing_template else message
    kind_name = _KIND_NAMES.get(int(r[_abi.TE_KIND]))

    def text() -> str:
        return _text(table, r[_abi.TE_VALUE_AT], r[_abi.TE_VALUE_LENGTH])

    values: Dict[str, Callable[[], str]] = {
        "got": lambda: _describe_value(r, table),
        "got_integer": lambda: str(_integer64(table, r[_abi.TE_VALUE_AT], r[_abi.TE_VALUE_NUMBER] == 1)),
        "value": lambda: js_number(r[_abi.TE_VALUE_NUMBER]),
        "previous": lambda: js_number(r[_abi.TE_PREVIOUS]),
        "expected": lambda: js_number(r[_abi.TE_EXPECTED]),
        "limit": lambda: js_number(r[_abi.TE_LIMIT]),
        "count": lambda: js_number(r[_abi.TE_COUNT]),
        "length": lambda: js_number(r[_abi.TE_LENGTH]),
        "kind": lambda: kind_name or "?",
        "kinds": lambda: ", ".join(_abi.KINDS),
        "params": lambda: ", ".join(_abi.KIND_PARAMS.get(kind_name or "", ())) or "none",
        "features": lambda: ", ".join(_abi.FEATURES),
        "osl_features": lambda: ", ".join(_abi.OSL_FEATURES),
        "string": text,
        "json": lambda: _js_json(text()),
        "actual": lambda: f"xxh64:{int(r[_abi.TE_HASH_HI]):08x}{int(r[_abi.TE_HASH_LO]):08x}",
    }
    return re.sub(r"\{([a-z_]+)\}", lambda m: values[m.group(1)]() if m.group(1) in values else m.group(0), template)


def _table_error(core: Core, table: bytes) -> TableError:
    r = core.read_f64s(int(core.call("tableErrorPtr")), _abi.TABLE_ERROR_SLOTS)
    field = core.read_bytes(int(core.call("tableErrorPathPtr")), int(r[_abi.TE_PATH_LENGTH])).decode("utf-8", "replace")
    if r[_abi.TE_PATH_TRUNCATED] == 1:
        field += "…"
    return TableError(field, f"table: {field}: {_problem_text(r, table)}")


def _table_info(core: Core, table: bytes) -> TableInfo:
    r = core.read_f64s(int(core.call("tableInfoPtr")), _abi.TABLE_INFO_SLOTS)
    kind = _KIND_NAMES.get(int(r[_abi.TI_KIND]), "?")
    learned = kind in _abi.LEARNED_KINDS
    features = tuple(_abi.FEATURES[int(r[s])] for s in (_abi.TI_FEATURE0, _abi.TI_FEATURE1, _abi.TI_FEATURE2,
                                                        _abi.TI_FEATURE3) if r[s] >= 0)

    def text(at: int, length: int) -> Optional[str]:
        return None if r[at] < 0 else _text(table, r[at], r[length])

    provenance = {"tool": text(_abi.TI_TOOL_AT, _abi.TI_TOOL_LENGTH) or "",
                  "created": text(_abi.TI_CREATED_AT, _abi.TI_CREATED_LENGTH) or "",
                  "workload": text(_abi.TI_WORKLOAD_AT, _abi.TI_WORKLOAD_LENGTH) or ""}
    notes = text(_abi.TI_NOTES_AT, _abi.TI_NOTES_LENGTH)
    if notes is not None:
        provenance["notes"] = notes
    n = int(r[_abi.TI_OSL_CLASSES])
    classes = core.read_f64s(int(core.call("tableOslClassesPtr")), n * _abi.OSL_CLASS_SLOTS)
    records = [classes[i * _abi.OSL_CLASS_SLOTS:(i + 1) * _abi.OSL_CLASS_SLOTS] for i in range(n)]
    return TableInfo(
        kind=kind,
        clusters=int(r[_abi.TI_K]) if learned else None,
        dims=int(r[_abi.TI_DIMS]) if learned else None,
        features=features,
        remote_bits=int(r[_abi.TI_REMOTE_BITS]),
        cells=int(r[_abi.TI_CELLS]),
        osl_classes=n,
        osl_class_names=tuple(_text(table, c[_abi.OC_NAME_AT], c[_abi.OC_NAME_LENGTH]) for c in records),
        osl_class_representative=tuple(c[_abi.OC_REPRESENTATIVE] for c in records),
        osl_model=r[_abi.TI_OSL_MODEL_FEATURES] > 0,
        checksum=f"xxh64:{int(r[_abi.TI_CHECKSUM_HI]):08x}{int(r[_abi.TI_CHECKSUM_LO]):08x}",
        split=text(_abi.TI_SPLIT_AT, _abi.TI_SPLIT_LENGTH),
        seed=r[_abi.TI_SEED],
        slo=None if r[_abi.TI_SLO_TTFT_MS] < 0 else (r[_abi.TI_SLO_TTFT_MS], r[_abi.TI_SLO_TPOT_MS]),
        provenance=provenance,
        guard=read_guard(core, kind, int(r[_abi.TI_K]), int(r[_abi.TI_DIMS])),
    )
