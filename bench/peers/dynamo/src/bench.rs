// `dolphin bench peers`'s Dynamo turn: Dynamo's own code timed in this process on the workload bench/peers.ts
// describes (the same prompt, the same cache states), medians of slices of `slice_ms` each.
//   {"op":"bench","tokens":20000,"seed":1,"block_size":16,"workers":[16,256,1024],"slice_ms":20,"slices":7,
//    "event_blocks":1000,"distinct_blocks":160000}
// → {"hash_20k_tokens_us", "match_us": {"16": …}, "route_us": {…}, "bytes_per_block", "events_us_per_1k_blocks"}
// match: RadixTree::find_matches (the tree's own walk; it takes the hashes by value, so each call clones them).
// route: hash + find_matches + DefaultWorkerSelector::select_worker on the overlaps and loads + isl_bounding on the
// chosen worker's cached tokens, as Dynamo's router runs them for one request. bytes_per_block: live heap bytes
// (a counting allocator) of a tree where 16 workers each hold distinct blocks, per (worker, block). Events: a store
// of `event_blocks` blocks then its removal through RadixTree::apply_event, per 1,000 blocks (Dynamo's events carry
// its own hashes: nothing to decode or rehash).
use crate::{uint, BadRequest};
use dynamo_kv_router::conditional_disagg::{
    ConditionalDisaggDecisionInput, ConditionalDisaggPolicy, IslBoundingPolicy,
};
use dynamo_kv_router::protocols::{
    compute_block_hash_for_seq, LocalBlockHash, RoutingConstraints, WorkerConfigLike, WorkerId,
    WorkerWithDpRank,
};
use dynamo_kv_router::scheduling::{OverlapSignals, ScheduleMode};
use dynamo_kv_router::test_utils::{make_remove_event, make_store_event};
use dynamo_kv_router::{
    DefaultWorkerSelector, KvRouterConfig, RadixTree, SchedulingRequest, WorkerLoadProjection,
    WorkerSelectionInput, WorkerSelector,
};
use rustc_hash::FxHashMap;
use serde_json::{json, Map, Value};
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{HashMap, HashSet};
use std::hint::black_box;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

/// Live heap bytes, for bytes_per_block.
struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
}
#[global_allocator]
static ALLOC: Counting = Counting;

/// bench/peers.ts's prompt: x = seed; n times { x = (x·1103515245 + 12345) mod 2^31; emit x mod 152064 }.
pub fn lcg(n: usize, seed: u32) -> Vec<u32> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(1103515245).wrapping_add(12345) & 0x7fff_ffff;
            x % 152064
        })
        .collect()
}

/// Median over `slices` slices of `slice_ms` of the mean µs per call, after one warm-up slice.
fn median_us(slices: usize, slice_ms: f64, mut f: impl FnMut()) -> f64 {
    let mut per = Vec::with_capacity(slices);
    for s in 0..=slices {
        let t = Instant::now();
        let mut n = 0u64;
        while t.elapsed().as_secs_f64() * 1e3 < slice_ms {
            f();
            n += 1;
        }
        if s > 0 {
            per.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
        }
    }
    per.sort_by(f64::total_cmp);
    per[per.len() / 2]
}

struct Config(HashSet<String>);
impl WorkerConfigLike for Config {
    fn data_parallel_start_rank(&self) -> u32 {
        0
    }
    fn data_parallel_size(&self) -> u32 {
        1
    }
    fn max_num_batched_tokens(&self) -> Option<u64> {
        Some(8192)
    }
    fn total_kv_blocks(&self) -> Option<u64> {
        Some(131_072)
    }
    fn taints(&self) -> &HashSet<String> {
        &self.0
    }
}

/// Worker w holds the first ⌊(w + 1)·B / (n + 1)⌋ blocks, with bench/peers.ts's loads.
fn held(w: usize, n: usize, blocks: usize) -> usize {
    (w + 1) * blocks / (n + 1)
}

fn request(
    scores: &FxHashMap<WorkerWithDpRank, u32>,
    n: usize,
    isl: usize,
    bs: u32,
) -> SchedulingRequest {
    let mut effective_overlap_blocks = FxHashMap::default();
    let mut effective_cached_tokens = FxHashMap::default();
    let mut worker_loads = FxHashMap::default();
    for w in 0..n as WorkerId {
        let worker = WorkerWithDpRank::from_worker_id(w);
        let overlap = scores.get(&worker).copied().unwrap_or(0);
        effective_overlap_blocks.insert(worker, overlap as f64);
        effective_cached_tokens.insert(worker, overlap as usize * bs as usize);
        worker_loads.insert(
            worker,
            WorkerLoadProjection {
                active_prefill_tokens: (w as usize * 997) % 4000,
                active_decode_blocks: ((w as usize * 1999) % 30000) / bs as usize,
                ..Default::default()
            },
        );
    }
    SchedulingRequest {
        mode: ScheduleMode::QueryOnly { request_id: None },
        token_seq: None,
        isl_tokens: isl,
        lora_name: None,
        expected_output_tokens: Some(300),
        affinity_target: None,
        pinned_worker: None,
        allowed_worker_ids: None,
        routing_constraints: RoutingConstraints {
            required_taints: HashSet::new(),
            preferred_taints: HashMap::new(),
        },
        router_config_override: None,
        track_prefill_tokens: true,
        priority_jump: 0.0,
        strict_priority: 0,
        policy_class: None,
        session_context: None,
        overlap: OverlapSignals {
            tier_overlap_blocks: Default::default(),
            effective_overlap_blocks,
            effective_cached_tokens,
        },
        kv_transfer_candidates: None,
        retain_kv_transfer_chain: false,
        shared_cache_hits: None,
        worker_loads,
        resp_tx: None,
    }
}

fn ready<T>(f: impl std::future::Future<Output = T>) -> T {
    use std::task::{Context, Poll, Waker};
    match std::pin::pin!(f)
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(v) => v,
        Poll::Pending => unreachable!("isl_bounding does not await"),
    }
}

fn tree_for(hashes: &[u64], n: usize) -> RadixTree {
    let mut tree = RadixTree::new();
    for w in 0..n {
        tree.apply_event(make_store_event(
            w as u64,
            &hashes[..held(w, n, hashes.len())],
        ))
        .unwrap();
    }
    tree
}

pub fn run(req: &Value) -> Result<Value, BadRequest> {
    let at = "request";
    let n_tokens = uint(req, "tokens", at)? as usize;
    let seed = uint(req, "seed", at)? as u32;
    let bs = uint(req, "block_size", at)? as u32;
    let slice_ms = uint(req, "slice_ms", at)? as f64;
    let slices = uint(req, "slices", at)? as usize;
    let event_blocks = uint(req, "event_blocks", at)? as usize;
    let distinct = uint(req, "distinct_blocks", at)? as usize;
    let sizes: Vec<usize> = req
        .get("workers")
        .and_then(Value::as_array)
        .ok_or_else(|| BadRequest("request.workers: expected an array of worker counts".into()))?
        .iter()
        .map(|v| {
            v.as_u64()
                .map(|n| n as usize)
                .ok_or_else(|| BadRequest("request.workers[]: expected an integer".into()))
        })
        .collect::<Result<_, _>>()?;
    let tokens = lcg(n_tokens, seed);
    let hashes: Vec<u64> = compute_block_hash_for_seq(&tokens, bs, Default::default())
        .iter()
        .map(|h| h.0)
        .collect();
    let local: Vec<LocalBlockHash> = hashes.iter().map(|&h| LocalBlockHash(h)).collect();

    let hash_us = median_us(slices, slice_ms, || {
        black_box(compute_block_hash_for_seq(
            black_box(&tokens),
            bs,
            Default::default(),
        ));
    });
    let policy = IslBoundingPolicy::new(true, 2048, 0.7);
    let selector = DefaultWorkerSelector::new(Some(KvRouterConfig::default()), "decode");
    let (mut match_us, mut route_us) = (Map::new(), Map::new());
    for &n in &sizes {
        let tree = tree_for(&hashes, n);
        let workers: HashMap<WorkerId, Config> = (0..n as WorkerId)
            .map(|w| (w, Config(HashSet::new())))
            .collect();
        match_us.insert(
            n.to_string(),
            json!(median_us(slices, slice_ms, || {
                black_box(tree.find_matches(local.clone(), false));
            })),
        );
        route_us.insert(
            n.to_string(),
            json!(median_us(slices, slice_ms, || {
                let seq = compute_block_hash_for_seq(&tokens, bs, Default::default());
                let overlap = tree.find_matches(seq, false);
                let request = request(&overlap.scores, n, n_tokens, bs);
                let chosen = selector
                    .select_worker(WorkerSelectionInput::configured(
                        &workers,
                        &request,
                        request.eligibility(),
                        bs,
                    ))
                    .expect("a worker");
                let input = ConditionalDisaggDecisionInput::new(n_tokens, chosen.cached_tokens);
                black_box(ready(policy.should_bypass_remote_prefill(input)));
            })),
        );
    }

    // bytes per (worker, block): 16 workers, each holding its own run of distinct blocks
    let before = LIVE.load(Ordering::Relaxed);
    let per_worker = distinct / 16;
    let mut tree = RadixTree::new();
    for w in 0..16u64 {
        let own: Vec<u64> = (0..per_worker as u64)
            .map(|i| (w << 40) | (i + 1))
            .collect();
        tree.apply_event(make_store_event(w, &own)).unwrap();
    }
    let bytes_per_block = (LIVE.load(Ordering::Relaxed) - before) as f64 / (16 * per_worker) as f64;
    drop(tree);

    // events: a store of event_blocks blocks, then its removal, on a worker of a 16-worker tree
    let mut tree = tree_for(&hashes, 16);
    let batch: Vec<u64> = (0..event_blocks as u64)
        .map(|i| (99 << 40) | (i + 1))
        .collect();
    let events_us = median_us(slices, slice_ms, || {
        tree.apply_event(make_store_event(16, &batch)).unwrap();
        tree.apply_event(make_remove_event(16, &batch)).unwrap();
    }) / 2.0
        * 1000.0
        / event_blocks as f64;
    Ok(json!({
        "hash_20k_tokens_us": hash_us,
        "match_us": match_us,
        "route_us": route_us,
        "bytes_per_block": bytes_per_block,
        "events_us_per_1k_blocks": events_us,
    }))
}
