//! A workflow checked against its policy bundle and the machine before a run starts
//! (docs/workflow.md#checked-before-anything-runs): every agent the bundle can route work
//! to has an executor section, every section names an agent (or effect kind) the bundle
//! knows, every command resolves and every working directory exists. A run whose
//! workflow has a problem is refused before anything is recorded.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use docket_decider::{ExecutorSpec, WorkflowSpec};
use docket_policies::PolicyBundle;

/// The bundle's agent for where a run's input comes from and its output goes; it is
/// docket itself and never has an executor.
const EXTERNAL: &str = "external";

/// One thing wrong with a workflow, found before a run starts: the section it is in and
/// what is wrong, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowProblem {
    /// `[agents.scorer]`, `[effects.publish]`.
    pub section: String,
    /// What is wrong and what to do.
    pub message: String,
}

impl fmt::Display for WorkflowProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.section, self.message)
    }
}

/// The problems as one text: the only one inline, several one per line.
pub(crate) fn problems_text(problems: &[WorkflowProblem]) -> String {
    match problems {
        [one] => one.to_string(),
        many => {
            let mut text = format!("{} problems:", many.len());
            for p in many {
                text.push_str("\n  ");
                text.push_str(&p.to_string());
            }
            text
        }
    }
}

/// Everything wrong with running `spec` under `bundle` on this machine: the sections
/// against the bundle ([`check_against_bundle`]) and the commands and working
/// directories ([`check_executables`]).
#[must_use]
pub fn check_workflow(spec: &WorkflowSpec, bundle: &PolicyBundle) -> Vec<WorkflowProblem> {
    let mut problems = check_against_bundle(spec, bundle);
    problems.extend(check_executables(spec));
    problems
}

/// The sections against the bundle: an `[agents.ID]` section for every agent the bundle
/// can route work to (the targets of its allowed handoffs, its flow order, the owners of
/// capabilities and responsibility locks, the verifiers of its side effects; `external`
/// excepted), no section for an agent the bundle does not declare (but for the risk
/// classifiers the workflow's `classifiers` lists name), and no
/// `[effects.KIND]` section for a kind no side-effect policy of the bundle governs.
#[must_use]
pub fn check_against_bundle(spec: &WorkflowSpec, bundle: &PolicyBundle) -> Vec<WorkflowProblem> {
    let mut problems = Vec::new();
    let known: BTreeSet<&str> = bundle.agent_ids().collect();
    let known_list = listed(known.iter().copied());
    // A risk classifier is reached through the workflow's own `classifiers` lists, not
    // through the bundle: naming it there is what makes it known.
    let classifiers: BTreeSet<&str> = spec
        .agents
        .values()
        .flat_map(|a| a.classifiers.iter().map(String::as_str))
        .collect();
    for id in spec.agents.keys() {
        if !known.contains(id.as_str()) && !classifiers.contains(id.as_str()) {
            problems.push(WorkflowProblem {
                section: format!("[agents.{id}]"),
                message: format!(
                    "names `{id}`, which is not an agent of the policy bundle `{}` \
                     (its agents: {}): fix the name, remove the section, or declare the \
                     agent under [[agents]] in the bundle",
                    bundle.spec().bundle.id,
                    known_list
                ),
            });
        }
    }
    for (agent, why) in routable(bundle) {
        if !spec.agents.contains_key(agent.as_str()) {
            problems.push(WorkflowProblem {
                section: format!("[agents.{agent}]"),
                message: format!(
                    "is missing: the policy bundle can route work to `{agent}` ({}), but the \
                     workflow does not say how to reach it; add the section with `command`, \
                     `http` or `in_process = true`",
                    listed_with(why.iter().map(String::as_str), "; ")
                ),
            });
        }
    }
    let kinds: BTreeSet<&str> = bundle
        .spec()
        .side_effects
        .iter()
        .map(|s| s.kind.as_str())
        .collect();
    let kinds_list = listed(kinds.iter().copied());
    for kind in spec.effects.keys() {
        if !kinds.contains(kind.as_str()) {
            problems.push(WorkflowProblem {
                section: format!("[effects.{kind}]"),
                message: format!(
                    "names effect kind `{kind}`, which no [[side_effects]] policy of the \
                     bundle governs (its kinds: {}), so no agent can ask for it: fix the \
                     kind's name or remove the section",
                    if kinds.is_empty() {
                        "none".to_owned()
                    } else {
                        kinds_list.clone()
                    }
                ),
            });
        }
    }
    problems
}

/// The most names a problem lists of a longer list (the bundle's agents, its effect
/// kinds, the reasons an agent is routable); the rest are counted, so that the problems
/// of a workflow cost what the workflow and its bundle do, not their product.
const LISTED: usize = 20;

/// `names` joined by `, `, the first [`LISTED`] of them and how many more.
fn listed<'a>(names: impl Iterator<Item = &'a str>) -> String {
    listed_with(names, ", ")
}

fn listed_with<'a>(names: impl Iterator<Item = &'a str>, separator: &str) -> String {
    let mut text = String::new();
    let mut more = 0usize;
    for (i, name) in names.enumerate() {
        if i >= LISTED {
            more += 1;
            continue;
        }
        if i > 0 {
            text.push_str(separator);
        }
        text.push_str(name);
    }
    if more > 0 {
        text.push_str(&format!("{separator}and {more} more"));
    }
    text
}

/// Every agent the bundle can route work to, but `external`, with why (each reason
/// once, in the order found).
fn routable(bundle: &PolicyBundle) -> BTreeMap<String, Vec<String>> {
    let spec = bundle.spec();
    let mut reasons: BTreeMap<String, (BTreeSet<String>, Vec<String>)> = BTreeMap::new();
    let mut add = |agent: &str, why: String| {
        if agent == EXTERNAL || agent == "*" {
            return;
        }
        let (seen, list) = reasons.entry(agent.to_owned()).or_default();
        if seen.insert(why.clone()) {
            list.push(why);
        }
    };
    for edge in &spec.interactions.allowed {
        add(&edge.to, format!("an allowed handoff from `{}`", edge.from));
    }
    for agent in &spec.interactions.flow_order {
        add(agent, "its place in the flow order".to_owned());
    }
    for agent in &spec.agents {
        if !agent.capabilities.is_empty() {
            let codes: Vec<&str> = agent.capabilities.iter().map(|c| c.code.as_str()).collect();
            add(&agent.id, format!("its capabilities {}", codes.join(", ")));
        }
    }
    for lock in &spec.responsibility_locks {
        add(
            &lock.owner,
            format!("the owner of capability {}", lock.capability),
        );
    }
    for policy in &spec.side_effects {
        if let Some(verifier) = &policy.verifier {
            add(
                verifier,
                format!("the verifier of side effect `{}`", policy.kind),
            );
        }
    }
    reasons
        .into_iter()
        .map(|(agent, (_, list))| (agent, list))
        .collect()
}

/// The commands and working directories, as recorded (relative paths already made
/// absolute against the workflow file's directory): every `command` resolves, as a path
/// that names an executable file or as a bare name found next to the running `docket`
/// or on `PATH` (the section's own `env` `PATH` when it sets one); every `cwd` is a
/// directory; every `ca_file` is a file. Checked when a run starts and again when it is
/// resumed, approved or denied (the machine may have changed since).
#[must_use]
pub fn check_executables(spec: &WorkflowSpec) -> Vec<WorkflowProblem> {
    let mut problems = Vec::new();
    for (id, agent) in &spec.agents {
        let section = format!("[agents.{id}]");
        if let ExecutorSpec::Command { command, env, .. } = &agent.executor
            && let Some(message) = command_problem(command, env.get("PATH"))
        {
            problems.push(WorkflowProblem {
                section: section.clone(),
                message,
            });
        }
        if let Some(message) = agent.cwd.as_deref().and_then(cwd_problem) {
            problems.push(WorkflowProblem {
                section: section.clone(),
                message,
            });
        }
        if let Some(message) = agent.ca_file.as_deref().and_then(ca_file_problem) {
            problems.push(WorkflowProblem { section, message });
        }
    }
    for (kind, effect) in &spec.effects {
        let section = format!("[effects.{kind}]");
        if let Some(command) = &effect.command
            && let Some(message) = command_problem(command, effect.env.get("PATH"))
        {
            problems.push(WorkflowProblem {
                section: section.clone(),
                message,
            });
        }
        if let Some(message) = effect.cwd.as_deref().and_then(cwd_problem) {
            problems.push(WorkflowProblem {
                section: section.clone(),
                message,
            });
        }
        if let Some(message) = effect.ca_file.as_deref().and_then(ca_file_problem) {
            problems.push(WorkflowProblem { section, message });
        }
    }
    // Governed tools: a program run per call, or an MCP server.
    for (name, tool) in &spec.tools {
        if let Some(message) = tool.ca_file.as_deref().and_then(ca_file_problem) {
            problems.push(WorkflowProblem {
                section: format!("[tools.{name}]"),
                message,
            });
        }
        let (key, program) = match (&tool.command, &tool.mcp) {
            (Some(command), _) => ("`command`", command),
            (None, Some(mcp)) => ("`mcp`", mcp),
            (None, None) => continue,
        };
        if let Some(message) = command_problem(program, tool.env.get("PATH")) {
            problems.push(WorkflowProblem {
                section: format!("[tools.{name}]"),
                message: message.replacen("`command`", key, 1),
            });
        }
    }
    problems
}

/// Why `command` cannot be started, if it cannot: see [`check_executables`].
fn command_problem(command: &str, path_env: Option<&String>) -> Option<String> {
    if command.contains('/') {
        let path = Path::new(command);
        return match std::fs::metadata(path) {
            Err(_) => Some(format!(
                "`command` {command} does not exist: give the program's path relative to \
                 the workflow file's directory, or an absolute one"
            )),
            Ok(meta) if !meta.is_file() => Some(format!(
                "`command` {command} is not a file: name the program itself"
            )),
            Ok(meta) if !executable(&meta) => Some(format!(
                "`command` {command} is not executable: make it so (chmod +x), or run it \
                 through its interpreter (`command = \"python3\"`, `args = [\"...\"]`)"
            )),
            Ok(_) => None,
        };
    }
    let beside_docket = crate::transport::resolve_program(command);
    if beside_docket.is_absolute() {
        return None;
    }
    let found = match path_env {
        Some(paths) => which::which_in(command, Some(paths), std::env::current_dir().ok()?),
        None => which::which(command),
    };
    match found {
        Ok(_) => None,
        Err(_) => Some(format!(
            "`command` `{command}` is not found next to docket ({}) nor on PATH{}: install \
             it, or give its path (with a `/`, relative to the workflow file's directory)",
            exe_dir().map_or_else(|| "unknown".to_owned(), |d| d.display().to_string()),
            if path_env.is_some() {
                " (the section's env PATH)"
            } else {
                ""
            }
        )),
    }
}

/// Why `cwd` cannot be a process's working directory, if it cannot.
fn cwd_problem(cwd: &str) -> Option<String> {
    match std::fs::metadata(cwd) {
        Ok(meta) if meta.is_dir() => None,
        Ok(_) => Some(format!("`cwd` {cwd} is not a directory")),
        Err(_) => Some(format!(
            "`cwd` {cwd} does not exist: create it, or give a directory relative to the \
             workflow file's directory (\".\" for that directory itself)"
        )),
    }
}

/// Why `ca_file` cannot be read as a CA file, if it cannot (its content is checked when
/// the executor is first used).
fn ca_file_problem(ca_file: &str) -> Option<String> {
    match std::fs::metadata(ca_file) {
        Ok(meta) if meta.is_file() => None,
        Ok(_) => Some(format!("`ca_file` {ca_file} is not a file")),
        Err(_) => Some(format!(
            "`ca_file` {ca_file} does not exist: give the PEM file's path relative to the \
             workflow file's directory, or an absolute one"
        )),
    }
}

fn exe_dir() -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(PathBuf::from))
}

#[cfg(unix)]
fn executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn executable(_: &std::fs::Metadata) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const BUNDLE: &str = r#"
bundle = { id = "b" }
agents = [
  { id = "external" },
  { id = "entry" },
  { id = "next" },
  { id = "owner", capabilities = [{ code = "lookup" }] },
  { id = "checker" },
  { id = "idle" },
]
[interactions]
flow_order = ["external", "entry", "next", "external"]
allowed = [
  { from = "external", to = "entry" },
  { from = "entry", to = "next" },
  { from = "next", to = "external" },
]
[[side_effects]]
id = "publish-api"
kind = "publish"
lane = "api"
verifier = "checker"
"#;

    fn bundle() -> PolicyBundle {
        docket_policies::parse(BUNDLE, "b.toml", docket_policies::Format::Toml)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn spec(sections: &str) -> WorkflowSpec {
        let text = format!(
            "name = \"t\"\npolicy = \"b.toml\"\nentry = \"entry\"\n[agents.entry]\nin_process = true\n{sections}"
        );
        WorkflowSpec::parse(&text, Path::new("w.toml")).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn every_agent_the_bundle_can_route_to_needs_a_section_with_why() {
        let problems = check_against_bundle(&spec(""), &bundle());
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 3, "{text:#?}");
        assert!(
            text[0].starts_with("[agents.checker] is missing"),
            "{text:#?}"
        );
        assert!(text[0].contains("the verifier of side effect `publish`"));
        assert!(text[1].starts_with("[agents.next] is missing"));
        assert!(
            text[1].contains("an allowed handoff from `entry`; its place in the flow order"),
            "{}",
            text[1]
        );
        assert!(text[2].starts_with("[agents.owner] is missing"));
        assert!(text[2].contains("its capabilities lookup"));
        // `external` is docket itself, and `idle` cannot be reached: neither needs one.
        assert!(
            !text
                .iter()
                .any(|t| t.contains("external") || t.contains("idle"))
        );

        let complete = spec(
            "[agents.next]\nin_process = true\n[agents.owner]\nin_process = true\n[agents.checker]\nin_process = true\n",
        );
        assert_eq!(check_against_bundle(&complete, &bundle()), []);
    }

    #[test]
    fn sections_for_unknown_agents_and_effect_kinds_are_named() {
        let workflow = spec(
            "[agents.next]\nin_process = true\n[agents.owner]\nin_process = true\n\
             [agents.checker]\nin_process = true\n[agents.nxet]\nin_process = true\n\
             [effects.pubish]\nin_process = true\n",
        );
        let problems = check_against_bundle(&workflow, &bundle());
        assert_eq!(problems.len(), 2, "{problems:#?}");
        // A classifier is the workflow's own: named in a `classifiers` list, it is known.
        let with_classifier = spec(
            "[agents.next]\nin_process = true\nclassifiers = [\"risk\"]\n[agents.owner]\nin_process = true\n\
             [agents.checker]\nin_process = true\n[agents.risk]\nin_process = true\n",
        );
        assert_eq!(check_against_bundle(&with_classifier, &bundle()), []);
        assert_eq!(problems[0].section, "[agents.nxet]");
        assert!(
            problems[0]
                .message
                .contains("not an agent of the policy bundle `b` (its agents: checker, entry, external, idle, next, owner)"),
            "{}",
            problems[0]
        );
        assert_eq!(problems[1].section, "[effects.pubish]");
        assert!(problems[1].message.contains("(its kinds: publish)"));
    }

    #[test]
    fn commands_must_be_executable_files_and_cwds_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        let plain = dir.path().join("plain.txt");
        std::fs::write(&plain, "not a program").expect("write");
        let d = dir.path().display();
        let workflow = spec(&format!(
            "[agents.a]\ncommand = \"{d}/plain.txt\"\n\
             [agents.b]\ncommand = \"{d}\"\n\
             [agents.c]\ncommand = \"{d}/missing\"\n\
             [agents.d]\ncommand = \"sh\"\ncwd = \"{d}/plain.txt\"\n\
             [agents.e]\ncommand = \"sh\"\nenv = {{ PATH = \"{d}\" }}\n\
             [agents.f]\ncommand = \"sh\"\ncwd = \"{d}\"\n"
        ));
        let problems: Vec<String> = check_executables(&workflow)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(problems.len(), 5, "{problems:#?}");
        assert!(
            problems[0].starts_with("[agents.a] `command` ")
                && problems[0].contains("is not executable")
        );
        assert!(
            problems[1].starts_with("[agents.b] `command` ")
                && problems[1].contains("is not a file")
        );
        assert!(
            problems[2].starts_with("[agents.c] `command` ")
                && problems[2].contains("does not exist")
        );
        assert!(
            problems[3].starts_with("[agents.d] `cwd` ")
                && problems[3].contains("is not a directory")
        );
        assert!(
            problems[4].starts_with("[agents.e] `command` `sh` is not found")
                && problems[4].contains("(the section's env PATH)"),
            "{}",
            problems[4]
        );
    }

    #[test]
    fn ca_files_must_be_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pem = dir.path().join("ca.pem");
        std::fs::write(&pem, "-----BEGIN CERTIFICATE-----\n").expect("write");
        let d = dir.path().display();
        let workflow = spec(&format!(
            "[agents.a]\nhttp = \"https://h/a\"\nca_file = \"{d}/ca.pem\"\n\
             [agents.b]\nhttp = \"https://h/b\"\nca_file = \"{d}/missing.pem\"\n\
             [effects.e]\nhttp = \"https://h/e\"\nca_file = \"{d}\"\n\
             [tools.t]\nhttp = \"https://h/t\"\nca_file = \"{d}/missing.pem\"\n"
        ));
        let problems: Vec<String> = check_executables(&workflow)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(
            problems[0].starts_with("[agents.b] `ca_file` ")
                && problems[0].contains("missing.pem does not exist"),
            "{}",
            problems[0]
        );
        assert!(
            problems[1].starts_with("[effects.e] `ca_file` ")
                && problems[1].contains("is not a file"),
            "{}",
            problems[1]
        );
        assert!(
            problems[2].starts_with("[tools.t] `ca_file` "),
            "{}",
            problems[2]
        );
    }

    #[test]
    fn tool_programs_and_mcp_servers_must_resolve() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().display();
        let workflow = spec(&format!(
            "[tools.search]
command = \"{d}/missing-search\"
             [tools.files]
mcp = \"no-such-mcp-server-anywhere\"
             [tools.shell]
command = \"sh\"
"
        ));
        let problems: Vec<String> = check_executables(&workflow)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert!(
            problems[0]
                .starts_with("[tools.files] `mcp` `no-such-mcp-server-anywhere` is not found"),
            "{}",
            problems[0]
        );
        assert!(
            problems[1].starts_with("[tools.search] `command` ")
                && problems[1].contains("does not exist"),
            "{}",
            problems[1]
        );
    }

    #[test]
    fn several_problems_read_one_per_line() {
        let one = WorkflowProblem {
            section: "[agents.a]".into(),
            message: "is missing".into(),
        };
        assert_eq!(
            problems_text(std::slice::from_ref(&one)),
            "[agents.a] is missing"
        );
        assert_eq!(
            problems_text(&[one.clone(), one]),
            "2 problems:\n  [agents.a] is missing\n  [agents.a] is missing"
        );
    }
}
