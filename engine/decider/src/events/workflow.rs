//! Workflows as data: which policy bundle governs a run, which agent receives the input,
//! and how each agent and effect is reached, parsed from a workflow file's text.
//! Documented for users in `docs/workflow.md`; reading the files is the runtime's.
//!
//! A [`WorkflowSpec`] is recorded in the run's first event, so resuming, approving and
//! auditing a run need no file besides the log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use docket_protocol::AgentId;
use serde::{Deserialize, Serialize};

/// A workflow as recorded in `run.requested`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowSpec {
    /// A name for people (`geo`).
    pub name: String,
    /// The policy bundle file, relative to the workflow file.
    pub policy: String,
    /// The agent that receives the run's input, from `external`.
    pub entry: AgentId,
    /// The output type of the run's input (e.g. `analysis_request`); when absent, the
    /// output type declared on the `external → entry` edge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_type: Option<String>,
    /// A JSON file used as the run's input when none is given, relative to the workflow
    /// file (made absolute when loaded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// How each agent is reached, by agent id.
    #[serde(default)]
    pub agents: BTreeMap<AgentId, AgentSpec>,
    /// The root episode's goal (docs/workflow.md#goal-and-budget-episodes); when absent, a
    /// summary of the run's input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    /// The root episode's budget (docs/governance.md#budgets); left out of the record when
    /// it is the default, so runs recorded before budgets existed read back unchanged.
    #[serde(default, skip_serializing_if = "WorkflowBudget::is_default")]
    pub budget: WorkflowBudget,
    // Side effects
    /// How each side-effect kind is carried out, by kind (`[effects.publish]`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub effects: BTreeMap<String, EffectSpec>,
    // Governed tools
    /// How each governed tool is run, by name (`[tools.search]`; docs/workflow.md#tools).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, crate::protocol::ToolSpec>,
    // Evidence
    /// `[evidence]`: how the run's values are recorded for auditors
    /// (docs/workflow.md#evidence-redactable-values); left out of the record when it is
    /// the default, so runs recorded before it read back unchanged.
    #[serde(default, skip_serializing_if = "WorkflowEvidence::is_default")]
    pub evidence: WorkflowEvidence,
}

/// `[evidence]`: what a run records so that its values can later be withheld or erased.
/// It changes how the log stores payloads, never what the decider decides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowEvidence {
    /// Record what agents hand over, deliver and answer as salted commitments, the values
    /// kept beside the log (payload encoding 3, docs/events.md#values-committed-apart), so
    /// that `docket export --redact` can withhold them and `docket shred` erase them while
    /// the log keeps verifying. Default false: values stored once by hash (encoding 2),
    /// which costs less per run (bench/RESULTS.md) but can be neither withheld nor erased.
    #[serde(default)]
    pub redactable: bool,
}

impl WorkflowEvidence {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// `[budget]`: what the run's root episode may consume. Child episodes get their budgets
/// from their spawn requests, at most the bundle's `child_max_share_percent` (50%) of
/// their parent's remaining budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowBudget {
    /// Model tokens (input + output, as agents report them in `usage`). Default 1,000,000.
    #[serde(default = "default_budget_tokens")]
    pub tokens: u64,
    /// Tool invocations (`usage.tool_calls`). Default 1,000.
    #[serde(default = "default_budget_tool_calls")]
    pub tool_calls: u64,
    /// Recorded wall time since the episode started, not counting time the run waits for
    /// a human. Default 3,600,000 (one hour).
    #[serde(default = "default_budget_wall_time_ms")]
    pub wall_time_ms: u64,
}

/// Default `[budget] tokens`.
pub const DEFAULT_BUDGET_TOKENS: u64 = 1_000_000;
/// Default `[budget] tool_calls`.
pub const DEFAULT_BUDGET_TOOL_CALLS: u64 = 1_000;
/// Default `[budget] wall_time_ms`.
pub const DEFAULT_BUDGET_WALL_TIME_MS: u64 = 3_600_000;

fn default_budget_tokens() -> u64 {
    DEFAULT_BUDGET_TOKENS
}
fn default_budget_tool_calls() -> u64 {
    DEFAULT_BUDGET_TOOL_CALLS
}
fn default_budget_wall_time_ms() -> u64 {
    DEFAULT_BUDGET_WALL_TIME_MS
}

impl Default for WorkflowBudget {
    fn default() -> Self {
        Self {
            tokens: DEFAULT_BUDGET_TOKENS,
            tool_calls: DEFAULT_BUDGET_TOOL_CALLS,
            wall_time_ms: DEFAULT_BUDGET_WALL_TIME_MS,
        }
    }
}

impl WorkflowBudget {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// The default time an effect call may take when `[effects.<kind>]` gives no `timeout_ms`.
pub const DEFAULT_EFFECT_TIMEOUT_MS: u64 = 30_000;

/// One `[effects.<kind>]` section: exactly one of `command` (with optional `args` and
/// `env`), `http` or `in_process = true`. Kept flat (not an untagged enum like agents) so
/// a misspelt key is rejected by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EffectSpec {
    /// A program speaking the effect protocol as JSON lines on stdin/stdout; a bare name
    /// is looked up next to the running executable first, then on `PATH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Extra environment variables.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// An HTTP endpoint (`http://host:port/path`) every call is POSTed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    /// `true`: an executor registered in code with the runtime (embedding only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_process: Option<bool>,
    /// How long one call (dry run, execute, verify) may take; default 30 000 ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Whether the executor implements `dry_run` (default true). When false, an effect
    /// whose policy requires a dry run waits for a human instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_dry_run: Option<bool>,
    /// The working directory of a `command` executor's process, relative to the workflow
    /// file (made absolute when loaded); when absent, docket's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// A PEM file of CA certificates trusted, besides the system's roots, for an
    /// `https://` `http` endpoint; relative to the workflow file (made absolute when
    /// loaded). Left out of the record when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// The environment variable whose value an `http` endpoint is sent as a bearer token
    /// (`Authorization: Bearer VALUE`), read when each request is made: the name is
    /// recorded, the value never. Left out of the record when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_env: Option<String>,
    /// Headers sent to an `http` endpoint, by header name, each naming the environment
    /// variable its value is read from when each request is made (the names are recorded,
    /// the values never). Left out of the record when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers_env: BTreeMap<String, String>,
}

impl EffectSpec {
    /// The call timeout in force.
    #[must_use]
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms.unwrap_or(DEFAULT_EFFECT_TIMEOUT_MS)
    }

    /// What is wrong with the section, if anything.
    fn problem(&self) -> Option<String> {
        let declared = [
            self.command.is_some(),
            self.http.is_some(),
            self.in_process.is_some(),
        ]
        .into_iter()
        .filter(|d| *d)
        .count();
        if declared != 1 {
            return Some(format!(
                "needs exactly one of `command`, `http` or `in_process = true` ({declared} given)"
            ));
        }
        if self.command.as_deref() == Some("") {
            return Some("`command` is empty".to_owned());
        }
        if self.in_process == Some(false) {
            return Some("`in_process` must be true (or give `command` or `http`)".to_owned());
        }
        if self.command.is_none()
            && (!self.args.is_empty() || !self.env.is_empty() || self.cwd.is_some())
        {
            return Some("`args`, `env` and `cwd` go with `command` only".to_owned());
        }
        if self.cwd.as_deref() == Some("") {
            return Some(
                "`cwd` is empty (write \".\" for the workflow file's directory)".to_owned(),
            );
        }
        if let Some(problem) = http_problem(
            self.http.as_deref(),
            self.ca_file.as_deref(),
            self.bearer_env.as_deref(),
            &self.headers_env,
        ) {
            return Some(problem);
        }
        if self.timeout_ms == Some(0) {
            return Some("`timeout_ms` must be positive".to_owned());
        }
        None
    }
}

/// What is wrong with the HTTP settings of an agent, tool or effect section, if
/// anything: `url` is its `http` (none for a section reached another way, which may then
/// have no HTTP setting either). Checked here so that a workflow is refused when it is
/// read rather than when the executor is first needed.
pub(crate) fn http_problem(
    url: Option<&str>,
    ca_file: Option<&str>,
    bearer_env: Option<&str>,
    headers_env: &BTreeMap<String, String>,
) -> Option<String> {
    let Some(url) = url else {
        if ca_file.is_some() || bearer_env.is_some() || !headers_env.is_empty() {
            return Some(
                "`ca_file`, `bearer_env` and `headers_env` go with `http` only".to_owned(),
            );
        }
        return None;
    };
    let (tls, host) = match http_url_host(url) {
        Ok(found) => found,
        Err(problem) => return Some(format!("`http`: {problem}")),
    };
    if ca_file.is_some() && !tls {
        return Some(format!(
            "`ca_file` goes with an https:// URL (`http` is {url:?})"
        ));
    }
    if ca_file == Some("") {
        return Some("`ca_file` is empty".to_owned());
    }
    for variable in bearer_env
        .into_iter()
        .chain(headers_env.values().map(String::as_str))
    {
        if variable.is_empty() || variable.contains(['=', '\0']) {
            return Some(format!(
                "{variable:?} cannot be the name of an environment variable"
            ));
        }
    }
    for name in headers_env.keys() {
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if name.is_empty() || !name.chars().all(token) {
            return Some(format!(
                "`headers_env` names {name:?}, which is not an HTTP header name"
            ));
        }
        let lower = name.to_ascii_lowercase();
        if matches!(
            lower.as_str(),
            "host" | "content-type" | "content-length" | "transfer-encoding" | "connection"
        ) {
            return Some(format!(
                "`headers_env` names {name:?}, which docket sets itself"
            ));
        }
        if lower == "authorization" && bearer_env.is_some() {
            return Some(
                "`headers_env` names Authorization, which `bearer_env` sets: give one of them"
                    .to_owned(),
            );
        }
    }
    if !tls && (bearer_env.is_some() || !headers_env.is_empty()) && !is_loopback_host(host) {
        return Some(format!(
            "`http` {url:?} is plain http:// to another host: credentials (`bearer_env`, \
             `headers_env`) are sent over https:// only, or to this machine (localhost, \
             127.0.0.1, [::1])"
        ));
    }
    None
}

/// Whether the URL is `https://`, and its host; or what is wrong with it. Only
/// `http://` and `https://` URLs with a host are supported, without credentials in them
/// (the workflow is recorded: credentials go in `bearer_env` or `headers_env`).
fn http_url_host(url: &str) -> Result<(bool, &str), String> {
    let (tls, rest) = if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else {
        return Err(format!(
            "unsupported scheme in URL {url:?}: only http:// and https:// are supported"
        ));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(format!(
            "the URL {url:?} holds credentials: the workflow is recorded in the run's log, \
             so give them through `bearer_env` or `headers_env` instead"
        ));
    }
    // `[::1]:8080`: the port follows the bracket.
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((address, after)) => (&authority[..address.len() + 2], after.strip_prefix(':')),
            None => return Err(format!("invalid URL {url:?}: it names no host")),
        },
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if host.is_empty() || url.chars().any(char::is_whitespace) {
        return Err(format!("invalid URL {url:?}: it names no host"));
    }
    if let Some(port) = port
        && port.parse::<u16>().is_err()
    {
        return Err(format!(
            "invalid URL {url:?}: port {port:?} is not a number up to 65535"
        ));
    }
    Ok((tls, host))
}

/// Whether `host` (as a URL writes it) is this machine: `localhost`, or an address of
/// the loopback range (127.0.0.0/8, `[::1]`). Credentials are sent over plain `http://`
/// to such a host only.
#[must_use]
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// One agent of a workflow. (serde cannot deny unknown fields next to a flattened enum:
/// `WorkflowSpec::parse` checks the section's keys on the TOML text before this is read.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentSpec {
    /// How requests reach the agent.
    #[serde(flatten)]
    pub executor: ExecutorSpec,
    /// Per-request timeout; defaults to the bundle's `defaults.timeout_ms` (30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Risk classifiers (other agents of this workflow) every response of this agent is
    /// passed through, in order, before its actions are accepted
    /// (docs/governance.md#output-validation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classifiers: Vec<String>,
    /// The working directory of a `command` agent's process, relative to the workflow
    /// file (made absolute when the file is loaded, and recorded so); when absent, the
    /// process inherits docket's. Left out of the record when absent, so runs recorded
    /// before it existed read back unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The largest response accepted from a `command` or `http` agent, in bytes (a
    /// response line, or an HTTP body); default 1 MiB. Left out of the record when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_response_bytes: Option<u64>,
    /// How many processes of a `command` agent may serve calls at once, each one call at
    /// a time (docs/workflow.md#agents); when absent, as many as the machine has cores.
    /// How calls are carried, not what is decided; left out of the record when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u32>,
    /// How many requests one process of a `command` agent takes at once, answering each
    /// by its `request_id` in any order (docs/agent-protocol.md#several-requests-at-once);
    /// default 1. Left out of the record when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_process: Option<u32>,
    /// A PEM file of CA certificates trusted, besides the system's roots, for an
    /// `https://` `http` endpoint; relative to the workflow file (made absolute when
    /// loaded). Left out of the record when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// The environment variable whose value an `http` endpoint is sent as a bearer token
    /// (`Authorization: Bearer VALUE`), read when each request is made: the name is
    /// recorded, the value never. Left out of the record when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_env: Option<String>,
    /// Headers sent to an `http` endpoint, by header name, each naming the environment
    /// variable its value is read from when each request is made (the names are recorded,
    /// the values never). Left out of the record when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers_env: BTreeMap<String, String>,
}

/// The most processes one agent may have (`[agents.NAME] processes`), and the most
/// requests one of them may take at once (`requests_per_process`).
pub const MAX_AGENT_PROCESSES: u32 = 1024;

impl AgentSpec {
    /// What is wrong with the settings that depend on how the agent is reached, if
    /// anything.
    fn problem(&self) -> Option<String> {
        let command = matches!(self.executor, ExecutorSpec::Command { .. });
        if let Some(cwd) = &self.cwd {
            if !command {
                return Some("`cwd` goes with `command` only".to_owned());
            }
            if cwd.is_empty() {
                return Some(
                    "`cwd` is empty (write \".\" for the workflow file's directory)".to_owned(),
                );
            }
        }
        if let Some(limit) = self.max_response_bytes {
            if matches!(self.executor, ExecutorSpec::InProcess { .. }) {
                return Some(
                    "`max_response_bytes` goes with `command` or `http` only (an in-process \
                     agent's response is not read as bytes)"
                        .to_owned(),
                );
            }
            if limit == 0 {
                return Some("`max_response_bytes` must be positive".to_owned());
            }
            if usize::try_from(limit).is_err() {
                return Some(format!(
                    "`max_response_bytes` = {limit} is more than this machine can address"
                ));
            }
        }
        if let Some(processes) = self.processes {
            if !command {
                return Some(
                    "`processes` goes with `command` only (an `http` agent takes calls as \
                     its server does; an in-process one, as many as come)"
                        .to_owned(),
                );
            }
            if processes == 0 || processes > MAX_AGENT_PROCESSES {
                return Some(format!(
                    "`processes` = {processes}: from 1 to {MAX_AGENT_PROCESSES}"
                ));
            }
        }
        if let Some(requests) = self.requests_per_process {
            if !command {
                return Some("`requests_per_process` goes with `command` only".to_owned());
            }
            if requests == 0 || requests > MAX_AGENT_PROCESSES {
                return Some(format!(
                    "`requests_per_process` = {requests}: from 1 to {MAX_AGENT_PROCESSES}"
                ));
            }
        }
        let url = match &self.executor {
            ExecutorSpec::Http { http } => Some(http.as_str()),
            _ => None,
        };
        http_problem(
            url,
            self.ca_file.as_deref(),
            self.bearer_env.as_deref(),
            &self.headers_env,
        )
    }
}

/// How an agent is reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ExecutorSpec {
    /// A child process speaking JSON lines on stdin/stdout. A program without a `/` is
    /// looked up next to the running executable first, then on `PATH`.
    Command {
        /// Program to start.
        command: String,
        /// Its arguments.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
        /// Extra environment variables.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
    },
    /// An HTTP endpoint answering POSTed requests.
    Http {
        /// `http://host:port/path`.
        http: String,
    },
    /// A Rust agent registered with the runtime under this agent's id (embedding only).
    InProcess {
        /// Must be `true`.
        in_process: bool,
    },
}

/// A workflow file that could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowError {
    /// The TOML is invalid or has unknown or missing fields. Shown with the parser's
    /// location and words only: the file may not be a workflow at all, and its text is
    /// not repeated (docs/api.md#files-the-api-reads).
    #[error("invalid workflow file {path}:{line}:{column}: {what}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line the parser stopped at.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// The parser's words.
        what: String,
        /// The parser's whole text, with the excerpt of the file it draws: for a program
        /// that shows a person their own file (the `docket` command's words).
        message: String,
    },
    /// A key the workflow format does not have (a misspelling, usually): named with the
    /// line and column it is at and the section it is in.
    #[error(
        "invalid workflow file {path}:{line}:{column}: unknown key `{key}` in {section} (known keys: {known})"
    )]
    UnknownKey {
        /// The file.
        path: PathBuf,
        /// 1-based line of the key.
        line: usize,
        /// 1-based column of the key, in characters.
        column: usize,
        /// The key as written.
        key: String,
        /// Where: `the top level`, `[agents.scorer]`, `[budget]`, `[effects.publish]`.
        section: String,
        /// The keys that section accepts.
        known: String,
    },
    /// A value of the wrong type in an agent's section (where the deserializer could say
    /// only that no way of reaching the agent matched): named with its line, column,
    /// section and key.
    #[error("invalid workflow file {path}:{line}:{column}: {section}: {message}")]
    WrongType {
        /// The file.
        path: PathBuf,
        /// 1-based line of the value.
        line: usize,
        /// 1-based column of the value, in characters.
        column: usize,
        /// Where: `[agents.scorer]`.
        section: String,
        /// The key as written, `env.NAME` for an environment variable.
        key: String,
        /// What the value is and what it should be.
        message: String,
    },
    /// The file parses but does not make sense.
    #[error("invalid workflow file {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl WorkflowSpec {
    /// How long one call to the executor of effect `kind` may take: its `[effects.<kind>]`
    /// `timeout_ms` when declared, else `default` (the bundle's request default).
    #[must_use]
    pub fn effect_timeout_ms(&self, kind: &str, default: u64) -> u64 {
        self.effects
            .get(kind)
            .and_then(|e| e.timeout_ms)
            .unwrap_or(default)
    }

    /// Parses a workflow file's text; `path` is used in messages.
    ///
    /// # Errors
    /// [`WorkflowError::Parse`] or [`WorkflowError::Invalid`].
    pub fn parse(text: &str, path: &Path) -> Result<Self, WorkflowError> {
        check_keys(text, path)?;
        let spec: WorkflowSpec = toml::from_str(text).map_err(|err| {
            let (line, column) = err
                .span()
                .map_or((1, 1), |s| docket_policies::line_col(text, s.start));
            let what = err.message().trim();
            // In a file that is TOML, the key whose value is wrong is named (keys only:
            // a file that is not TOML is not quoted at all).
            let what = match err.span().and_then(|s| key_at(text, s.start)) {
                Some(key) if toml::de::DeTable::parse(text).is_ok() => format!("{key}: {what}"),
                _ => what.to_owned(),
            };
            WorkflowError::Parse {
                path: path.to_owned(),
                line,
                column,
                what,
                message: err.to_string(),
            }
        })?;
        let invalid = |message: String| WorkflowError::Invalid {
            path: path.to_owned(),
            message,
        };
        if !spec.agents.contains_key(&spec.entry) {
            return Err(invalid(format!(
                "the entry agent `{}` has no [agents.{}] section",
                spec.entry, spec.entry
            )));
        }
        for (id, agent) in &spec.agents {
            match &agent.executor {
                ExecutorSpec::Command { command, .. } if command.is_empty() => {
                    return Err(invalid(format!("agents.{id}.command is empty")));
                }
                ExecutorSpec::InProcess { in_process: false } => {
                    return Err(invalid(format!(
                        "agents.{id}.in_process must be true (or give `command` or `http`)"
                    )));
                }
                _ => {}
            }
            if let Some(missing) = agent
                .classifiers
                .iter()
                .find(|c| !spec.agents.contains_key(c.as_str()))
            {
                return Err(invalid(format!(
                    "agents.{id}.classifiers names `{missing}`, which has no [agents.{missing}] section"
                )));
            }
            if agent.timeout_ms == Some(0) {
                return Err(invalid(format!("agents.{id}.timeout_ms must be positive")));
            }
            if let Some(problem) = agent.problem() {
                return Err(invalid(format!("[agents.{id}] {problem}")));
            }
        }
        let b = spec.budget;
        for (name, value) in [
            ("tokens", b.tokens),
            ("tool_calls", b.tool_calls),
            ("wall_time_ms", b.wall_time_ms),
        ] {
            if value == 0 {
                return Err(invalid(format!("budget.{name} must be positive")));
            }
        }
        for (kind, effect) in &spec.effects {
            if let Some(problem) = effect.problem() {
                return Err(invalid(format!("[effects.{kind}] {problem}")));
            }
        }
        for (name, tool) in &spec.tools {
            if let Some(problem) = tool.problem() {
                return Err(invalid(format!("[tools.{name}] {problem}")));
            }
        }
        Ok(spec)
    }
}

/// The key written before `offset` on its line (`key = value`), with the `[section]` it
/// is in when there is one: `` [evidence] `redactable` ``.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let before = text.get(..offset)?;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let (key, _) = before.get(line_start..)?.split_once('=')?;
    let key = key.trim();
    if key.is_empty() || key.starts_with('[') {
        return None;
    }
    let section = before
        .get(..line_start)?
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['));
    Some(match section {
        Some(section) => format!("{section} `{key}`"),
        None => format!("`{key}`"),
    })
}

/// The keys of each section of a workflow file (`env` tables take any key).
const TOP_KEYS: &[&str] = &[
    "name",
    "policy",
    "entry",
    "input_type",
    "input",
    "goal",
    "budget",
    "agents",
    "effects",
    "tools",
    "evidence",
];
const AGENT_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "http",
    "in_process",
    "timeout_ms",
    "classifiers",
    "cwd",
    "max_response_bytes",
    "processes",
    "requests_per_process",
    "ca_file",
    "bearer_env",
    "headers_env",
];
const TOOL_KEYS: &[&str] = &[
    "command",
    "mcp",
    "args",
    "env",
    "http",
    "in_process",
    "timeout_ms",
    "read_only",
    "ca_file",
    "bearer_env",
    "headers_env",
];
const BUDGET_KEYS: &[&str] = &["tokens", "tool_calls", "wall_time_ms"];
const EVIDENCE_KEYS: &[&str] = &["redactable"];
const EFFECT_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "http",
    "in_process",
    "timeout_ms",
    "supports_dry_run",
    "cwd",
    "ca_file",
    "bearer_env",
    "headers_env",
];

/// Rejects any key a section of the workflow format does not have, naming it with its
/// line, column and section, before the text is deserialized (serde cannot deny unknown
/// fields next to an agent's flattened executor, so without this a misspelt agent key
/// would be ignored). Syntax errors are left to the deserializer's message.
fn check_keys(text: &str, path: &Path) -> Result<(), WorkflowError> {
    use toml::de::{DeTable, DeValue};
    let Ok(doc) = DeTable::parse(text) else {
        return Ok(());
    };
    let unknown = |table: &DeTable<'_>, section: &str, known: &[&str]| {
        table.iter().find_map(|(key, _)| {
            let name: &str = key.get_ref().as_ref();
            (!known.contains(&name)).then(|| {
                let (line, column) = docket_policies::line_col(text, key.span().start);
                WorkflowError::UnknownKey {
                    path: path.to_owned(),
                    line,
                    column,
                    key: name.to_owned(),
                    section: section.to_owned(),
                    known: known.join(", "),
                }
            })
        })
    };
    let top = doc.get_ref();
    if let Some(err) = unknown(top, "the top level", TOP_KEYS) {
        return Err(err);
    }
    let table = |name: &str| {
        top.iter()
            .find(|(k, _)| AsRef::<str>::as_ref(k.get_ref()) == name)
            .and_then(|(_, v)| match v.get_ref() {
                DeValue::Table(t) => Some(t),
                _ => None,
            })
    };
    if let Some(budget) = table("budget")
        && let Some(err) = unknown(budget, "[budget]", BUDGET_KEYS)
    {
        return Err(err);
    }
    if let Some(evidence) = table("evidence")
        && let Some(err) = unknown(evidence, "[evidence]", EVIDENCE_KEYS)
    {
        return Err(err);
    }
    for (group, known) in [
        ("agents", AGENT_KEYS),
        ("effects", EFFECT_KEYS),
        ("tools", TOOL_KEYS),
    ] {
        let Some(sections) = table(group) else {
            continue;
        };
        for (id, section) in sections.iter() {
            if let DeValue::Table(t) = section.get_ref() {
                let name = format!("[{group}.{}]", AsRef::<str>::as_ref(id.get_ref()));
                if let Some(err) = unknown(t, &name, known) {
                    return Err(err);
                }
                if group == "agents" {
                    agent_executor_keys(t, &name, path)?;
                    agent_value_types(t, &name, text, path)?;
                }
            }
        }
    }
    Ok(())
}

/// An `[agents.ID]` section names exactly one way to reach the agent, and `args` / `env`
/// only with `command` (otherwise the other keys would be silently ignored).
fn agent_executor_keys(
    table: &toml::de::DeTable<'_>,
    section: &str,
    path: &Path,
) -> Result<(), WorkflowError> {
    let has = |name: &str| {
        table
            .iter()
            .any(|(k, _)| AsRef::<str>::as_ref(k.get_ref()) == name)
    };
    let declared = ["command", "http", "in_process"]
        .into_iter()
        .filter(|k| has(k))
        .count();
    let message = if declared != 1 {
        format!(
            "{section} needs exactly one of `command`, `http` or `in_process = true` ({declared} given)"
        )
    } else if !has("command") && (has("args") || has("env")) {
        format!("{section}: `args` and `env` go with `command` only")
    } else if !has("command") && has("cwd") {
        format!("{section}: `cwd` goes with `command` only")
    } else if !has("http") && (has("ca_file") || has("bearer_env") || has("headers_env")) {
        format!("{section}: `ca_file`, `bearer_env` and `headers_env` go with `http` only")
    } else {
        return Ok(());
    };
    Err(WorkflowError::Invalid {
        path: path.to_owned(),
        message,
    })
}

/// The values of an `[agents.ID]` section that say how to reach the agent have their
/// types: `command`, `http`, `cwd`, `ca_file` and `bearer_env` strings, `args` a list of
/// strings, `env` and `headers_env` tables of strings, `in_process` a boolean. Checked on
/// the text, where each value's place is known: the deserializer could only say that no
/// way of reaching the agent matched.
fn agent_value_types(
    table: &toml::de::DeTable<'_>,
    section: &str,
    text: &str,
    path: &Path,
) -> Result<(), WorkflowError> {
    use toml::de::DeValue;
    let kind = |v: &DeValue<'_>| match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "a number",
        DeValue::Float(_) => "a number",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date",
        DeValue::Array(_) => "a list",
        DeValue::Table(_) => "a table",
    };
    let wrong = |key: String, at: usize, message: String| {
        let (line, column) = docket_policies::line_col(text, at);
        Err(WorkflowError::WrongType {
            path: path.to_owned(),
            line,
            column,
            section: section.to_owned(),
            key,
            message,
        })
    };
    for (k, v) in table.iter() {
        let key: &str = k.get_ref().as_ref();
        let at = v.span().start;
        match (key, v.get_ref()) {
            ("command" | "http" | "cwd" | "ca_file" | "bearer_env", DeValue::String(_))
            | ("in_process", DeValue::Boolean(_)) => {}
            ("command" | "http" | "cwd" | "ca_file" | "bearer_env", other) => {
                return wrong(
                    key.to_owned(),
                    at,
                    format!("`{key}` must be a string, not {}", kind(other)),
                );
            }
            ("in_process", other) => {
                return wrong(
                    key.to_owned(),
                    at,
                    format!("`in_process` must be `true`, not {}", kind(other)),
                );
            }
            ("args", DeValue::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    if !matches!(item.get_ref(), DeValue::String(_)) {
                        return wrong(
                            format!("args[{i}]"),
                            item.span().start,
                            format!(
                                "`args` must be a list of strings: its item {} is {}",
                                i + 1,
                                kind(item.get_ref())
                            ),
                        );
                    }
                }
            }
            ("env", DeValue::Table(vars)) => {
                for (name, value) in vars.iter() {
                    let name: &str = name.get_ref().as_ref();
                    if !matches!(value.get_ref(), DeValue::String(_)) {
                        let raw = text
                            .get(value.span())
                            .filter(|r| r.len() <= 40 && !r.contains(['\n', '"']))
                            .unwrap_or("…");
                        return wrong(
                            format!("env.{name}"),
                            value.span().start,
                            format!(
                                "`env.{name}` is {}, but environment variable values must be \
                                 strings: write {name} = \"{raw}\"",
                                kind(value.get_ref())
                            ),
                        );
                    }
                }
            }
            ("headers_env", DeValue::Table(headers)) => {
                for (name, value) in headers.iter() {
                    let name: &str = name.get_ref().as_ref();
                    if !matches!(value.get_ref(), DeValue::String(_)) {
                        return wrong(
                            format!("headers_env.{name}"),
                            value.span().start,
                            format!(
                                "`headers_env.{name}` is {}, but it names an environment \
                                 variable: write {name} = \"VARIABLE\"",
                                kind(value.get_ref())
                            ),
                        );
                    }
                }
            }
            ("args" | "env" | "headers_env", other) => {
                let want = if key == "args" {
                    "a list of strings"
                } else {
                    "a table of strings"
                };
                return wrong(
                    key.to_owned(),
                    at,
                    format!("`{key}` must be {want}, not {}", kind(other)),
                );
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_executor_kind() {
        let text = r#"
            name = "t"
            policy = "policy.toml"
            entry = "a"
            [agents.a]
            command = "agent-a"
            args = ["--fast"]
            env = { K = "v" }
            timeout_ms = 500
            [agents.b]
            http = "http://127.0.0.1:9/b"
            [agents.c]
            in_process = true
        "#;
        let spec = WorkflowSpec::parse(text, Path::new("w.toml")).expect("valid");
        assert_eq!(spec.agents["a"].timeout_ms, Some(500));
        assert!(matches!(
            &spec.agents["a"].executor,
            ExecutorSpec::Command { command, args, env } if command == "agent-a" && args == &["--fast"] && env["K"] == "v"
        ));
        assert!(matches!(
            &spec.agents["b"].executor,
            ExecutorSpec::Http { .. }
        ));
        assert!(matches!(
            &spec.agents["c"].executor,
            ExecutorSpec::InProcess { in_process: true }
        ));
    }

    const AGENT: &str =
        "name = \"t\"\npolicy = \"p.toml\"\nentry = \"a\"\n[agents.a]\ncommand = \"x\"\n";

    #[test]
    fn effect_sections_parse_with_defaults() {
        let text = format!(
            "{AGENT}[effects.publish]\ncommand = \"ledger\"\nargs = [\"--x\"]\nenv = {{ A = \"1\" }}\n\
             [effects.dm]\nhttp = \"http://127.0.0.1:9/e\"\ntimeout_ms = 500\nsupports_dry_run = false\n\
             [effects.pay]\nin_process = true\n"
        );
        let spec = WorkflowSpec::parse(&text, Path::new("w.toml")).expect("valid");
        let publish = &spec.effects["publish"];
        assert_eq!(publish.command.as_deref(), Some("ledger"));
        assert_eq!(publish.args, ["--x"]);
        assert_eq!(publish.timeout_ms(), DEFAULT_EFFECT_TIMEOUT_MS);
        assert_eq!(spec.effects["dm"].timeout_ms(), 500);
        assert_eq!(spec.effects["dm"].supports_dry_run, Some(false));
        assert_eq!(spec.effects["pay"].in_process, Some(true));
    }

    #[test]
    fn bad_effect_sections_are_rejected_naming_file_section_and_problem() {
        for (section, expected) in [
            (
                "[effects.publish]\n",
                "exactly one of `command`, `http` or `in_process = true` (0 given)",
            ),
            (
                "[effects.publish]\ncommand = \"x\"\nhttp = \"http://h/\"\n",
                "(2 given)",
            ),
            ("[effects.publish]\ncommand = \"\"\n", "`command` is empty"),
            ("[effects.publish]\nin_process = false\n", "must be true"),
            (
                "[effects.publish]\nhttp = \"ftp://h/\"\n",
                "only http:// and https://",
            ),
            (
                "[effects.publish]\nhttp = \"http://h/\"\nargs = [\"a\"]\n",
                "with `command` only",
            ),
            (
                "[effects.publish]\ncommand = \"x\"\ntimeout_ms = 0\n",
                "must be positive",
            ),
            (
                "[effects.publish]\ncommand = \"x\"\ntimeuot_ms = 5\n",
                "timeuot_ms",
            ),
        ] {
            let err = WorkflowSpec::parse(&format!("{AGENT}{section}"), Path::new("dir/w.toml"))
                .expect_err(section);
            let text = err.to_string();
            assert!(text.contains("dir/w.toml"), "{text}");
            assert!(text.contains(expected), "{section}: {text}");
            assert!(text.contains("[effects.publish]"), "{text}");
            if expected.contains("timeuot") {
                assert!(text.contains("dir/w.toml:8:1:"), "{text}");
            }
        }
    }

    #[test]
    fn entry_without_agent_section_is_rejected() {
        let err = WorkflowSpec::parse(
            "name = \"t\"\npolicy = \"p.toml\"\nentry = \"x\"\n",
            Path::new("w.toml"),
        )
        .expect_err("no agents.x");
        assert!(err.to_string().contains("`x`"), "{err}");
    }

    #[test]
    fn evidence_redactable_is_false_unless_said_and_checked_by_name() {
        let base = "name = \"t\"\npolicy = \"p.toml\"\nentry = \"a\"\n";
        let agents = "[agents.a]\ncommand = \"x\"\n";
        let spec =
            WorkflowSpec::parse(&format!("{base}{agents}"), Path::new("w.toml")).expect("valid");
        assert!(!spec.evidence.redactable);
        // Left out of the record when default: runs recorded before it read back the same.
        let recorded = serde_json::to_value(&spec).expect("json");
        assert!(recorded.get("evidence").is_none(), "{recorded}");
        let spec = WorkflowSpec::parse(
            &format!("{base}[evidence]\nredactable = true\n{agents}"),
            Path::new("w.toml"),
        )
        .expect("valid");
        assert!(spec.evidence.redactable);
        let err = WorkflowSpec::parse(
            &format!("{base}[evidence]\nredactable = \"yes\"\n{agents}"),
            Path::new("w.toml"),
        )
        .expect_err("not a boolean");
        assert!(err.to_string().contains("redactable"), "{err}");
        let err = WorkflowSpec::parse(
            &format!("{base}[evidence]\nredacted = true\n{agents}"),
            Path::new("w.toml"),
        )
        .expect_err("typo");
        let text = err.to_string();
        assert!(
            text.contains("redacted") && text.contains("[evidence]"),
            "{text}"
        );
    }

    #[test]
    fn budget_defaults_and_overrides() {
        let base = "name = \"t\"\npolicy = \"p.toml\"\nentry = \"a\"\n";
        let spec = WorkflowSpec::parse(
            &format!("{base}[agents.a]\ncommand = \"x\"\n"),
            Path::new("w.toml"),
        )
        .expect("valid");
        assert_eq!(spec.budget, WorkflowBudget::default());
        assert_eq!(spec.budget.tokens, 1_000_000);
        let spec = WorkflowSpec::parse(
            &format!("{base}goal = \"g\"\n[budget]\ntokens = 500\n[agents.a]\ncommand = \"x\"\n"),
            Path::new("w.toml"),
        )
        .expect("valid");
        assert_eq!((spec.budget.tokens, spec.budget.tool_calls), (500, 1_000));
        assert_eq!(spec.goal.as_deref(), Some("g"));
        let err = WorkflowSpec::parse(
            &format!("{base}[budget]\ntool_calls = 0\n[agents.a]\ncommand = \"x\"\n"),
            Path::new("w.toml"),
        )
        .expect_err("zero budget");
        assert!(err.to_string().contains("budget.tool_calls"), "{err}");
        let err = WorkflowSpec::parse(
            &format!("{base}[budget]\ntokenz = 1\n[agents.a]\ncommand = \"x\"\n"),
            Path::new("w.toml"),
        )
        .expect_err("typo");
        assert!(err.to_string().contains("tokenz"), "{err}");
    }

    #[test]
    fn unknown_keys_anywhere_are_rejected_with_line_column_and_section() {
        let base = "name = \"t\"\npolicy = \"p.toml\"\nentry = \"a\"\n";
        for (body, line, column, key, section) in [
            (
                "[agents.a]\ncommand = \"x\"\ntimeout_mss = 5\n",
                6,
                1,
                "timeout_mss",
                "[agents.a]",
            ),
            (
                "[agents.a]\ncommand = \"x\"\n  clasifiers = [\"a\"]\n",
                6,
                3,
                "clasifiers",
                "[agents.a]",
            ),
            (
                "[agents.a]\ncommand = \"x\"\n[agents.b]\nhttp = \"http://h/\"\nretries = 2\n",
                8,
                1,
                "retries",
                "[agents.b]",
            ),
            (
                "agents.a = { command = \"x\", argz = [] }\n",
                4,
                29,
                "argz",
                "[agents.a]",
            ),
            (
                "[budget]\ntokenz = 1\n[agents.a]\ncommand = \"x\"\n",
                5,
                1,
                "tokenz",
                "[budget]",
            ),
            (
                "[agents.a]\ncommand = \"x\"\n[effects.e]\ncommand = \"y\"\nretry = true\n",
                8,
                1,
                "retry",
                "[effects.e]",
            ),
            (
                "[agent.a]\ncommand = \"x\"\n",
                4,
                2,
                "agent",
                "the top level",
            ),
        ] {
            let err = WorkflowSpec::parse(&format!("{base}{body}"), Path::new("dir/w.toml"))
                .expect_err(body);
            let text = err.to_string();
            assert!(
                text.starts_with(&format!("invalid workflow file dir/w.toml:{line}:{column}: unknown key `{key}` in {section}")),
                "{body}: {text}"
            );
            assert!(text.contains("known keys: "), "{text}");
        }
        // `env` tables take any key.
        WorkflowSpec::parse(
            &format!("{base}[agents.a]\ncommand = \"x\"\nenv = {{ ANYTHING = \"1\" }}\n"),
            Path::new("w.toml"),
        )
        .expect("env keys are free");
    }

    #[test]
    fn an_agent_names_exactly_one_executor() {
        let base = "name = \"t\"\npolicy = \"p.toml\"\nentry = \"a\"\n[agents.a]\n";
        for (body, expected) in [
            (
                "command = \"x\"\nhttp = \"http://h/\"\n",
                "[agents.a] needs exactly one of `command`, `http` or `in_process = true` (2 given)",
            ),
            ("timeout_ms = 5\n", "(0 given)"),
            (
                "http = \"http://h/\"\nargs = [\"--x\"]\n",
                "[agents.a]: `args` and `env` go with `command` only",
            ),
        ] {
            let err =
                WorkflowSpec::parse(&format!("{base}{body}"), Path::new("w.toml")).expect_err(body);
            assert!(err.to_string().contains(expected), "{body}: {err}");
        }
    }

    #[test]
    fn cwd_and_max_response_bytes_are_agent_settings_checked_by_executor_kind() {
        let base = "name = \"t\"\npolicy = \"p.toml\"\nentry = \"a\"\n[agents.a]\n";
        let spec = WorkflowSpec::parse(
            &format!("{base}command = \"x\"\ncwd = \"agents\"\nmax_response_bytes = 4096\n"),
            Path::new("w.toml"),
        )
        .expect("valid");
        assert_eq!(spec.agents["a"].cwd.as_deref(), Some("agents"));
        assert_eq!(spec.agents["a"].max_response_bytes, Some(4096));
        WorkflowSpec::parse(
            &format!("{base}http = \"http://h:8/a\"\nmax_response_bytes = 10\n"),
            Path::new("w.toml"),
        )
        .expect("an HTTP agent's body limit");
        for (body, expected) in [
            (
                "http = \"http://h/\"\ncwd = \".\"\n",
                "[agents.a]: `cwd` goes with `command` only",
            ),
            (
                "command = \"x\"\ncwd = \"\"\n",
                "[agents.a] `cwd` is empty (write \".\" for the workflow file's directory)",
            ),
            (
                "command = \"x\"\nmax_response_bytes = 0\n",
                "[agents.a] `max_response_bytes` must be positive",
            ),
            (
                "in_process = true\nmax_response_bytes = 5\n",
                "[agents.a] `max_response_bytes` goes with `command` or `http` only",
            ),
            (
                "http = \"ftp://h/a\"\n",
                "[agents.a] `http`: unsupported scheme in URL \"ftp://h/a\": only http:// and https:// are supported",
            ),
            (
                "http = \"http://h:99999/a\"\n",
                "[agents.a] `http`: invalid URL \"http://h:99999/a\": port \"99999\"",
            ),
        ] {
            let err =
                WorkflowSpec::parse(&format!("{base}{body}"), Path::new("w.toml")).expect_err(body);
            assert!(err.to_string().contains(expected), "{body}: {err}");
        }
        let err = WorkflowSpec::parse(
            &format!("{base}command = \"x\"\n[effects.e]\nhttp = \"http://h/\"\ncwd = \"d\"\n"),
            Path::new("w.toml"),
        )
        .expect_err("cwd without command");
        assert!(
            err.to_string()
                .contains("[effects.e] `args`, `env` and `cwd` go with `command` only"),
            "{err}"
        );
    }

    /// docs/workflow.md#http-endpoints: https:// URLs, a CA file with them only, and
    /// credentials by environment variable, never in clear to another host.
    #[test]
    fn http_settings_are_checked_for_agents_tools_and_effects() {
        let base = "name = \"t\"\npolicy = \"p.toml\"\nentry = \"a\"\n";
        let ok = format!(
            "{base}[agents.a]\nhttp = \"https://agents.example/a\"\nca_file = \"ca.pem\"\n\
             bearer_env = \"A_TOKEN\"\n\
             [tools.t]\nhttp = \"http://127.0.0.1:9/t\"\nheaders_env = {{ X-Api-Key = \"T_KEY\" }}\n\
             [effects.e]\nhttp = \"http://[::1]:9/e\"\nbearer_env = \"E_TOKEN\"\n"
        );
        let spec = WorkflowSpec::parse(&ok, Path::new("w.toml")).expect("valid");
        assert_eq!(spec.agents["a"].ca_file.as_deref(), Some("ca.pem"));
        assert_eq!(spec.agents["a"].bearer_env.as_deref(), Some("A_TOKEN"));
        assert_eq!(spec.tools["t"].headers_env["X-Api-Key"], "T_KEY");
        assert_eq!(spec.effects["e"].bearer_env.as_deref(), Some("E_TOKEN"));
        for (section, expected) in [
            (
                "[agents.a]\nhttp = \"http://agents.example/a\"\nbearer_env = \"T\"\n",
                "[agents.a] `http` \"http://agents.example/a\" is plain http:// to another host",
            ),
            (
                "[agents.a]\ncommand = \"x\"\n[tools.t]\nhttp = \"http://10.0.0.1/t\"\n\
                 headers_env = { X-Api-Key = \"K\" }\n",
                "[tools.t] `http` \"http://10.0.0.1/t\" is plain http:// to another host",
            ),
            (
                "[agents.a]\ncommand = \"x\"\n[effects.e]\nhttp = \"http://h/e\"\nca_file = \"c.pem\"\n",
                "[effects.e] `ca_file` goes with an https:// URL",
            ),
            (
                "[agents.a]\ncommand = \"x\"\nbearer_env = \"T\"\n",
                "[agents.a]: `ca_file`, `bearer_env` and `headers_env` go with `http` only",
            ),
            (
                "[agents.a]\nin_process = true\n[effects.e]\ncommand = \"x\"\nbearer_env = \"T\"\n",
                "[effects.e] `ca_file`, `bearer_env` and `headers_env` go with `http` only",
            ),
            (
                "[agents.a]\nhttp = \"https://h/a\"\nheaders_env = { \"X Key\" = \"K\" }\n",
                "`headers_env` names \"X Key\", which is not an HTTP header name",
            ),
            (
                "[agents.a]\nhttp = \"https://h/a\"\nheaders_env = { Host = \"K\" }\n",
                "which docket sets itself",
            ),
            (
                "[agents.a]\nhttp = \"https://h/a\"\nbearer_env = \"T\"\n\
                 headers_env = { Authorization = \"K\" }\n",
                "`bearer_env` sets: give one of them",
            ),
            (
                "[agents.a]\nhttp = \"https://h/a\"\nbearer_env = \"\"\n",
                "\"\" cannot be the name of an environment variable",
            ),
            (
                "[agents.a]\nhttp = \"https://user:pw@h/a\"\n",
                "holds credentials: the workflow is recorded",
            ),
            (
                "[agents.a]\nhttp = \"https://h/a\"\nheaders_env = { X-Key = 3 }\n",
                "`headers_env.X-Key` is a number, but it names an environment variable",
            ),
        ] {
            let err = WorkflowSpec::parse(&format!("{base}{section}"), Path::new("w.toml"))
                .expect_err(section);
            assert!(err.to_string().contains(expected), "{section}: {err}");
        }
    }

    /// Runs recorded before `cwd`, `max_response_bytes` and the HTTP settings existed read
    /// back and encode to the same bytes: the fields are left out when absent.
    #[test]
    fn a_spec_without_the_new_settings_encodes_as_before() {
        let recorded = r#"{"agents":{"a":{"command":"x"},"b":{"http":"http://h/","timeout_ms":5}},"entry":"a","name":"t","policy":"p.toml"}"#;
        let spec: WorkflowSpec = serde_json::from_str(recorded).expect("reads back");
        assert_eq!(spec.agents["a"].cwd, None);
        assert_eq!(spec.agents["a"].max_response_bytes, None);
        assert_eq!(spec.agents["b"].bearer_env, None);
        // Compared as JSON values: the order of object keys in memory depends on whether
        // serde_json keeps insertion order, which a workspace build may switch on.
        let value = serde_json::to_value(&spec).expect("encodes");
        let expected: serde_json::Value = serde_json::from_str(recorded).expect("JSON");
        assert_eq!(value, expected);
    }

    #[test]
    fn unknown_fields_are_rejected_naming_them() {
        let err = WorkflowSpec::parse(
            "name = \"t\"\npolicy = \"p.toml\"\nentry = \"a\"\nentyr = 1\n[agents.a]\ncommand = \"x\"\n",
            Path::new("w.toml"),
        )
        .expect_err("typo");
        assert!(err.to_string().contains("entyr"), "{err}");
    }
}
