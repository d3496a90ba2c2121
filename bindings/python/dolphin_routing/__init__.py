"""dolphin-routing for Python: the routing core (core.wasm, the module the Node package runs) behind a typed API.

    from dolphin_routing import Router
    router = Router.load(table_bytes, workers=[("d0", "decode"), ("p0", "prefill")])
    decision = router.route(tokens=prompt_ids, osl_hat=256)
"""
from .errors import CoreError, DolphinError, RequestError, TableError, WorkerError, core_error_message, js_number
from .router import Decision, Explanation, Features, Index, MatchedBlocks, PerWorker, Router, Worker, hash_blocks
from .tables import TableInfo, describe_table

__all__ = [
    "CoreError", "Decision", "DolphinError", "Explanation", "Features", "Index", "MatchedBlocks", "PerWorker", "RequestError", "Router",
    "TableError", "TableInfo", "Worker", "WorkerError", "core_error_message", "describe_table", "hash_blocks",
    "js_number",
]
