//! Policy decision latency: docket's handoff decision against Cedar's `is_authorized` on
//! an equivalent policy set, for the same pairs, in the same run; plus context scoping of a
//! 10 KB payload. Run: `cargo bench -p docket-bench --bench policy_decide`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::hint::black_box;
use std::str::FromStr;
use std::time::Instant;

use cedar_policy::{Authorizer, Context, Decision, Entities, EntityUid, PolicySet, Request};
use docket_policies::{InputKind, PolicyBundle, Verdict};
use serde_json::{Value, json};

const AGENTS: usize = 50;
const ALLOWED: usize = 300;
const FORBIDDEN: usize = 200;
/// Calls per timed batch (large enough that timer overhead is small against the batch) and
/// batches per engine. Cedar is far slower per call, so it gets fewer, to keep the run short.
const DOCKET_RUNS: (usize, usize) = (64, 4_000);
const CEDAR_RUNS: (usize, usize) = (4, 400);

/// Deterministic xorshift, so every run measures the same bundle and pairs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn agent(i: usize) -> String {
    format!("agent_{i:02}")
}

/// 50 agents, 300 allowed and 200 forbidden edges (500 rules), everything else denied.
/// Agent index pairs (from, to).
type Edges = Vec<(usize, usize)>;

fn generate(rng: &mut Rng) -> (Edges, Edges) {
    let mut used = std::collections::BTreeSet::new();
    let mut pick = |n: usize, rng: &mut Rng| {
        let mut out = Vec::new();
        while out.len() < n {
            let pair = (rng.below(AGENTS), rng.below(AGENTS));
            if pair.0 != pair.1 && used.insert(pair) {
                out.push(pair);
            }
        }
        out
    };
    let allowed = pick(ALLOWED, rng);
    let forbidden = pick(FORBIDDEN, rng);
    (allowed, forbidden)
}

fn docket_bundle(allowed: &[(usize, usize)], forbidden: &[(usize, usize)]) -> PolicyBundle {
    let spec = json!({
        "bundle": {"id": "bench-50x500"},
        "agents": (0..AGENTS).map(|i| json!({"id": agent(i)})).collect::<Vec<_>>(),
        "interactions": {
            "allowed": allowed.iter().map(|(f, t)| json!({"from": agent(*f), "to": agent(*t)})).collect::<Vec<_>>(),
            "forbidden": forbidden.iter().map(|(f, t)| json!({"from": agent(*f), "to": agent(*t), "reason": "generated"})).collect::<Vec<_>>(),
        },
        "multi_agent_handoffs": {
            "agent_handoff_rules": [{
                "id": "scope-big",
                "from_agent_id": agent(allowed[0].0),
                "to_agent_id": agent(allowed[0].1),
                "handoff_mode": "scoped",
                "allowed_context_fields": ["items.id", "items.score", "summary", "meta"],
                "blocked_context_fields": ["meta.secret"],
            }]
        }
    });
    match PolicyBundle::from_json_str(&spec.to_string(), "bench.json") {
        Ok(b) => b,
        Err(e) => panic!("generated bundle is invalid: {e}"),
    }
}

fn cedar_policies(allowed: &[(usize, usize)], forbidden: &[(usize, usize)]) -> PolicySet {
    let mut text = String::new();
    for (f, t) in allowed {
        text.push_str(&format!(
            "permit(principal == Agent::\"{}\", action == Action::\"handoff\", resource == Agent::\"{}\");\n",
            agent(*f),
            agent(*t)
        ));
    }
    for (f, t) in forbidden {
        text.push_str(&format!(
            "forbid(principal == Agent::\"{}\", action == Action::\"handoff\", resource == Agent::\"{}\");\n",
            agent(*f),
            agent(*t)
        ));
    }
    match PolicySet::from_str(&text) {
        Ok(p) => p,
        Err(e) => panic!("cedar policy set: {e}"),
    }
}

fn uid(s: &str) -> EntityUid {
    match EntityUid::from_str(s) {
        Ok(u) => u,
        Err(e) => panic!("cedar uid {s}: {e}"),
    }
}

/// Per-call nanoseconds of each batch, sorted.
fn measure((batch, batches): (usize, usize), mut f: impl FnMut(usize)) -> Vec<f64> {
    let mut samples = Vec::with_capacity(batches);
    for b in 0..batches {
        let start = Instant::now();
        for i in 0..batch {
            f(b * batch + i);
        }
        samples.push(start.elapsed().as_nanos() as f64 / batch as f64);
    }
    samples.sort_by(f64::total_cmp);
    samples
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

fn big_payload(rng: &mut Rng) -> Value {
    let items: Vec<Value> = (0..100)
        .map(|i| json!({"id": i, "score": (rng.next() % 1000) as f64 / 10.0, "label": format!("item {i}"), "notes": "free text that should not cross"}))
        .collect();
    json!({"items": items, "summary": "a run of a hundred scored items", "meta": {"secret": "k", "source": "bench"}, "internal": {"trace": "x".repeat(1500)}})
}

fn main() {
    let mut rng = Rng(0x5eed_d0c3e7);
    let (allowed, forbidden) = generate(&mut rng);
    let bundle = docket_bundle(&allowed, &forbidden);
    let policies = cedar_policies(&allowed, &forbidden);
    let authorizer = Authorizer::new();
    let entities = Entities::empty();
    let action = uid("Action::\"handoff\"");

    // The same pairs for both engines: every ordered pair, in a shuffled order.
    let mut pairs: Vec<(usize, usize)> = (0..AGENTS)
        .flat_map(|f| (0..AGENTS).map(move |t| (f, t)))
        .collect();
    for i in (1..pairs.len()).rev() {
        pairs.swap(i, rng.below(i + 1));
    }
    let names: Vec<String> = (0..AGENTS).map(agent).collect();
    let cedar_uids: Vec<EntityUid> = names
        .iter()
        .map(|n| uid(&format!("Agent::\"{n}\"")))
        .collect();
    let requests: Vec<Request> = pairs
        .iter()
        .map(|(f, t)| {
            match Request::new(
                cedar_uids[*f].clone(),
                action.clone(),
                cedar_uids[*t].clone(),
                Context::empty(),
                None,
            ) {
                Ok(r) => r,
                Err(e) => panic!("cedar request: {e}"),
            }
        })
        .collect();

    // Equivalence first: both must agree on every pair, or the comparison means nothing.
    let mut mismatches = 0;
    for ((f, t), req) in pairs.iter().zip(&requests) {
        let ours = bundle
            .decide_handoff(&names[*f], &names[*t], InputKind::Decision)
            .decision
            .verdict
            == Verdict::Allow;
        let theirs = authorizer
            .is_authorized(req, &policies, &entities)
            .decision()
            == Decision::Allow;
        mismatches += usize::from(ours != theirs);
    }
    assert_eq!(
        mismatches, 0,
        "docket and cedar disagree on {mismatches} pairs"
    );

    let n = pairs.len();
    let docket = measure(DOCKET_RUNS, |i| {
        let (f, t) = pairs[i % n];
        black_box(bundle.decide_handoff(
            black_box(&names[f]),
            black_box(&names[t]),
            InputKind::Decision,
        ));
    });
    let cedar = measure(CEDAR_RUNS, |i| {
        black_box(authorizer.is_authorized(black_box(&requests[i % n]), &policies, &entities));
    });

    let payload = big_payload(&mut rng);
    let bytes = payload.to_string().len();
    let (sf, st) = (agent(allowed[0].0), agent(allowed[0].1));
    let mut scope = Vec::new();
    for _ in 0..200 {
        let start = Instant::now();
        black_box(bundle.scope_context(&sf, &st, InputKind::Decision, black_box(&payload)));
        scope.push(start.elapsed().as_nanos() as f64);
    }
    scope.sort_by(f64::total_cmp);
    let mut counting = Vec::new();
    for _ in 0..200 {
        let start = Instant::now();
        black_box(docket_policies::count_value_tokens(black_box(&payload)));
        counting.push(start.elapsed().as_nanos() as f64);
    }
    counting.sort_by(f64::total_cmp);

    println!(
        "policy_decide: {AGENTS} agents, {} rules ({ALLOWED} allowed, {FORBIDDEN} forbidden), {n} pairs, equivalent verdicts on all pairs",
        ALLOWED + FORBIDDEN
    );
    println!(
        "docket decide_handoff   p50 {:>8.1} ns   p99 {:>8.1} ns",
        pct(&docket, 0.5),
        pct(&docket, 0.99)
    );
    println!(
        "cedar  is_authorized    p50 {:>8.1} ns   p99 {:>8.1} ns",
        pct(&cedar, 0.5),
        pct(&cedar, 0.99)
    );
    println!(
        "ratio cedar/docket (p50) {:.1}x",
        pct(&cedar, 0.5) / pct(&docket, 0.5)
    );
    println!(
        "docket scope_context ({bytes} B payload, with BPE token counts)  p50 {:.1} µs   p99 {:.1} µs",
        pct(&scope, 0.5) / 1000.0,
        pct(&scope, 0.99) / 1000.0
    );
    println!(
        "  of which one BPE count of the whole payload                        p50 {:.1} µs",
        pct(&counting, 0.5) / 1000.0
    );
}
