//! The 5-agent GEO pipeline of `examples/geo` with in-process agents on the durable default
//! store (every batch `fdatasync`ed before it is acknowledged):
//! - pipeline runs/s and events/s with 1 run at a time and with 1000 concurrent runs;
//! - p50/p99 of one governed handoff (decision + data contract + scoping with its token
//!   counts + durable append of the batch), against a plain durable append of one event of
//!   the same size measured in the same run on the same store;
//! - the floor: for one recorded run of the pipeline, the CPU time of only the work any
//!   implementation of it must do (exact token counts of what it hands off, the data
//!   contracts, canonical rendering and BLAKE3 chaining of its events, the agents' own
//!   computation), each with the runs/s it would allow on this machine's cores.
//!
//! Run with `cargo bench -p docket-bench-engine --bench engine_pipeline`
//! (`DOCKET_BENCH_CONCURRENT` changes the 1000; `DOCKET_BENCH_COMPRESS=0` stores records
//! uncompressed, to measure what compression costs against the same build;
//! `DOCKET_BENCH_THP=1` leaves transparent huge pages on, which the `docket` binary turns
//! off; `DOCKET_BENCH_THREADS` sets the worker threads, by default the machine's available
//! parallelism as `docket` sizes its own; `DOCKET_BENCH_ONLY_CONCURRENT=1` stops after the concurrent runs, a short fixed
//! workload for comparing builds, e.g. under `valgrind --tool=callgrind`).
#![allow(clippy::print_stdout)]

mod common;

use docket_decider::AgentResponded;
use std::sync::Arc;
use std::time::{Duration, Instant};

use docket_decider::{Action, AgentRequest};
use docket_decider::{Command, EXTERNAL, RunEvent, RunRequested, RunState, decide};
use docket_example_geo::governance;
use docket_policies::{
    InputKind, PolicyBundle, canonical_json_text, count_tokens_afresh, count_value_tokens,
};
use docket_runtime::Workflow;
use docket_runtime::{PayloadEncoding, Runtime};
use docket_store::{
    EmbeddedStore, EventStore, Hash, NewEvent, StoreConfig, StreamId, WallTime, event_hash, genesis,
};
use serde_json::Value;

use common::{AGENTS, Handler, input, input_naming, percentile, register, workflow};

/// The `docket` binary's allocator, so figures are the product's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// User + system CPU time of this process so far (Linux `/proc/self/stat`, clock ticks
/// of 10 ms): CPU per run holds still when other work shares the machine, wall time does not.
/// This process's CPU so far, from `/proc/self/stat`: user and system time in clock ticks
/// of 10 ms, and minor page faults, to say where CPU per run goes.
#[derive(Clone, Copy)]
struct ProcessCpu {
    user_ticks: u64,
    system_ticks: u64,
    minor_faults: u64,
}

impl ProcessCpu {
    fn now() -> Self {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        // Fields after the command name (which may hold spaces) start at `) `.
        let after = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
        let fields: Vec<u64> = after.split(' ').map(|f| f.parse().unwrap_or(0)).collect();
        let at = |i: usize| fields.get(i).copied().unwrap_or(0);
        ProcessCpu {
            user_ticks: at(11),
            system_ticks: at(12),
            minor_faults: at(7),
        }
    }

    /// What was spent between `earlier` and this reading.
    fn since(self, earlier: Self) -> Self {
        ProcessCpu {
            user_ticks: self.user_ticks.saturating_sub(earlier.user_ticks),
            system_ticks: self.system_ticks.saturating_sub(earlier.system_ticks),
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
        }
    }

    /// User and system time together.
    fn total(self) -> Duration {
        Duration::from_millis((self.user_ticks + self.system_ticks) * 10)
    }
}

/// CPU ticks per thread name, user and system apart (`/proc/self/task/*/stat`, threads of
/// one name added up: tokio's workers are all `tokio-runtime-w`), to find the work every run
/// passes through one thread for: the log's writer and indexer (issue 30 point 1). A
/// writer's user time is the work done per event on it; its system time is mostly the
/// kernel's write and `fdatasync`, paid per batch.
#[derive(Default)]
struct ThreadCpu(std::collections::BTreeMap<String, (u64, u64)>);

impl ThreadCpu {
    fn now() -> Self {
        let mut by_name = std::collections::BTreeMap::new();
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return Self(by_name);
        };
        for task in tasks.flatten() {
            let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
                continue;
            };
            let Some((head, rest)) = stat.rsplit_once(") ") else {
                continue;
            };
            let name = head.split_once(" (").map_or("?", |(_, n)| n).to_owned();
            let fields: Vec<u64> = rest.split(' ').map(|f| f.parse().unwrap_or(0)).collect();
            let at = |i: usize| fields.get(i).copied().unwrap_or(0);
            let entry: &mut (u64, u64) = by_name.entry(name).or_default();
            entry.0 += at(11);
            entry.1 += at(12);
        }
        Self(by_name)
    }

    /// (user, system) ticks spent per thread name since `earlier` (a thread that ended
    /// meanwhile is not counted), largest first.
    fn since(&self, earlier: &Self) -> Vec<(String, u64, u64)> {
        let mut spent: Vec<(String, u64, u64)> = self
            .0
            .iter()
            .map(|(name, &(user, system))| {
                let (u0, s0) = earlier.0.get(name).copied().unwrap_or_default();
                (
                    name.clone(),
                    user.saturating_sub(u0),
                    system.saturating_sub(s0),
                )
            })
            .filter(|(_, u, s)| u + s > 0)
            .collect();
        spent.sort_by(|a, b| (b.1 + b.2).cmp(&(a.1 + a.2)).then_with(|| a.0.cmp(&b.0)));
        spent
    }
}

/// Threads that every run's appends pass through one at a time: their CPU per run is the
/// serial section, and 1 / that is the most runs/s one process can reach.
const SERIAL_THREADS: [&str; 2] = ["docket-log-writ", "docket-log-inde"];

async fn pipelines(
    runtime: &Runtime<EmbeddedStore>,
    wf: &Workflow,
    runs: usize,
    prefix: &str,
) -> (Duration, u64) {
    let input = input();
    let started = Instant::now();
    let tasks: Vec<_> = (0..runs)
        .map(|i| {
            let runtime = runtime.clone();
            let wf = wf.clone();
            let input = input_naming(&input, format!("Brand {prefix} {i}"));
            let id = format!("{prefix}-{i}");
            tokio::spawn(async move { runtime.start(&wf, input, Some(id.into())).await })
        })
        .collect();
    let mut events = 0;
    for task in tasks {
        let outcome = task.await.expect("task").expect("run");
        assert_eq!(outcome.state.status().as_str(), "completed");
        events += outcome.state.version();
    }
    (started.elapsed(), events)
}

async fn sequential(
    runtime: &Runtime<EmbeddedStore>,
    wf: &Workflow,
    runs: usize,
    prefix: &str,
) -> (Duration, u64) {
    let input = input();
    let started = Instant::now();
    let mut events = 0;
    for i in 0..runs {
        let outcome = runtime
            .start(
                wf,
                input_naming(&input, format!("Brand {prefix} {i}")),
                Some(format!("{prefix}-{i}").into()),
            )
            .await
            .expect("run");
        events += outcome.state.version();
    }
    (started.elapsed(), events)
}

/// One governed handoff: Governance's validated scope handed to Observation, decided and
/// durably appended; against a plain durable append of the same number of bytes.
async fn handoff_latency(
    store: &EmbeddedStore,
    wf: &Workflow,
    samples: usize,
) -> (Vec<Duration>, Vec<Duration>, usize) {
    let bundle =
        PolicyBundle::from_toml_str(&wf.bundle_source, &wf.bundle_source_name).expect("bundle");
    let mut governed = Vec::with_capacity(samples);
    let mut plain = Vec::with_capacity(samples);
    let mut batch_bytes = 0;
    for i in 0..samples {
        let run_id = format!("lat-{i}");
        let stream = StreamId::new(run_id.clone()).expect("stream id");
        let mut state = RunState::default();
        let start = Command::Start(Arc::new(RunRequested {
            run_id: run_id.clone().into(),
            workflow: wf.spec.clone(),
            bundle_source: wf.bundle_source.clone(),
            bundle_source_name: wf.bundle_source_name.clone(),
            bundle_hash: bundle.hash().to_hex(),
            input: input(),
            at_ms: 0,
            decider_version: docket_decider::DECIDER_VERSION,
            forked_from: None,
            scheduled: None,
            session: None,
        }));
        let events = decide(&state, &bundle, start).expect("start");
        append(store, &stream, state.version(), &events).await;
        for e in &events {
            state.apply(e);
        }
        let request = state.pending_requests()[0].clone();
        let response = governance(&request);
        let command = Command::RecordResponse(AgentResponded {
            request_id: request.request_id.clone(),
            response: response.into(),
            at_ms: 1,
        });
        let t = Instant::now();
        let events = decide(&state, &bundle, command).expect("handoff");
        append(store, &stream, state.version(), &events).await;
        governed.push(t.elapsed());
        assert!(
            events
                .iter()
                .any(|e| matches!(e, RunEvent::HandoffAllowed { .. }))
        );
        batch_bytes = events.iter().map(|e| e.encode().len()).sum();

        let plain_stream = StreamId::new(format!("plain-{i}")).expect("stream id");
        let payload = vec![b'x'; batch_bytes];
        let t = Instant::now();
        store
            .append(
                &plain_stream,
                0,
                vec![NewEvent {
                    kind: "plain".into(),
                    kind_version: 1,
                    recorded_at: WallTime(0),
                    policy: None,
                    payload,
                }],
            )
            .await
            .expect("plain append");
        plain.push(t.elapsed());
    }
    governed.sort();
    plain.sort();
    (governed, plain, batch_bytes)
}

async fn append(store: &EmbeddedStore, stream: &StreamId, version: u64, events: &[RunEvent]) {
    let batch = events
        .iter()
        .map(|e| NewEvent {
            kind: e.kind().to_owned(),
            kind_version: 1,
            recorded_at: WallTime(0),
            policy: None,
            payload: e.encode(),
        })
        .collect();
    store.append(stream, version, batch).await.expect("append");
}

// Plain or behind an `Arc`, as the engine holds them (so the same bench source builds
// against earlier versions, for before/after comparisons).
fn as_value(v: &Value) -> &Value {
    v
}

fn as_request(r: &AgentRequest) -> &AgentRequest {
    r
}

/// One handoff of a recorded run: the payload as the sender handed it over, and as the
/// receiver got it.
struct Handed<'a> {
    from: &'a str,
    to: &'a str,
    input: InputKind,
    before: &'a Value,
    delivered: &'a Value,
}

/// Every handoff of a recorded run with the payload it started from: a decision handoff's
/// payload is in the sender's response (or is the run's input), a context edge's is the
/// producer's last delivered decision output of that type (the run's input for the
/// original request a handoff context carries). Checked against the token counts
/// its audit recorded, so these are the texts the run's scoping counted.
fn handoffs(events: &[RunEvent]) -> Vec<Handed<'_>> {
    let mut out = Vec::new();
    for (i, event) in events.iter().enumerate() {
        let RunEvent::HandoffAllowed {
            from,
            to,
            output_type,
            input,
            audit,
            delivered,
            ..
        } = event
        else {
            continue;
        };
        let earlier = events[..i].iter().rev();
        let before = match input {
            // The handoff context's original request (decider version 7) crosses from
            // `external` as context: it starts from the run's input.
            InputKind::Context if from == EXTERNAL => events.iter().find_map(|e| match e {
                RunEvent::RunRequested(run) => Some(&run.input),
                _ => None,
            }),
            InputKind::Context => earlier
                .filter_map(|e| match e {
                    RunEvent::HandoffAllowed {
                        from: f,
                        output_type: t,
                        input: InputKind::Decision,
                        delivered,
                        ..
                    } if f == from && t == output_type => Some(as_value(delivered)),
                    _ => None,
                })
                .next(),
            InputKind::Decision if from == EXTERNAL => events.iter().find_map(|e| match e {
                RunEvent::RunRequested(run) => Some(&run.input),
                _ => None,
            }),
            InputKind::Decision => earlier
                .filter_map(|e| match e {
                    RunEvent::AgentResponded(AgentResponded { response, .. }) => {
                        response.actions.iter().find_map(|a| match a {
                            Action::Handoff {
                                to: t,
                                output_type: o,
                                payload,
                                task: None,
                            } if t == to && o == output_type => Some(payload),
                            Action::Finish { output } if to == EXTERNAL => Some(output),
                            _ => None,
                        })
                    }
                    _ => None,
                })
                .next(),
        };
        let before = before.expect("the payload a recorded handoff started from");
        assert_eq!(
            count_value_tokens(before),
            audit.context_before_scoping.total_tokens,
            "{from} → {to}: the payload found is the one its scoping counted"
        );
        assert_eq!(
            count_value_tokens(delivered),
            audit.context_after_scoping.total_tokens
        );
        out.push(Handed {
            from,
            to,
            input: *input,
            before,
            delivered,
        });
    }
    out
}

/// The least time per repetition of `work` over `rounds` rounds of `reps` repetitions: the
/// round least disturbed by the other work on the machine (caches warm, as for a floor).
fn per_run(rounds: usize, reps: usize, mut work: impl FnMut() -> usize) -> Duration {
    let mut sink = 0usize;
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                sink = sink.wrapping_add(std::hint::black_box(work()));
            }
            t.elapsed() / reps as u32
        })
        .collect();
    std::hint::black_box(sink);
    times.sort();
    times[0]
}

/// The floor: the CPU time of only the work one pipeline run cannot do without, timed on
/// the real functions over the payloads and `events` of one run as its log recorded them.
fn floor(events: &[RunEvent], bundle: &PolicyBundle, cpu_per_run: Duration) {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let handed = handoffs(events);
    let encoded: Vec<Vec<u8>> = events.iter().map(RunEvent::encode).collect();
    let requests: Vec<(&AgentRequest, Handler)> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::AgentCallScheduled { request, .. } => AGENTS
                .iter()
                .find(|(name, _)| *name == request.target_agent)
                .map(|(_, handle)| (as_request(request), *handle)),
            _ => None,
        })
        .collect();
    let (rounds, reps) = (15, 40);
    // Every distinct payload the run hands over, before and after scoping, rendered as
    // scoping measures it and counted once (a context edge carries a payload already counted
    // when it was delivered; the per-thread cache of short pieces is warm, as in a busy engine).
    let mut counted: Vec<&Value> = Vec::new();
    for v in handed.iter().flat_map(|h| [h.before, h.delivered]) {
        if !counted.contains(&v) {
            counted.push(v);
        }
    }
    // Counted afresh each time: the engine's memory of whole texts would make every
    // repetition after the first a lookup.
    let count = per_run(rounds, reps, || {
        counted
            .iter()
            .map(|v| count_tokens_afresh(&canonical_json_text(v)))
            .sum()
    });
    let contracts = per_run(rounds, reps, || {
        handed
            .iter()
            .filter(|h| h.input == InputKind::Decision)
            .map(|h| {
                usize::from(
                    bundle
                        .check_output(h.from, h.to, h.input, h.before)
                        .is_allowed(),
                )
            })
            .sum()
    });
    let render = per_run(rounds, reps, || {
        events.iter().map(|e| e.encode().len()).sum()
    });
    let stream = StreamId::new("floor").expect("stream id");
    let hash = per_run(rounds, reps, || {
        let mut prev: Hash = genesis(&stream);
        for bytes in &encoded {
            prev = event_hash(&prev, bytes);
        }
        usize::from(prev.0[0])
    });
    let agents = per_run(rounds, reps, || {
        requests
            .iter()
            .map(|(request, handle)| handle(request).actions.len())
            .sum()
    });
    let bytes: usize = encoded.iter().map(Vec::len).sum();
    let texts: usize = counted.iter().map(|v| canonical_json_text(v).len()).sum();
    let total = count + contracts + render + hash + agents;
    let ceiling = |d: Duration| cores as f64 / d.as_secs_f64().max(1e-12);
    println!(
        "floor of one run ({} events, {bytes} B; {} handoffs carrying {} distinct payloads, {texts} B; {} agent calls), \
         fastest of {rounds} rounds of {reps} runs' worth, on {cores} cores:",
        events.len(),
        handed.len(),
        counted.len(),
        requests.len()
    );
    for (what, d) in [
        (
            "exact token counts, each distinct payload once (render + cl100k BPE)",
            count,
        ),
        (
            "data contracts (JSON Schema of each decision handoff)",
            contracts,
        ),
        ("canonical JSON of its events", render),
        (
            "BLAKE3 chain over its events (store's event_hash, payload bytes)",
            hash,
        ),
        ("the agents' own computation (in-process handlers)", agents),
        ("all of the above", total),
    ] {
        println!(
            "  {what:<66} {:>8.1} µs/run  ceiling {:>9.0} runs/s",
            d.as_secs_f64() * 1e6,
            ceiling(d)
        );
    }
    println!(
        "  measured above: {:.0} µs CPU per run, {:.1}x the floor; 10,000 runs/s on {cores} cores needs ≤ {:.0} µs per run",
        cpu_per_run.as_secs_f64() * 1e6,
        cpu_per_run.as_secs_f64() / total.as_secs_f64().max(1e-12),
        cores as f64 / 10_000.0 * 1e6
    );
}

fn main() {
    // As the `docket` binary does first (docket_runtime::prefer_small_pages), so figures are
    // the product's; DOCKET_BENCH_THP=1 leaves transparent huge pages on, to measure it.
    if std::env::var("DOCKET_BENCH_THP").map_or(true, |v| v != "1") {
        docket_runtime::prefer_small_pages().expect("transparent huge pages off");
    }
    let concurrent: usize = std::env::var("DOCKET_BENCH_CONCURRENT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    // As `docket` sizes its runtime: the machine's parallelism, unless told.
    let threads: usize = std::env::var("DOCKET_BENCH_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    println!("worker threads {threads}");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let compress = std::env::var("DOCKET_BENCH_COMPRESS").map_or(true, |v| v != "0");
        println!("records {}", if compress { "compressed" } else { "uncompressed" });
        let config = StoreConfig { compress, ..StoreConfig::default() };
        let store = EmbeddedStore::open(dir.path(), config).await.expect("store");
        let runtime = Runtime::new(store.clone());
        // DOCKET_BENCH_ENCODING=3 records in payload encoding 3 (values committed apart, what
        // a workflow with `[evidence] redactable = true` gets) instead of the default 2
        // (content by hash), to compare the two in one build.
        let encoding = match std::env::var("DOCKET_BENCH_ENCODING").as_deref() {
            Ok("3") => PayloadEncoding::Committed,
            _ => PayloadEncoding::Referenced,
        };
        runtime.set_payload_encoding(encoding);
        println!("payload encoding: {encoding:?}");
        register(&runtime);
        let wf = workflow();
        // Warm up (compile the bundle once, fault in pages).
        sequential(&runtime, &wf, 3, "warm").await;

        let only_concurrent = std::env::var("DOCKET_BENCH_ONLY_CONCURRENT").is_ok_and(|v| v == "1");
        let seq_runs: u32 = if only_concurrent { 1 } else { 30 };
        let (elapsed, events) = sequential(&runtime, &wf, seq_runs as usize, "seq").await;
        let secs = elapsed.as_secs_f64();
        println!("1 run at a time:   {seq_runs} runs in {:.2} s: {:.1} runs/s, {:.0} events/s ({} events/run)",
            secs, f64::from(seq_runs) / secs, events as f64 / secs, events / u64::from(seq_runs));

        let cpu_before = ProcessCpu::now();
        let threads_before = ThreadCpu::now();
        let store_before = store.stats();
        let (elapsed, events) = pipelines(&runtime, &wf, concurrent, "conc").await;
        let spent = ProcessCpu::now().since(cpu_before);
        let by_thread = ThreadCpu::now().since(&threads_before);
        let store_after = store.stats();
        let cpu = spent.total();
        let secs = elapsed.as_secs_f64();
        println!("{concurrent} concurrent runs: {:.2} s: {:.1} runs/s, {:.0} events/s; CPU {:.2} s, {:.0} µs per run",
            secs, concurrent as f64 / secs, events as f64 / secs, cpu.as_secs_f64(),
            cpu.as_secs_f64() * 1e6 / concurrent as f64);
        let cpu_per_run = cpu / concurrent as u32;
        let per_run = |n: u64| n as f64 / concurrent as f64;
        println!("  of which user {:.0} µs, system {:.0} µs per run; {:.0} minor page faults per run",
            per_run(spent.user_ticks) * 1e4, per_run(spent.system_ticks) * 1e4, per_run(spent.minor_faults));
        // Per thread: a thread all runs pass through caps the process at 1 / its CPU per run.
        let mut serial_us = 0.0;
        for (name, user, system) in &by_thread {
            let us = per_run(user + system) * 1e4;
            let serial = SERIAL_THREADS.contains(&name.as_str());
            if serial {
                serial_us = f64::max(serial_us, us);
            }
            println!("  thread {name:<16} {us:>8.0} µs per run (user {:.0}, system {:.0}){}",
                per_run(*user) * 1e4, per_run(*system) * 1e4,
                if serial { "  (one thread for every run)" } else { "" });
        }
        if serial_us > 0.0 {
            println!("  serial CPU per run {serial_us:.0} µs (the busiest thread every run passes through): at most {:.0} runs/s for one process, whatever its cores",
                1e6 / serial_us);
        } else {
            println!("  serial CPU per run below the 10 ms tick over this many runs (no ceiling measurable)");
        }
        // Wall time in the log's serial section: a writer busy all the time caps the process
        // whatever its cores; one mostly idle does not.
        let batches = store_after.batches - store_before.batches;
        let wall_per_run = |d: Duration| d.as_secs_f64() * 1e6 / concurrent as f64;
        let committing = store_after.committing - store_before.committing;
        let writing = store_after.writing - store_before.writing;
        let indexing = store_after.indexing - store_before.indexing;
        println!("  log writer: {batches} batches ({:.1} events each), busy {:.0} µs per run ({:.0}% of the wall time), of which write + fdatasync {:.0} µs; indexer busy {:.0} µs per run ({:.0}%)",
            (store_after.events - store_before.events) as f64 / batches.max(1) as f64,
            wall_per_run(committing), 100.0 * committing.as_secs_f64() / secs,
            wall_per_run(writing), wall_per_run(indexing), 100.0 * indexing.as_secs_f64() / secs);
        // The writer's system time is paid per batch (the kernel's write and fdatasync):
        // per run it is syncs per run times the cost of one, and falls as batches grow.
        let syncs = store_after.syncs - store_before.syncs;
        if let Some((_, _, system)) = by_thread.iter().find(|(name, _, _)| name == SERIAL_THREADS[0]) {
            println!("  log writer: {:.1} syncs per run, {:.0} µs of its system time per sync",
                syncs as f64 / concurrent as f64, *system as f64 * 1e4 / syncs.max(1) as f64);
        }
        let waits = store_after.lock_waits - store_before.lock_waits;
        let waited = store_after.lock_waited - store_before.lock_waited;
        println!("  the store's shared maps found locked {waits} times ({:.2} per run), {:.1} µs waited per run",
            waits as f64 / concurrent as f64, wall_per_run(waited));
        // DOCKET_BENCH_ONLY_CONCURRENT=1 stops here: a short, fixed workload to compare two
        // builds by CPU or instruction counts (e.g. under callgrind).
        if std::env::var("DOCKET_BENCH_ONLY_CONCURRENT").is_ok_and(|v| v == "1") {
            return;
        }
        let recorded: Vec<RunEvent> = runtime.events(&"conc-0".into()).await.expect("events")
            .into_iter().map(|e| e.event).collect();
        let stats = store.stats();
        println!("store: {} batches, {} syncs, {} events so far", stats.batches, stats.syncs, stats.events);

        let (governed, plain, bytes) = handoff_latency(&store, &wf, 200).await;
        let (g50, g99) = (percentile(&governed, 0.5), percentile(&governed, 0.99));
        let (p50, p99) = (percentile(&plain, 0.5), percentile(&plain, 0.99));
        println!("governed handoff (decide + contract + scoping + durable append, {bytes} B batch): p50 {:?} p99 {:?}", g50, g99);
        println!("plain durable append of {bytes} B:                                              p50 {:?} p99 {:?}", p50, p99);
        println!("ratio governed / plain: p50 {:.2}x, p99 {:.2}x",
            g50.as_secs_f64() / p50.as_secs_f64().max(1e-9), g99.as_secs_f64() / p99.as_secs_f64().max(1e-9));

        // Where the handoff time goes without the disk: the decision alone.
        let bundle = PolicyBundle::from_toml_str(&wf.bundle_source, &wf.bundle_source_name).expect("bundle");
        let mut state = RunState::default();
        let events = decide(&state, &bundle, Command::Start(Arc::new(RunRequested {
            run_id: "cpu".into(), workflow: wf.spec.clone(), bundle_source: wf.bundle_source.clone(),
            bundle_source_name: wf.bundle_source_name.clone(), bundle_hash: bundle.hash().to_hex(), input: input(), at_ms: 0, decider_version: docket_decider::DECIDER_VERSION, forked_from: None,
            scheduled: None,
            session: None,
        }))).expect("start");
        for e in &events { state.apply(e); }
        let request = state.pending_requests()[0].clone();
        let response = governance(&request);
        let mut cpu = Vec::new();
        for _ in 0..200 {
            let t = Instant::now();
            let _ = decide(&state, &bundle, Command::RecordResponse(AgentResponded { request_id: request.request_id.clone(), response: response.clone().into(), at_ms: 1 }));
            cpu.push(t.elapsed());
        }
        cpu.sort();
        println!("decide alone (no I/O): p50 {:?} p99 {:?}", percentile(&cpu, 0.5), percentile(&cpu, 0.99));

        floor(&recorded, &bundle, cpu_per_run);
    });
}
