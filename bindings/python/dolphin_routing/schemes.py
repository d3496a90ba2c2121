"""Block-hash schemes (spec/abi.json "hash_schemes"): which one a core hashes with, and its root.

"xxh64-chain" (the default) roots at xxh64(model ‖ "\\0" ‖ salt); "llm-d-cbor-fnv" is llm-d-kv-cache v0.9.0's token
processor (tokens only, no salt), rooted at llm-d's h_0 of the hash seed (vLLM's PYTHONHASHSEED) and the model name.
"""
from __future__ import annotations

from typing import Optional

from . import _abi
from ._core import Core
from .errors import RequestError


def set_scheme(core: Core, scheme: str = "xxh64-chain", hash_seed: Optional[str] = None,
               model: Optional[str] = None, salt: Optional[str] = None) -> None:
    """Selects `scheme` on `core` with its root (the same checks and messages as the Node host)."""
    if scheme not in _abi.HASH_SCHEMES:
        raise RequestError(f"hashScheme: expected {' or '.join(_abi.HASH_SCHEMES)}, got {scheme!r}")
    if scheme == "xxh64-chain":
        if hash_seed is not None:
            raise RequestError("hashSeed: only the llm-d-cbor-fnv hash scheme has one")
        n = core.write_input(f"{model or ''}\0{salt or ''}".encode(), "setRoot") if (model or salt) else 0
        core.check(core.call("setRoot", n), "setRoot")
        return
    if salt:
        raise RequestError("salt: the llm-d-cbor-fnv hash scheme has no cache salt (use hashSeed)")
    seed, name = (hash_seed or "").encode(), (model or "").encode()
    core.write_input(seed + name, "setHashScheme")
    core.check(core.call("setHashScheme", _abi.HASH_SCHEMES[scheme], len(seed), len(name)), "setHashScheme")
