//! The crate boundaries ARCHITECTURE.md promises, checked on the real dependency graph:
//! the pure core (`docket-protocol`, `docket-decider`, `docket-policies`) links no async
//! runtime, network stack, file lock or store, so audit replay can link it alone and
//! nothing in it can reach the outside world; agents link the protocol crate and no other
//! part of the engine.

use std::collections::BTreeSet;
use std::process::Command;

use docket_tests::workspace_root;

/// The packages `cargo tree` lists with `args` (one per line, as `name vX.Y.Z`).
fn tree(args: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["tree", "--offline", "--prefix", "none", "-f", "{p}"])
        .args(args)
        .current_dir(workspace_root())
        .output()
        .expect("run cargo tree");
    assert!(
        output.status.success(),
        "cargo tree {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The packages of `package`'s normal (non-dev, non-build) dependency tree.
fn normal_dependencies(package: &str) -> BTreeSet<String> {
    tree(&["-p", package, "-e", "normal"])
}

/// Crates that do I/O or schedule work: none may enter the pure core.
const FORBIDDEN_IN_THE_CORE: &[&str] = &[
    "tokio",
    "mio",
    "hyper",
    "hyper-util",
    "h2",
    "reqwest",
    "sled",
    "fs2",
    "rusqlite",
    "docket-store",
    "docket-runtime",
    "futures",
    "futures-util",
];

#[test]
fn the_decider_and_policies_link_no_io_runtime_and_no_store() {
    for package in [
        "docket-protocol",
        "docket-decider",
        "docket-policies",
        "docket-replay",
    ] {
        let deps = normal_dependencies(package);
        assert!(
            deps.contains(package),
            "cargo tree printed no {package}: {deps:?}"
        );
        let found: Vec<&str> = FORBIDDEN_IN_THE_CORE
            .iter()
            .copied()
            .filter(|forbidden| deps.contains(*forbidden))
            .collect();
        assert!(
            found.is_empty(),
            "{package} depends on {found:?}; the pure core must stay free of I/O (ARCHITECTURE.md, invariants)"
        );
    }
}

#[test]
fn each_crate_depends_only_on_the_docket_crates_below_it() {
    for (package, allowed) in [
        ("docket-policies", &["docket-policies"][..]),
        ("docket-store", &["docket-store"][..]),
        ("docket-protocol", &["docket-protocol"][..]),
        (
            "docket-decider",
            &["docket-decider", "docket-protocol", "docket-policies"][..],
        ),
        (
            "docket-replay",
            &[
                "docket-replay",
                "docket-decider",
                "docket-protocol",
                "docket-policies",
            ][..],
        ),
        // The runtime drives runs; it does not replay them (what a bundle change would
        // have decided otherwise is the application layer's).
        (
            "docket-runtime",
            &[
                "docket-runtime",
                "docket-store",
                "docket-decider",
                "docket-protocol",
                "docket-policies",
            ][..],
        ),
        // The application layer sits above the runtime, replay and evidence, below the
        // command and the server; its `Store` is either backend of the log.
        (
            "docket-app",
            &[
                "docket-app",
                "docket-store",
                "docket-store-postgres",
                "docket-decider",
                "docket-protocol",
                "docket-policies",
                "docket-runtime",
                "docket-replay",
                "docket-evidence",
            ][..],
        ),
        // The server is a library the binary calls, never the other way. It links the
        // PostgreSQL backend through the application layer's `Store`.
        (
            "docket-serve",
            &[
                "docket-serve",
                "docket-store",
                "docket-store-postgres",
                "docket-decider",
                "docket-protocol",
                "docket-policies",
                "docket-runtime",
                "docket-replay",
                "docket-evidence",
                "docket-app",
            ][..],
        ),
    ] {
        let docket: Vec<String> = normal_dependencies(package)
            .into_iter()
            .filter(|d| d.starts_with("docket-") && !allowed.contains(&d.as_str()))
            .collect();
        assert!(
            docket.is_empty(),
            "{package} depends on {docket:?}, across a boundary ARCHITECTURE.md forbids"
        );
    }
}

/// What an agent written in Rust needs of docket is the protocol crate: the policy bundle,
/// the decider, JSON Schema generation and the tokenizer tables stay out of its binary.
#[test]
fn agents_link_the_protocol_crate_and_no_other_part_of_the_engine() {
    for package in [
        "docket-protocol",
        "docket-example-kit",
        "docket-example-geo",
        "docket-example-claims",
        "docket-example-consulting",
        "docket-example-software-team",
        "docket-example-social",
    ] {
        let deps = normal_dependencies(package);
        assert!(
            deps.contains(package),
            "cargo tree printed no {package}: {deps:?}"
        );
        let found: Vec<&String> = deps
            .iter()
            .filter(|d| {
                (d.starts_with("docket-")
                    && !d.starts_with("docket-example-")
                    && *d != "docket-protocol")
                    || *d == "schemars"
            })
            .collect();
        assert!(
            found.is_empty(),
            "{package} depends on {found:?}; an agent links docket-protocol only (ARCHITECTURE.md, code map)"
        );
    }
}

#[test]
fn the_check_sees_a_forbidden_dependency_where_there_is_one() {
    // The runtime links tokio and the store: if this did not show them, the checks above
    // would pass for the wrong reason.
    let deps = normal_dependencies("docket-runtime");
    assert!(
        deps.contains("tokio") && deps.contains("docket-store"),
        "{deps:?}"
    );
}

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, String)>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("read a source file");
            out.push((path, text));
        }
    }
}

/// Library errors carry data; the command line adds the command to type and the server
/// the route to call (ARCHITECTURE.md, invariants). A command or a flag quoted in a
/// library's code, outside a comment, is one its users would read in a message.
#[test]
fn library_crates_quote_no_command_to_type() {
    const QUOTED: &[&str] = &[
        "`docket ",
        "--by NAME",
        "--reason TEXT",
        "--bundle NAME",
        "--redact {",
        "docket runs lists",
        "docket answer",
    ];
    let root = workspace_root();
    let mut files = Vec::new();
    for dir in [
        "engine/decider/src",
        "engine/runtime/src",
        "evidence/src",
        "replay/src",
        "store/src",
        "policies/src",
        "app/src",
    ] {
        sources(&root.join(dir), &mut files);
    }
    assert!(files.len() > 50, "read only {} source files", files.len());
    let mut found = Vec::new();
    for (path, text) in &files {
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if !code.starts_with("//") && QUOTED.iter().any(|q| code.contains(q)) {
                found.push(format!("{}:{}: {code}", path.display(), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "library code quoting a command line (say it in cli/src/errors.rs or serve/src/error.rs):\n{}",
        found.join("\n")
    );
}

/// The packages a plain `cargo build` at the workspace's root compiles: the default
/// members and their normal and build dependencies, with the features such a build turns
/// on (no dev-dependency, so none of the features only the tests turn on).
fn plain_build_packages() -> BTreeSet<String> {
    tree(&["-e", "normal,build"])
}

#[test]
fn a_plain_build_compiles_no_test_only_crate() {
    // `cargo build` builds the default members' libraries and programs: the test
    // crate's shared support needs serde_json only, its test programs and the fuzzing
    // harness are behind features only their tests turn on (tests/Cargo.toml,
    // fuzz/Cargo.toml), and the engine benches' library needs nothing.
    let only = |package: &str, allowed: &BTreeSet<String>| {
        let deps = normal_dependencies(package);
        assert!(deps.contains(package), "{deps:?}");
        let extra: Vec<&String> = deps
            .iter()
            .filter(|d| *d != package && !allowed.contains(*d))
            .collect();
        assert!(
            extra.is_empty(),
            "a plain build of {package} compiles {extra:?}; make them dev-dependencies or put them behind the feature its tests turn on"
        );
    };
    only("docket-tests", &normal_dependencies("serde_json"));
    only("docket-fuzz", &BTreeSet::new());
    only("docket-bench-engine", &BTreeSet::new());

    // And nothing only the tests use reaches the quick start's build by another path:
    // property testing, browser driving, the MCP server's macros, temporary
    // directories, the baselines of the benches.
    let plain = plain_build_packages();
    assert!(
        plain.contains("docket-cli") && plain.contains("docket-tests"),
        "{plain:?}"
    );
    let found: Vec<&str> = [
        "proptest",
        "headless_chrome",
        "rmcp-macros",
        "darling",
        "tempfile",
        "tiktoken-rs",
        "rusqlite",
        "docket-bench",
        // The OTLP exporter posts with hyper's client (cli/src/telemetry/client.rs).
        "reqwest",
        // TLS is rustls with the `ring` provider (engine/runtime/src/transport/tls.rs):
        // no OpenSSL, no aws-lc (which needs cmake); certificates are made by the tests
        // only.
        "openssl-sys",
        "openssl",
        "aws-lc-sys",
        "aws-lc-rs",
        "rcgen",
    ]
    .into_iter()
    .filter(|only_for_tests| plain.contains(*only_for_tests))
    .collect();
    assert!(
        found.is_empty(),
        "a plain `cargo build` compiles {found:?}, which only tests, benches or a client docket does not use need"
    );
}
