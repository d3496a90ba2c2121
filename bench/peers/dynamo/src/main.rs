// dolphin-peer-dynamo: NVIDIA Dynamo's kv-router (crates.io dynamo-kv-router =1.6.1) behind a JSON CLI, so the
// differential tests (test/peers-*.test.ts) and `dolphin bench peers` call Dynamo's own code the same way.
// Reads one JSON request on stdin, writes one JSON answer on stdout; a bad request exits 2 with the reason on stderr.
//   {"op":"disagg","cases":[...]}  the conditional-disaggregation policies (src/conditional_disagg.rs): see disagg.rs
//   {"op":"hash","tokens":[...],"block_size":16}  compute_block_hash_for_seq (XXH3-64 per block, seed 1337)
//   {"op":"bench",...}  timings in this process: see bench.rs
mod bench;
mod disagg;

use serde_json::{json, Value};
use std::io::Read;

/// A client's mistake in the request: exit 2 with this message.
pub struct BadRequest(pub String);

pub fn field<'a>(v: &'a Value, name: &str, at: &str) -> Result<&'a Value, BadRequest> {
    v.get(name)
        .ok_or_else(|| BadRequest(format!("{at}: missing \"{name}\"")))
}

pub fn uint(v: &Value, name: &str, at: &str) -> Result<u64, BadRequest> {
    field(v, name, at)?
        .as_u64()
        .ok_or_else(|| BadRequest(format!("{at}.{name}: expected a non-negative integer")))
}

pub fn tokens_of(v: &Value, at: &str) -> Result<Vec<u32>, BadRequest> {
    let arr = field(v, "tokens", at)?
        .as_array()
        .ok_or_else(|| BadRequest(format!("{at}.tokens: expected an array")))?;
    arr.iter()
        .enumerate()
        .map(|(i, t)| {
            t.as_u64()
                .filter(|&t| t <= u32::MAX as u64)
                .map(|t| t as u32)
                .ok_or_else(|| BadRequest(format!("{at}.tokens[{i}]: expected a u32 token id")))
        })
        .collect()
}

fn hash(req: &Value) -> Result<Value, BadRequest> {
    let tokens = tokens_of(req, "request")?;
    let block_size = uint(req, "block_size", "request")? as u32;
    if block_size == 0 {
        return Err(BadRequest("request.block_size: must be positive".into()));
    }
    let hashes =
        dynamo_kv_router::compute_block_hash_for_seq(&tokens, block_size, Default::default());
    Ok(json!({ "hashes": hashes.iter().map(|h| h.0.to_string()).collect::<Vec<_>>() }))
}

fn answer(req: &Value) -> Result<Value, BadRequest> {
    match req.get("op").and_then(Value::as_str) {
        Some("disagg") => disagg::run(req),
        Some("hash") => hash(req),
        Some("bench") => bench::run(req),
        other => Err(BadRequest(format!(
            "request.op: expected disagg, hash or bench, got {other:?}"
        ))),
    }
}

fn main() {
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("dolphin-peer-dynamo: reading stdin: {e}");
        std::process::exit(2);
    }
    let result = serde_json::from_str::<Value>(&input)
        .map_err(|e| BadRequest(format!("stdin: not JSON: {e}")))
        .and_then(|req| answer(&req));
    match result {
        Ok(v) => println!("{v}"),
        Err(BadRequest(msg)) => {
            eprintln!("dolphin-peer-dynamo: {msg}");
            std::process::exit(2);
        }
    }
}
