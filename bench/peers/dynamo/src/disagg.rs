// Dynamo's conditional-disaggregation decision on given signals, through its own types:
// `ConditionalDisaggDecisionInput`, the three policies of src/conditional_disagg.rs, and the busy lines of
// src/scheduling/types.rs (`AdvisoryWorkerLoad::prefill_load_exceeds`, `decode_load_exceeds`).
// A case: {"policy": "isl_bounding" | "prefill_load" | "isl_or_load", "prompt_tokens", "cached_tokens",
//          "eff_isl_threshold"?, "eff_isl_ratio_threshold"? (Dynamo's defaults 2048, 0.7),
//          "prefill": {"active_prefill_tokens", "prefill_token_capacity", "threshold"}? (absent: signal unknown),
//          "decode": {"potential_decode_blocks", "total_kv_blocks", "threshold"}? (absent: guard off)}
// An answer: {"bypass": the policy's answer, "bypass_guarded": the same with the decode-busy guard applied, as its
// caller does (no policy in 1.6.1 reads `decode_chosen_worker_busy`; SelectResponse.decode_busy is the caller's
// veto: "bypass is disabled when the selected decode worker's projected decode load exceeds this fraction")}.
// bypass = prefill locally on the decode worker (our "local", bit 0).
use crate::{field, uint, BadRequest};
use dynamo_kv_router::conditional_disagg::{
    ConditionalDisaggDecisionInput, ConditionalDisaggPolicy, IslBoundingPolicy, IslOrLoadPolicy,
    PrefillLoadPolicy, DEFAULT_CONDITIONAL_DISAGG_EFF_ISL_RATIO_THRESHOLD,
    DEFAULT_CONDITIONAL_DISAGG_EFF_ISL_THRESHOLD,
};
use dynamo_kv_router::scheduling::AdvisoryWorkerLoad;
use serde_json::{json, Value};
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// The policies are async_trait methods that never await: one poll finishes them.
fn ready<T>(f: impl Future<Output = T>) -> T {
    match pin!(f)
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(v) => v,
        Poll::Pending => unreachable!("conditional-disagg policies do not await"),
    }
}

fn num(v: &Value, name: &str, at: &str) -> Result<f64, BadRequest> {
    field(v, name, at)?
        .as_f64()
        .ok_or_else(|| BadRequest(format!("{at}.{name}: expected a number")))
}

fn load(active: u64, capacity: u64, total_kv_blocks: Option<usize>) -> AdvisoryWorkerLoad {
    AdvisoryWorkerLoad {
        active_prefill_tokens: active as usize,
        prefill_token_capacity: capacity as usize,
        total_kv_blocks,
    }
}

fn one(case: &Value, at: &str) -> Result<Value, BadRequest> {
    let isl_threshold = match case.get("eff_isl_threshold") {
        None => DEFAULT_CONDITIONAL_DISAGG_EFF_ISL_THRESHOLD,
        Some(_) => uint(case, "eff_isl_threshold", at)? as usize,
    };
    let ratio = match case.get("eff_isl_ratio_threshold") {
        None => DEFAULT_CONDITIONAL_DISAGG_EFF_ISL_RATIO_THRESHOLD,
        Some(_) => num(case, "eff_isl_ratio_threshold", at)?,
    };
    let prefill_busy = match case.get("prefill") {
        None | Some(Value::Null) => None,
        Some(p) => {
            let at = format!("{at}.prefill");
            let l = load(
                uint(p, "active_prefill_tokens", &at)?,
                uint(p, "prefill_token_capacity", &at)?,
                None,
            );
            Some(l.prefill_load_exceeds(num(p, "threshold", &at)?))
        }
    };
    let decode_busy = match case.get("decode") {
        None | Some(Value::Null) => None,
        Some(d) => {
            let at = format!("{at}.decode");
            let l = load(0, 0, Some(uint(d, "total_kv_blocks", &at)? as usize));
            l.decode_load_exceeds(
                uint(d, "potential_decode_blocks", &at)?,
                num(d, "threshold", &at)?,
            )
        }
    };
    let input = ConditionalDisaggDecisionInput::new(
        uint(case, "prompt_tokens", at)? as usize,
        uint(case, "cached_tokens", at)? as usize,
    )
    .with_prefill_chosen_worker_busy(prefill_busy)
    .with_decode_chosen_worker_busy(decode_busy);
    let isl = IslBoundingPolicy::new(true, isl_threshold, ratio);
    let bypass = match case.get("policy").and_then(Value::as_str) {
        Some("isl_bounding") => ready(isl.should_bypass_remote_prefill(input)),
        Some("prefill_load") => {
            ready(PrefillLoadPolicy::new(true).should_bypass_remote_prefill(input))
        }
        Some("isl_or_load") => ready(
            IslOrLoadPolicy::new(isl, PrefillLoadPolicy::new(true))
                .should_bypass_remote_prefill(input),
        ),
        other => {
            return Err(BadRequest(format!(
                "{at}.policy: expected isl_bounding, prefill_load or isl_or_load, got {other:?}"
            )))
        }
    };
    Ok(json!({
        "bypass": bypass,
        "bypass_guarded": bypass && decode_busy != Some(true),
        "net_new_tokens": input.net_new_tokens(),
    }))
}

pub fn run(req: &Value) -> Result<Value, BadRequest> {
    let cases = field(req, "cases", "request")?
        .as_array()
        .ok_or_else(|| BadRequest("request.cases: expected an array".into()))?;
    let answers = cases
        .iter()
        .enumerate()
        .map(|(i, c)| one(c, &format!("request.cases[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({ "answers": answers }))
}
