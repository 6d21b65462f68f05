//! Shared support for docket's integration tests.
//!
//! The tests themselves live in `tests/tests/`, a few test programs of one module per
//! capability, and use only the public API of the docket crates and the `docket` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The workspace's root directory.
#[must_use]
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// The code block that follows the marker `<!-- example: NAME -->` in a Markdown text, so
/// tests can check that documented examples are real.
#[must_use]
pub fn doc_example(markdown: &str, name: &str) -> Option<String> {
    let marker = format!("<!-- example: {name} -->");
    let after_marker = &markdown[markdown.find(&marker)? + marker.len()..];
    let fence_start = after_marker.find("```")?;
    let after_fence = &after_marker[fence_start + 3..];
    let body_start = after_fence.find('\n')? + 1;
    let body = &after_fence[body_start..];
    let body_end = body.find("```")?;
    Some(body[..body_end].to_owned())
}

/// `docs/agent-protocol.md`.
#[must_use]
pub fn agent_protocol_doc() -> String {
    std::fs::read_to_string(workspace_root().join("docs/agent-protocol.md")).unwrap_or_default()
}

/// Path of an example bundle, e.g. `example("geo")`.
pub fn example(name: &str) -> PathBuf {
    workspace_root()
        .join("examples")
        .join(name)
        .join("policy.toml")
}

/// The `docket` binary, built (once per test process) into the same target directory and
/// profile as the running test. `CARGO_BIN_EXE_docket` only exists inside the `docket-cli`
/// package, so the integration-test crate asks cargo to build the binary itself; when it is
/// already up to date this is a quick no-op.
pub fn docket_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| workspace_bin("docket-cli", "docket"))
}

/// Builds binary `bin` of workspace package `package` into the same target directory and
/// profile as the running test or bench, and returns its path (for benches and tests
/// outside the package that defines the binary, where `CARGO_BIN_EXE_*` is not set).
#[must_use]
pub fn workspace_bin(package: &str, bin: &str) -> PathBuf {
    cargo_built_bin(package, bin, None)
}

/// One of this package's test programs (`src/bin`), built as [`workspace_bin`] builds a
/// binary, for benches outside this package (its own tests use `CARGO_BIN_EXE_*`). The
/// programs need the `test-programs` feature (Cargo.toml), which a plain build leaves
/// off.
#[must_use]
pub fn test_program(bin: &str) -> PathBuf {
    cargo_built_bin("docket-tests", bin, Some("test-programs"))
}

fn cargo_built_bin(package: &str, bin: &str, feature: Option<&str>) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // <target>/<profile>/deps/<test-binary>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("profile directory")
        .to_path_buf();
    let target_dir = profile_dir
        .parent()
        .expect("target directory")
        .to_path_buf();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--quiet",
        "-p",
        package,
        "--bin",
        bin,
        "--target-dir",
    ])
    .arg(&target_dir);
    if let Some(feature) = feature {
        cmd.args(["--features", feature]);
    }
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd
        .current_dir(workspace_root())
        .status()
        .unwrap_or_else(|e| panic!("run cargo build for {bin}: {e}"));
    assert!(status.success(), "building {bin} failed");
    let path = profile_dir.join(format!("{bin}{}", std::env::consts::EXE_SUFFIX));
    assert!(path.exists(), "{} was not built", path.display());
    path
}

/// The wall clock now, ms since the Unix epoch (what docket records as `at_ms`).
#[must_use]
pub fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis(),
    )
    .expect("ms fit")
}

/// Runs `docket ARGS` on data directory `data`, requires exit code 0 (the test fails
/// with its output otherwise) and returns what it printed.
pub fn docket_ok(data: &Path, args: &[&str]) -> String {
    let out = docket_on(data, args);
    assert_eq!(
        exit_code(&out),
        0,
        "docket {args:?}: {}{}",
        stdout_text(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout_text(&out)
}

/// `docket ARGS --data DATA`, run to its end with its output captured.
#[must_use]
pub fn docket_on(data: &Path, args: &[&str]) -> Output {
    Command::new(docket_bin())
        .args(args)
        .arg("--data")
        .arg(data)
        .output()
        .expect("docket runs")
}

/// Every file under `dir` (at any depth) with its bytes, by path: what a command wrote,
/// compared before and after.
#[must_use]
pub fn files_under(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("list a directory") {
            let p = e.expect("a directory entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).expect("read a file");
                out.insert(p, bytes);
            }
        }
    }
    out
}

/// A command's standard output, as text.
#[must_use]
pub fn stdout_text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A command's exit code (-1 when a signal ended it).
#[must_use]
pub fn exit_code(output: &Output) -> i32 {
    output.status.code().unwrap_or(-1)
}

/// The run id from a run summary's first line (`run ID (name): status`).
#[must_use]
pub fn summary_run_id(output: &Output) -> String {
    stdout_text(output)
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned()
}

/// A run's events, as `docket events RUN --json` prints them (envelope and payload).
#[must_use]
pub fn run_events(data: &Path, run: &str) -> Vec<serde_json::Value> {
    let out = docket_on(data, &["events", run, "--json"]);
    assert_eq!(
        exit_code(&out),
        0,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout_text(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

/// Exports run `run` of `data` as JSON lines to `file` (`docket export --format jsonl`),
/// asserting it succeeded; returns what the command printed.
pub fn export_jsonl(data: &Path, run: &str, file: &Path) -> String {
    let out = docket_on(
        data,
        &[
            "export",
            run,
            "--format",
            "jsonl",
            "--out",
            file.to_str().expect("UTF-8 path"),
        ],
    );
    assert_eq!(
        exit_code(&out),
        0,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout_text(&out)
}

/// Copies the golden log of `shape` recorded by decider version `version` (`v12`) into
/// `dir`, a data directory of its own (tests/golden/README.md); its run is `golden-SHAPE`.
pub fn golden_log_copy(version: &str, shape: &str, dir: &Path) {
    fn files(dir: &Path) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).expect("a directory").flatten() {
            let path = entry.path();
            if path.is_dir() {
                found.extend(files(&path));
            } else {
                found.push(path);
            }
        }
        found
    }
    let from = workspace_root()
        .join("tests/golden")
        .join(version)
        .join(shape);
    for file in files(&from) {
        let to = dir.join(file.strip_prefix(&from).expect("inside the fixture"));
        std::fs::create_dir_all(to.parent().expect("a parent")).expect("mkdir");
        std::fs::copy(&file, to).expect("copy the golden log");
    }
}

/// Whether python3 with the reference verifier's libraries (`blake3`, `cryptography`) is
/// here. On CI it must be (`.ci/run` installs them); elsewhere a test without it says so
/// on standard error and checks the rest.
#[must_use]
#[allow(clippy::print_stderr)] // a skipped check says so
pub fn python_verifier() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import blake3, cryptography"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have python3 with blake3 and cryptography (.ci/run installs them)"
        );
        eprintln!("skipped the Python checks: python3 with blake3 and cryptography is missing");
    }
    ok
}

/// Checks a finished example run the way an auditor would: `docket replay` reproduces
/// every decision, and its export verifies offline.
pub fn replays_and_exports(data: &Path, run: &str) {
    let out = docket_on(data, &["replay", run]);
    assert_eq!(exit_code(&out), 0, "{}", stdout_text(&out));
    assert!(
        stdout_text(&out).contains("every decision reproduced"),
        "{}",
        stdout_text(&out)
    );
    let file = data.join(format!("{run}.jsonl"));
    export_jsonl(data, run, &file);
    let out = docket_on(data, &["verify-export", file.to_str().expect("UTF-8 path")]);
    assert_eq!(exit_code(&out), 0, "{}", stdout_text(&out));
}

/// The events of `kind` in a run's events as `run_events` reads them.
#[must_use]
pub fn events_of_kind<'a>(
    events: &'a [serde_json::Value],
    kind: &str,
) -> Vec<&'a serde_json::Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// Builds the geo example's agent binaries (once per test process) next to the `docket`
/// binary, where a workflow's bare command names are looked up first.
pub fn geo_agents_built() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| example_agents_built("docket-example-geo"));
}

/// Builds an example's agent binaries (the package's `--bins`) next to the `docket`
/// binary, in the same profile.
pub fn example_agents_built(package: &str) {
    let docket = docket_bin();
    let profile_dir = docket.parent().expect("profile directory");
    let target_dir = profile_dir.parent().expect("target directory");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet", "-p", package, "--bins", "--target-dir"])
        .arg(target_dir);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd
        .current_dir(workspace_root())
        .status()
        .unwrap_or_else(|e| panic!("run cargo build for {package}: {e}"));
    assert!(status.success(), "building {package} failed");
}

/// The geo example's workflow file.
#[must_use]
pub fn geo_workflow() -> PathBuf {
    workspace_root().join("examples/geo/workflow.toml")
}

/// A workflow over the geo bundle, written to `dir`: the real geo binaries, except the
/// agents overridden with the given TOML bodies. (Call [`geo_agents_built`] first.)
pub fn geo_workflow_with(dir: &Path, overrides: &[(&str, String)], extra: &str) -> PathBuf {
    let mut text = format!(
        "name = \"geo-test\"\npolicy = {:?}\nentry = \"governance\"\ninput_type = \"analysis_request\"\ninput = {:?}\n{extra}\n",
        workspace_root().join("examples/geo/policy.toml"),
        workspace_root().join("examples/geo/input.json"),
    );
    for agent in [
        "governance",
        "observation",
        "intelligence",
        "reasoning",
        "strategy",
    ] {
        let body = overrides
            .iter()
            .find(|(a, _)| *a == agent)
            .map_or_else(|| format!("command = {agent:?}"), |(_, b)| b.clone());
        text.push_str(&format!("[agents.{agent}]\n{body}\n"));
    }
    let path = dir.join("workflow.toml");
    std::fs::write(&path, text).expect("write workflow");
    path
}

/// The geo workflow with `[evidence] redactable = true` (payload encoding 3: values that
/// can be withheld and erased), written to `dir`. (Call [`geo_agents_built`] first.)
pub fn redactable_geo_workflow(dir: &Path) -> PathBuf {
    geo_workflow_with(dir, &[], "[evidence]\nredactable = true")
}

/// xorshift64*: a tiny seeded generator, so the kill points of the crash tests are
/// reproducible from the seed they print.
pub struct SeededRng(pub u64);

impl SeededRng {
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}

/// A one-agent workflow in `dir` (its bundle `policy.toml` with id `bundle_id`, an input,
/// and `NAME.workflow.toml`) whose agent `worker` runs `agent ARGS` (a test binary such as
/// `test-agent`, whose path only an integration test knows).
pub fn one_agent_workflow(
    dir: &Path,
    bundle_id: &str,
    name: &str,
    agent: &str,
    args: &[&str],
) -> PathBuf {
    let bundle = dir.join("policy.toml");
    std::fs::write(
        &bundle,
        format!(
            r#"
bundle = {{ id = "{bundle_id}" }}
agents = [{{ id = "external" }}, {{ id = "worker" }}]
[interactions]
allowed = [{{ from = "external", to = "worker" }}, {{ from = "worker", to = "external" }}]
[multi_agent_handoffs]
default_handoff_mode = "full"
"#
        ),
    )
    .expect("write bundle");
    let input = dir.join("input.json");
    std::fs::write(&input, r#"{"task": "x"}"#).expect("write input");
    let path = dir.join(format!("{name}.workflow.toml"));
    std::fs::write(
        &path,
        format!(
            "name = {name:?}\npolicy = {bundle:?}\nentry = \"worker\"\ninput = {input:?}\n\
             [agents.worker]\ncommand = {agent:?}\nargs = {args:?}\n"
        ),
    )
    .expect("write workflow");
    path
}

/// Starts `docket serve` on an ephemeral loopback port over `data` (in `cwd`, when given,
/// so relative workflow paths resolve there) and waits for its readiness line: the child
/// and the address it listens on. The caller kills the child.
pub fn start_serve(data: &Path, cwd: Option<&Path>) -> (std::process::Child, std::net::SocketAddr) {
    start_serve_with(data, cwd, &[])
}

/// [`start_serve`] with extra environment variables for the server and the agents and
/// effect executors it starts (the social example's `SOCIAL_OUTBOX`, say).
pub fn start_serve_with(
    data: &Path,
    cwd: Option<&Path>,
    env: &[(&str, &std::ffi::OsStr)],
) -> (std::process::Child, std::net::SocketAddr) {
    let mut command = Command::new(docket_bin());
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(data)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    let mut child = command.spawn().expect("docket serve starts");
    let addr = serve_address(&mut child);
    (child, addr)
}

/// Reads `docket serve`'s readiness line from the child's piped standard output: the
/// address it listens on.
pub fn serve_address(child: &mut std::process::Child) -> std::net::SocketAddr {
    use std::io::{BufRead, BufReader};
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the readiness line");
    line.trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("not a readiness line: {line:?}"))
        .parse()
        .expect("an address")
}

/// A valid policy bundle (TOML) with `agents` agents besides `external`, using every part
/// of the bundle whose checks relate agents to one another: a flow order through every
/// agent (one of them twice), an allowed edge from each agent to the next carrying an
/// output type, context edges, exact and wildcard forbidden edges, capabilities with
/// responsibility locks, write domains, side effects with a verifier, receivers that
/// require prior outputs, handoff rules for `FROM → *` and `* → TO` with context parts,
/// and provenance. Its size grows linearly with `agents`, so what checking it costs can
/// be compared across sizes.
#[must_use]
pub fn generated_bundle(agents: usize) -> String {
    use std::fmt::Write as _;
    let a = |i: usize| format!("a{i:06}");
    let mut t = String::new();
    let _ = writeln!(t, "[bundle]\nid = \"generated-{agents}\"\n");
    let _ = writeln!(
        t,
        "[defaults]\ntimeout_ms = 1000\n\n[[agents]]\nid = \"external\"\n"
    );
    for i in 0..agents {
        let _ = writeln!(t, "[[agents]]\nid = \"{}\"\nrole = \"worker\"", a(i));
        let _ = writeln!(t, "allowed_tools = [\"Read\", \"Bash(git *)\"]");
        let _ = writeln!(t, "write_scopes = [\"d{}\"]", i / 10);
        if i % 10 == 0 {
            let _ = writeln!(t, "capabilities = [{{ code = \"cap_{i}\" }}]");
            let _ = writeln!(t, "side_effects = [\"publish\"]");
        }
        if i % 7 == 3 {
            let _ = writeln!(
                t,
                "context_requirements = {{ requires_prior_outputs = [\"{}\"] }}",
                a(i - 1)
            );
        }
        t.push('\n');
    }
    for d in 0..agents.div_ceil(10) {
        let _ = writeln!(t, "[[domains]]\nid = \"d{d}\"\nexclusive = false\n");
    }
    let _ = writeln!(
        t,
        "[[output_types]]\nid = \"work\"\nversion = 1\nschema = {{ type = \"object\", properties = {{ text = {{ type = \"string\" }}, gaps = {{ type = \"array\" }} }} }}\n"
    );
    let _ = writeln!(
        t,
        "[[side_effects]]\nid = \"publish-api\"\nkind = \"publish\"\nlane = \"api\"\nretry_cap = 1\nverifier = \"{}\"\n",
        a(0)
    );
    for i in (0..agents).step_by(10) {
        let _ = writeln!(
            t,
            "[[responsibility_locks]]\nid = \"lock-{i}\"\ncapability = \"cap_{i}\"\nowner = \"{}\"\nreason = \"only its owner\"\n",
            a(i)
        );
    }
    if agents >= 2 {
        let _ = writeln!(
            t,
            "[[provenance]]\nid = \"cites-gaps\"\nat = {{ from = \"{}\", to = \"{}\" }}\nitems = \"/gaps\"\ncites = \"gap_id\"\nproduced_by = {{ agent = \"{}\", output_type = \"work\", ids = \"/gaps/*/id\" }}\n",
            a(1),
            a(2.min(agents - 1)),
            a(0)
        );
    }
    // The flow order visits every agent, and the first one again at the end.
    let mut order = vec!["\"external\"".to_owned()];
    order.extend((0..agents).map(|i| format!("\"{}\"", a(i))));
    if agents > 0 {
        order.push(format!("\"{}\"", a(0)));
    }
    let _ = writeln!(t, "[interactions]\nflow_order = [{}]", order.join(", "));
    let mut allowed = Vec::new();
    if agents > 0 {
        allowed.push(format!("{{ from = \"external\", to = \"{}\" }}", a(0)));
    }
    for i in 0..agents {
        let next = if i + 1 < agents { a(i + 1) } else { a(0) };
        allowed.push(format!(
            "{{ from = \"{}\", to = \"{next}\", output_type = \"work\" }}",
            a(i)
        ));
    }
    let _ = writeln!(t, "allowed = [\n  {}\n]", allowed.join(",\n  "));
    let context: Vec<String> = (0..agents.saturating_sub(2))
        .step_by(5)
        .map(|i| {
            format!(
                "{{ from = \"{}\", to = \"{}\", output_type = \"work\" }}",
                a(i),
                a(i + 2)
            )
        })
        .collect();
    let _ = writeln!(t, "context = [\n  {}\n]", context.join(",\n  "));
    let mut forbidden =
        vec!["{ from = \"*\", to = \"external\", reason = \"the run's input only\" }".to_owned()];
    forbidden.extend((1..agents).step_by(3).map(|i| {
        format!(
            "{{ from = \"{}\", to = \"{}\", reason = \"no way back\" }}",
            a(i),
            a(i - 1)
        )
    }));
    let _ = writeln!(t, "forbidden = [\n  {}\n]\n", forbidden.join(",\n  "));
    let _ = writeln!(
        t,
        "[multi_agent_handoffs]\ndefault_handoff_mode = \"full\"\nblocked_context_fields = [\"secret\"]\n"
    );
    for i in (0..agents).step_by(4) {
        let _ = writeln!(
            t,
            "[[multi_agent_handoffs.agent_handoff_rules]]\nid = \"from-{i}\"\nfrom_agent_id = \"{}\"\nto_agent_id = \"*\"\nhandoff_mode = \"scoped\"\nallowed_context_fields = [\"text\"]\ncontext_parts = {{ prior_outputs = \"required\" }}\n",
            a(i)
        );
        let _ = writeln!(
            t,
            "[[multi_agent_handoffs.agent_handoff_rules]]\nid = \"into-{i}\"\nfrom_agent_id = \"*\"\nto_agent_id = \"{}\"\nblocked_context_fields = [\"text.draft\"]\ncontext_parts = {{ prior_outputs = [\"{}\"] }}\n",
            a(i),
            a(i.saturating_sub(1))
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_block_after_its_marker() {
        let text = "intro\n<!-- example: a -->\n```json\n{\"x\": 1}\n```\n<!-- example: b -->\n```\nB\n```\n";
        assert_eq!(doc_example(text, "a").as_deref(), Some("{\"x\": 1}\n"));
        assert_eq!(doc_example(text, "b").as_deref(), Some("B\n"));
        assert_eq!(doc_example(text, "c"), None);
    }
}
