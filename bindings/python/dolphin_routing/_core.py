"""The Python ↔ WebAssembly boundary: one core instance (wasmtime) and typed calls over its raw exports.

Loading is separate from wrapping: `load_module()` compiles the package's core.wasm once per process; `Core` wraps
one instance of it. Memory never grows after init (docs/abi.md), so ctypes views over the records and the input
buffer are made once; wasmtime reserves a 32-bit memory's whole address range up front, so its base never moves.
"""
from __future__ import annotations

import ctypes
import threading
from importlib import resources
from typing import Any, Callable, Dict, Optional

import wasmtime

from . import _abi
from .errors import CoreError, DolphinError

_module_lock = threading.Lock()
_engine: Optional[wasmtime.Engine] = None
_module: Optional[wasmtime.Module] = None


def load_module() -> "tuple[wasmtime.Engine, wasmtime.Module]":
    """The package's core.wasm, compiled once per process (compiling is ~10 ms; instantiating is cheap)."""
    global _engine, _module
    with _module_lock:
        if _engine is None or _module is None:
            data = resources.files(__package__).joinpath("core.wasm").read_bytes()
            engine = wasmtime.Engine()
            _module = wasmtime.Module(engine, data)
            _engine = engine
        return _engine, _module


class Core:
    """One core instance: not thread-safe (a Router guards it with a lock)."""

    def __init__(self, max_workers: int, max_input_bytes: int, index_blocks: int) -> None:
        engine, module = load_module()
        self.store = wasmtime.Store(engine)
        instance = wasmtime.Instance(self.store, module, [])
        exports = instance.exports(self.store)
        missing = [n for n in ("memory", *_abi.EXPORT_NAMES) if n not in exports]
        self._exports: Dict[str, Any] = {n: exports[n] for n in exports}
        store = self.store
        version = int(self._exports["abiVersion"](store)) if "abiVersion" in self._exports else -1
        if version != _abi.ABI_VERSION:
            raise DolphinError(f"dolphin_routing: the core module implements ABI version {version}, but this host "
                               f"expects ABI version {_abi.ABI_VERSION} (rebuild the core and the host from the same "
                               f"spec/abi.json: npm run build)")
        if missing:
            raise TypeError(f'dolphin_routing: the module does not export "{missing[0]}" (not a dolphin-routing core?)')
        self.check(self.call("init", max_workers, max_input_bytes, index_blocks), "init")
        memory = self._exports["memory"]
        base = ctypes.cast(memory.data_ptr(store), ctypes.c_void_p).value or 0
        self.base = base
        self.input_ptr = int(self.call("inputPtr"))
        self.input_capacity = int(self.call("inputCapacity"))
        self.input = (ctypes.c_ubyte * self.input_capacity).from_address(base + self.input_ptr)
        self.input_view = memoryview(self.input).cast("B")
        self.hashes_ptr = int(self.call("hashesPtr"))
        self.matched_ptr = int(self.call("matchedPtr"))
        self.request = (ctypes.c_double * _abi.REQUEST_SLOTS).from_address(base + int(self.call("requestPtr")))
        self.decision = (ctypes.c_double * _abi.DECISION_SLOTS).from_address(base + int(self.call("decisionPtr")))
        self.staging_ptr = int(self.call("stagingPtr"))
        self.scores_ptr = int(self.call("scoresPtr"))
        self.standardized_ptr = int(self.call("standardizedPtr"))
        self._route: Callable[[], int] = self._fast_caller("route")

    def call(self, name: str, *args: Any) -> Any:
        return self._exports[name](self.store, *args)

    def has(self, name: str) -> bool:
        return name in self._exports

    def check(self, rc: int, context: str) -> None:
        if rc != 0:
            raise CoreError(int(rc), float(self.call("errorDetail")), context)

    def check_count(self, n: int, context: str) -> int:
        """Exports that return a count return −code on failure."""
        if n < 0:
            self.check(-n, context)
        return n

    def write_input(self, data: "bytes | bytearray | memoryview", what: str) -> int:
        """Copies bytes into the input buffer; returns their length."""
        view = memoryview(data).cast("B")
        n = view.nbytes
        if n > self.input_capacity:
            raise CoreError(_abi.E_INPUT_TOO_LARGE, float(n), f"{what} ({n} bytes > {self.input_capacity})")
        self.input_view[:n] = view
        return n

    def route(self) -> None:
        rc = self._route()
        if rc != 0:
            self.check(rc, "route")

    def _fast_caller(self, name: str) -> Callable[[], int]:
        """A caller for a no-argument i32 export without wasmtime-py's per-call work (a type query, value boxing,
        a context manager: ~20 µs a call, measured; the bench's figure depends on it). It uses wasmtime's unchecked
        call, safe because the spec fixes the signature (checked here); on any surprise it falls back to the
        public call, which raises the proper exception."""
        func = self._exports[name]
        store = self.store

        def public() -> int:
            return int(func(store))

        try:
            from wasmtime import _ffi as ffi  # wasmtime-py's C bindings: internal, hence the fallback

            ty = func.type(store)
            if list(ty.params) or [str(t) for t in ty.results] != ["i32"]:
                return public
            context = store._context()
            func_ref = ctypes.byref(func._func)
            slots = (ffi.wasmtime_val_raw_t * 1)()
            trap = ctypes.POINTER(ffi.wasm_trap_t)()
            trap_ref = ctypes.byref(trap)
            call = ffi.wasmtime_func_call_unchecked
        except Exception:  # another wasmtime-py layout: the public call works everywhere
            return public

        def fast() -> int:
            if call(context, func_ref, slots, 1, trap_ref) or trap:
                return public()  # a trap or error: the public call reports it as an exception
            return int(slots[0].i32)

        return fast

    def read_u64s(self, ptr: int, n: int) -> "list[int]":
        return list((ctypes.c_uint64 * n).from_address(self.base + ptr))

    def read_u32s(self, ptr: int, n: int) -> "list[int]":
        return list((ctypes.c_uint32 * n).from_address(self.base + ptr))

    def read_f64s(self, ptr: int, n: int) -> "list[float]":
        return list((ctypes.c_double * n).from_address(self.base + ptr))

    def read_bytes(self, ptr: int, n: int) -> bytes:
        return ctypes.string_at(self.base + ptr, n)
