//! What checking a bundle costs follows the bundle's size, not the number of pairs of its
//! agents (docs/governance.md#limits). Counted, not timed: this test binary's allocator
//! counts the bytes each thread allocates, and the tests compare what parsing, checking,
//! compiling, hashing and warning about a generated bundle (`policy check`'s work)
//! allocates at sizes n and 4n, and bound it by the source's size over generated bundles.
//! Through the binary, `docket policy check` of a 2,000-agent bundle runs within a memory
//! limit that the pairs of its agents would not fit in.

// The counting allocator below is the one use of `unsafe` in the tests: a `GlobalAlloc`
// must be an `unsafe impl`. It only forwards to the system allocator.
#![allow(unsafe_code)]
// The measured bytes are printed (`--nocapture`) for the record of a run.
#![allow(clippy::print_stdout)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::process::Command;

use docket_policies::{
    DiagnosticCode, Format, InputKind, MAX_AGENTS, MAX_PROBLEMS, PolicyBundle, parse,
};
use docket_tests::{docket_bin, generated_bundle};
use proptest::prelude::*;

/// Forwards to the system allocator, adding every allocation's size to its thread's count
/// (tests run on several threads; each measures its own work).
struct Counting;

thread_local! {
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    // A thread being torn down has no count left; its allocations are not measured.
    let _ = ALLOCATED.try_with(|c| c.set(c.get().saturating_add(bytes as u64)));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size.saturating_sub(layout.size()));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes this thread allocated while running `f`.
fn allocated_by<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let before = ALLOCATED.with(Cell::get);
    let out = f();
    (ALLOCATED.with(Cell::get) - before, out)
}

/// What `docket policy check` does with a bundle's text: parse, check, normalise, hash
/// and compile it, then say what it would refuse and what it would warn about; and a
/// handoff decided for a pair with no edge.
fn check(src: &str) -> Result<usize, docket_policies::BundleError> {
    let b = parse(src, "generated.toml", Format::Toml)?;
    let problems = b.admission_problems().len() + b.emptied_content().len();
    let ids: Vec<&str> = b.agent_ids().collect();
    if let (Some(first), Some(last)) = (ids.first(), ids.last()) {
        let d = b.decide_handoff(last, first, InputKind::Decision);
        assert!(!d.decision.rule_id.is_empty());
    }
    Ok(problems)
}

fn bytes_to_check(src: &str) -> u64 {
    let (bytes, result) = allocated_by(|| check(src));
    let problems = result.unwrap_or_else(|e| panic!("the generated bundle is valid: {e}"));
    assert_eq!(
        problems, 0,
        "the generated bundle is admitted without warnings"
    );
    bytes
}

/// Four times the agents cost at most about four times the bytes (a logarithm's worth of
/// slack); the pairs of agents would cost sixteen times.
#[test]
fn checking_a_bundle_allocates_in_proportion_to_its_size() {
    let small = generated_bundle(500);
    let large = generated_bundle(2_000);
    let size_ratio = large.len() as f64 / small.len() as f64;
    let (a, b) = (bytes_to_check(&small), bytes_to_check(&large));
    let ratio = b as f64 / a as f64;
    println!(
        "500 agents: {a} bytes allocated; 2,000: {b} bytes; ratio {ratio:.2} for a source {size_ratio:.2} times larger"
    );
    assert!(
        ratio < size_ratio * 1.5,
        "checking 4x the agents allocated {ratio:.2}x the bytes (source {size_ratio:.2}x)"
    );
}

/// The same for a bundle with a problem at every agent: problems beyond the first
/// [`MAX_PROBLEMS`] are counted, not written, and each is located without reading the
/// source again.
#[test]
fn a_bundle_with_many_problems_is_refused_at_a_cost_in_proportion_to_its_size() {
    // Every agent declared twice, and every allowed edge skipping ahead in the flow order
    // (a reason naming each agent it skips would be quadratic to write).
    let broken = |n: usize| {
        let mut src = generated_bundle(n);
        for i in 0..n {
            src.push_str(&format!("\n[[agents]]\nid = \"a{i:06}\"\n"));
        }
        src.replace("allowed = [\n", &{
            let skips: Vec<String> = (0..n.saturating_sub(2))
                .map(|i| format!("{{ from = \"a{i:06}\", to = \"a{:06}\" }},\n", n - 1))
                .collect();
            format!("allowed = [\n{}", skips.join(""))
        })
    };
    let measure = |src: &str| {
        let (bytes, result) = allocated_by(|| check(src));
        let err = result.expect_err("the broken bundle is refused");
        let diagnostics = err.diagnostics();
        assert_eq!(diagnostics.len(), MAX_PROBLEMS + 1, "{err}");
        let last = diagnostics.last().expect("a last diagnostic");
        assert_eq!(last.code, DiagnosticCode::MoreProblems, "{err}");
        assert!(
            last.message.contains("more problems not listed"),
            "{}",
            last.message
        );
        // Every problem listed is located in the source.
        assert!(
            diagnostics[..MAX_PROBLEMS].iter().all(|d| d.line > 0),
            "{err}"
        );
        bytes
    };
    let (small, large) = (broken(500), broken(2_000));
    let size_ratio = large.len() as f64 / small.len() as f64;
    let (a, b) = (measure(&small), measure(&large));
    let ratio = b as f64 / a as f64;
    println!("refused: 500 agents {a} bytes, 2,000 agents {b} bytes, ratio {ratio:.2}");
    assert!(
        ratio < size_ratio * 1.5,
        "refusing 4x the agents allocated {ratio:.2}x the bytes (source {size_ratio:.2}x)"
    );
}

#[test]
fn more_agents_than_the_limit_are_refused_naming_the_count_and_the_limit() {
    let src = generated_bundle(MAX_AGENTS);
    let err = parse(&src, "big.toml", Format::Toml).expect_err("over the limit");
    let text = err.to_string();
    assert!(
        text.contains(&format!("{} agents", MAX_AGENTS + 1))
            && text.contains("limit of 10000")
            && text.contains("(at /agents)")
            && text.starts_with("big.toml:"),
        "{text}"
    );
    assert_eq!(
        err.diagnostics()[0].code,
        DiagnosticCode::HardMaximumExceeded
    );
    // At the limit, the bundle is checked as any other.
    let at_limit = generated_bundle(MAX_AGENTS - 1);
    PolicyBundle::from_toml_str(&at_limit, "at-limit.toml").expect("within the limit");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// Over generated bundles of any size up to a few hundred agents, with or without a
    /// problem at every agent, what checking allocates stays within a fixed multiple of the
    /// source's size.
    #[test]
    fn checking_allocates_at_most_a_multiple_of_the_source(n in 1usize..400, duplicates in 0usize..400) {
        let mut src = generated_bundle(n);
        for i in 0..duplicates.min(n) {
            src.push_str(&format!("\n[[agents]]\nid = \"a{i:06}\"\n"));
        }
        let (bytes, _) = allocated_by(|| check(&src));
        // A fixed cost (the parser's and the JSON Schema compiler's tables) plus a
        // multiple of the text.
        let bound = 4_000_000 + 400 * src.len() as u64;
        prop_assert!(bytes < bound, "{} agents ({} bytes of source): {} bytes allocated, bound {}", n, src.len(), bytes, bound);
    }
}

/// The bundle of issue rows 2: 2,000 agents cost gigabytes when every pair of agents was
/// decided when the bundle was compiled. Under an address-space limit of 1 GiB (which
/// those pairs' decisions would not fit in), `docket policy check` accepts it.
#[test]
fn policy_check_of_two_thousand_agents_runs_within_a_memory_limit() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let path = tmp.path().join("agents.toml");
    std::fs::write(&path, generated_bundle(2_000)).expect("write");
    let o = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1048576 && exec \"$0\" policy check \"$1\"")
        .arg(docket_bin())
        .arg(&path)
        .output()
        .expect("run docket under a limit");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "exit {:?}: {stdout}{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("(2001 agents)"), "{stdout}");
}
