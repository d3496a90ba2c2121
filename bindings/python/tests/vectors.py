"""The conformance vectors in spec/vectors/ (shared by every binding) and their input formulas."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

SPEC = Path(__file__).resolve().parents[3] / "spec" / "vectors"
TABLES = SPEC / "tables"
LCG_VOCAB = 152064


def load(name: str) -> Any:
    return json.loads((SPEC / name).read_text(encoding="utf-8"))


def table(name: str) -> bytes:
    return (TABLES / name).read_bytes()


def lcg_tokens(n: int, seed: int) -> List[int]:
    """hashes.json's formula: x = seed; n times { x = (x * 1103515245 + 12345) mod 2^31; emit x mod 152064 }."""
    out = []
    x = seed & 0xFFFFFFFF
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append(x % LCG_VOCAB)
    return out


def prompt_input(p: Dict[str, Any]) -> Dict[str, Any]:
    """A decisions.json prompt as route/hash keyword arguments: tokens (ids) or text (UTF-8 bytes)."""
    if "tokens" in p:
        return {"tokens": list(p["tokens"])}
    if "tokens_formula" in p:
        return {"tokens": [t for f in p["tokens_formula"] for t in lcg_tokens(f["n"], f["seed"])]}
    if "text" in p:
        return {"text": p["text"].encode("utf-8")}
    return {"text": "".join(f["unit"] * f["count"] for f in p["text_formula"]).encode("utf-8")}
