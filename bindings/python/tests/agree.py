"""Cross-language agreement harness: replays the seeded scenarios test/bindings-agree.test.ts generates (a JSON file,
argv[1]) through the Python binding and prints the results as JSON, for the test to compare with Node's and Go's
(an "explain" step gives explain's sentence)."""
from __future__ import annotations

import base64
import json
import sys
from typing import Any, Dict, List, Optional

from dolphin_routing import DolphinError, Router


def decision_json(d: Any) -> Dict[str, Any]:
    return {
        "path": d.path, "bit": d.bit, "reason": d.reason, "decode_worker": d.decode_worker,
        "prefill_worker": d.prefill_worker, "cluster": d.cluster,
        "features": {"isl": d.features.isl, "eff_P": d.features.eff_p, "eff_D": d.features.eff_d, "osl_hat": d.features.osl_hat},
        "matched_blocks": {"decode": d.matched_blocks.decode, "prefill": d.matched_blocks.prefill},
        "blocks": d.blocks, "osl_class": d.osl_class, "reuse": d.reuse,
        "cost": {"decode": d.cost.decode, "prefill": d.cost.prefill},
    }


def run(s: Dict[str, Any]) -> Dict[str, Any]:
    try:
        router = Router.load(base64.b64decode(s["table"]), workers=[(w["id"], w["role"], w["capacity_blocks"]) for w in s["workers"]],
                             block_size=s["block_size"], model=s["model"], salt=s["salt"], record_decisions=s["record"],
                             load_scale=s["load_scale"] or None, max_workers=16, max_prompt_tokens=1 << 16, index_blocks=1 << 14)
    except DolphinError as e:
        return {"load_error": str(e)}
    prompts = s["prompts"]

    def hashes_of(p: Dict[str, Any]) -> List[int]:
        return router.hash(tokens=p["tokens"]) if "tokens" in p else router.hash(text=p["text"])

    out: Dict[str, Any] = {"hashes": [[f"{h:016x}" for h in hashes_of(p)] for p in prompts], "steps": []}
    for step in s["steps"]:
        result: Optional[Any] = None
        try:
            op = step["op"]
            if op == "store":
                router.index.store(step["worker"], hashes_of(prompts[step["prompt"]])[: step["blocks"]])
            elif op == "remove":
                router.index.remove(step["worker"], hashes_of(prompts[step["prompt"]])[: step["blocks"]])
            elif op == "load":
                router.set_load(step["worker"], step["prefill"], step["decode"])
            elif op == "signals":
                router.set_signals(step["prefill_queue"], step["qps"])
            elif op == "match":
                result = router.index.match(hashes_of(prompts[step["prompt"]]))
            else:
                p = prompts[step["prompt"]]
                kwargs: Dict[str, Any] = {"turn": step["turn"], "context_tokens": step["context_tokens"],
                                          "prompt_tokens": step["prompt_tokens"], "decode_worker": step.get("pin")}
                if "osl_hat" in step:
                    kwargs["osl_hat"] = step["osl_hat"]
                if "osl_class" in step:
                    kwargs["osl_class"] = step["osl_class"]
                if step["mode"] == "hashes":
                    kwargs["block_hashes"] = hashes_of(p)
                elif "tokens" in p:
                    kwargs["tokens"] = p["tokens"]
                else:
                    kwargs["text"] = p["text"]
                # an "explain" step gives the sentence alone: the decision is what "route" compares
                result = {"why": router.explain(**kwargs).why} if op == "explain" else decision_json(router.route(**kwargs))
        except DolphinError as e:
            result = {"error": str(e)}
        out["steps"].append(result)
    return out


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        scenarios = json.load(f)
    json.dump([run(s) for s in scenarios], sys.stdout, allow_nan=False)
