//! A workflow checked against its policy bundle and the machine before a run starts
//! (docs/workflow.md#checked-before-anything-runs): every agent the bundle can route work
//! to has an executor section, every section names an agent (or effect kind) the bundle
//! knows, every command resolves and every working directory exists. A run whose
//! workflow has a problem is refused before anything is recorded.

use std::collections::BTreeMap;
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
/// excepted), no section for an agent the bundle does not declare, and no
/// `[effects.KIND]` section for a kind no side-effect policy of the bundle governs.
#[must_use]
pub fn check_against_bundle(spec: &WorkflowSpec, bundle: &PolicyBundle) -> Vec<WorkflowProblem> {
    let mut problems = Vec::new();
    let known: Vec<&str> = bundle.agent_ids().collect();
    for id in spec.agents.keys() {
        if !known.contains(&id.as_str()) {
            problems.push(WorkflowProblem {
                section: format!("[agents.{id}]"),
                message: format!(
                    "names `{id}`, which is not an agent of the policy bundle `{}` \
                     (its agents: {}): fix the name, remove the section, or declare the \
                     agent under [[agents]] in the bundle",
                    bundle.spec().bundle.id,
                    known.join(", ")
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
                    why.join("; ")
                ),
            });
        }
    }
    let kinds: Vec<&str> = bundle
        .spec()
        .side_effects
        .iter()
        .map(|s| s.kind.as_str())
        .collect();
    for kind in spec.effects.keys() {
        if !kinds.contains(&kind.as_str()) {
            problems.push(WorkflowProblem {
                section: format!("[effects.{kind}]"),
                message: format!(
                    "names effect kind `{kind}`, which no [[side_effects]] policy of the \
                     bundle governs (its kinds: {}), so no agent can ask for it: fix the \
                     kind's name or remove the section",
                    if kinds.is_empty() {
                        "none".to_owned()
                    } else {
                        kinds.join(", ")
                    }
                ),
            });
        }
    }
    problems
}

/// Every agent the bundle can route work to, but `external`, with why.
fn routable(bundle: &PolicyBundle) -> BTreeMap<String, Vec<String>> {
    let spec = bundle.spec();
    let mut reasons: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut add = |agent: &str, why: String| {
        if agent == EXTERNAL || agent == "*" {
            return;
        }
        let list = reasons.entry(agent.to_owned()).or_default();
        if !list.contains(&why) {
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
}

/// The commands and working directories, as recorded (relative paths already made
/// absolute against the workflow file's directory): every `command` resolves, as a path
/// that names an executable file or as a bare name found next to the running `docket`
/// or on `PATH` (the section's own `env` `PATH` when it sets one); every `cwd` is a
/// directory. Checked when a run starts and again when it is resumed, approved or denied
/// (the machine may have changed since).
#[must_use]
pub fn check_executables(spec: &WorkflowSpec) -> Vec<WorkflowProblem> {
    let mut problems = Vec::new();
    for (id, agent) in &spec.agents {
        let section = format!("[agents.{id}]");
        if let ExecutorSpec::Command { command, env, .. } = &agent.executor {
            if let Some(message) = command_problem(command, env.get("PATH")) {
                problems.push(WorkflowProblem {
                    section: section.clone(),
                    message,
                });
            }
        }
        if let Some(message) = agent.cwd.as_deref().and_then(cwd_problem) {
            problems.push(WorkflowProblem { section, message });
        }
    }
    for (kind, effect) in &spec.effects {
        let section = format!("[effects.{kind}]");
        if let Some(command) = &effect.command {
            if let Some(message) = command_problem(command, effect.env.get("PATH")) {
                problems.push(WorkflowProblem {
                    section: section.clone(),
                    message,
                });
            }
        }
        if let Some(message) = effect.cwd.as_deref().and_then(cwd_problem) {
            problems.push(WorkflowProblem { section, message });
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
    let beside_docket = crate::drive::resolve_program(command);
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
