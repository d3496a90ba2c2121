// Timings of Dynamo's own code in this process: filled in by `dolphin bench peers` (see bench/peers.ts).
use crate::BadRequest;
use serde_json::Value;

pub fn run(_req: &Value) -> Result<Value, BadRequest> {
    Err(BadRequest("request.op: bench is not implemented yet".into()))
}
