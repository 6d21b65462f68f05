//! `docket policy versions | register | rules | set-rules`: the data directory's registry
//! of bundle versions (the `_bundles` stream) and the handoff rules of its bundles as data
//! (docs/governance.md#bundle-versions, docs/governance.md#handoff-rules-as-data). Listing
//! reads only; `register` and `set-rules` record a new version, with who and why.

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Subcommand;
use docket_policies::{BundleDiff, HandoffRule, MatchedRule};
use docket_replay::Affected;
use docket_runtime::BundleVersion;
use serde_json::Value;

use crate::words::{date_ms, input_kind, word};

macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// The policy subcommands that read or record bundle versions in the data directory.
#[derive(Subcommand)]
pub(crate) enum RegistryCommand {
    /// Bundle versions registered in the data directory: number, hash, who, why.
    ///
    /// Each with the version it replaces. New runs of a workflow whose bundle has versions use the
    /// latest; a run keeps the bundle it recorded.
    Versions {
        /// Only the versions of this bundle (its `bundle.id`).
        #[arg(long, value_name = "NAME")]
        bundle: Option<String>,
        /// Print JSON (a list of versions).
        #[arg(long)]
        json: bool,
    },
    /// Register a bundle file as the next version of the bundle it declares.
    ///
    /// The bundle's name is its `bundle.id`. Refused when it is invalid, refused for new
    /// runs, or the latest version already.
    Register {
        /// The policy bundle (a .toml or .json file).
        #[arg(value_name = "BUNDLE")]
        file: PathBuf,
        /// Who registers it.
        #[arg(long, value_name = "NAME")]
        by: String,
        /// Why.
        #[arg(long, value_name = "TEXT")]
        reason: String,
        /// Print JSON (the version recorded).
        #[arg(long)]
        json: bool,
    },
    /// The handoff rules of a registered bundle's latest version (or one pair's).
    ///
    /// With --from and --to: the rules deciding that pair, highest precedence first, and
    /// the decision they give (as `docket policy explain`).
    Rules {
        /// The bundle (default: the only one registered).
        #[arg(long, value_name = "NAME")]
        bundle: Option<String>,
        /// The sending agent (with --to).
        #[arg(long, value_name = "AGENT", requires = "to")]
        from: Option<String>,
        /// The receiving agent (with --from).
        #[arg(long, value_name = "AGENT", requires = "from")]
        to: Option<String>,
        /// Print JSON (the governance API's answer).
        #[arg(long)]
        json: bool,
    },
    /// Replace a registered bundle's handoff rules: a new version, its diff, the runs affected.
    ///
    /// FILE is a JSON list of rules (or what `docket policy rules --json` prints, edited;
    /// `-` reads stdin). Checked as any
    /// bundle, registered as its next version, and answered with the diff and the
    /// recorded runs the change would have decided otherwise.
    #[command(name = "set-rules")]
    SetRules {
        /// The rules (JSON), or `-` for stdin.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// The bundle (default: the only one registered).
        #[arg(long, value_name = "NAME")]
        bundle: Option<String>,
        /// Who changes them.
        #[arg(long, value_name = "NAME")]
        by: String,
        /// Why.
        #[arg(long, value_name = "TEXT")]
        reason: String,
        /// Print JSON (the governance API's answer).
        #[arg(long)]
        json: bool,
    },
}

fn print_json<T: serde::Serialize>(out: &mut String, v: &T) {
    outln!(
        out,
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_default()
    );
}

/// Runs the command; the exit code.
pub(crate) async fn execute(
    command: RegistryCommand,
    data: &Path,
    out: &mut String,
) -> anyhow::Result<u8> {
    match command {
        RegistryCommand::Versions { bundle, json } => {
            let rt = crate::command::open_read(data).await?;
            let versions: Vec<BundleVersion> = rt
                .bundle_versions()
                .await?
                .into_iter()
                .filter(|v| bundle.as_ref().is_none_or(|b| *b == v.bundle))
                .collect();
            if json {
                print_json(out, &versions);
            } else if versions.is_empty() {
                outln!(
                    out,
                    "no bundle versions registered (`docket policy register BUNDLE --by NAME --reason TEXT`)"
                );
            } else {
                for v in &versions {
                    version_line(out, v);
                }
            }
            Ok(0)
        }
        RegistryCommand::Register {
            file,
            by,
            reason,
            json,
        } => {
            let name = file.display().to_string();
            let source = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read the bundle {name}"))?;
            let rt = crate::command::open(data).await?;
            let v = rt.register_bundle(&source, &name, &by, &reason).await?;
            if json {
                print_json(out, &v);
            } else {
                outln!(out, "registered {name} as:");
                version_line(out, &v);
            }
            Ok(0)
        }
        RegistryCommand::Rules {
            bundle,
            from,
            to,
            json,
        } => {
            let rt = crate::command::open_read(data).await?;
            if let (Some(from), Some(to)) = (from, to) {
                let r = rt.pair_rules(bundle.as_deref(), &from, &to).await?;
                if json {
                    print_json(out, &r);
                    return Ok(0);
                }
                outln!(
                    out,
                    "{} → {} in bundle {} version {} ({})",
                    from,
                    to,
                    r.bundle,
                    r.version,
                    r.hash
                );
                let d = &r.pair.handoff.decision;
                outln!(
                    out,
                    "handoff ({}): {} by {}: {}",
                    input_kind(r.pair.handoff.input),
                    crate::verdict(d.verdict),
                    d.rule_id,
                    d.reason
                );
                outln!(
                    out,
                    "scoping: {} mode by {}",
                    word(&r.pair.handoff_mode),
                    r.pair.governing_rule_id
                );
                if r.pair.rules.is_empty() {
                    outln!(out, "no handoff rule matches the pair");
                }
                for m in &r.pair.rules {
                    matched_line(out, m);
                }
                outln!(out, "chain:");
                for s in &r.pair.scoping.chain {
                    outln!(out, "  - {} [{}] {}", s.rule_id, word(&s.outcome), s.note);
                }
                return Ok(0);
            }
            let r = rt.handoff_rules(bundle.as_deref()).await?;
            if json {
                print_json(out, &r);
                return Ok(0);
            }
            outln!(
                out,
                "bundle {} version {} ({})",
                r.rules.bundle,
                r.version,
                r.rules.hash
            );
            outln!(
                out,
                "default mode {}; blocked on every handoff: [{}]",
                word(&r.rules.default_handoff_mode),
                r.rules.blocked_context_fields.join(", ")
            );
            for rule in &r.rules.rules {
                rule_line(out, "", rule);
            }
            Ok(0)
        }
        RegistryCommand::SetRules {
            file,
            bundle,
            by,
            reason,
            json,
        } => {
            let text = if file.as_os_str() == "-" {
                let mut text = String::new();
                std::io::stdin()
                    .read_to_string(&mut text)
                    .context("cannot read the rules from stdin")?;
                text
            } else {
                std::fs::read_to_string(&file)
                    .with_context(|| format!("cannot read the rules {}", file.display()))?
            };
            let rules: Value = serde_json::from_str(&text).map_err(|e| {
                anyhow::anyhow!(
                    "{} is not JSON: {}",
                    file.display(),
                    crate::errors::json_error(&e)
                )
            })?;
            let rt = crate::command::open(data).await?;
            let r = docket_app::replace_handoff_rules(&rt, bundle.as_deref(), &rules, &by, &reason)
                .await?;
            if json {
                print_json(out, &r);
                return Ok(0);
            }
            outln!(out, "registered:");
            version_line(out, &r.registered);
            diff_lines(out, &r.diff);
            affected_lines(out, &r.affected);
            Ok(0)
        }
    }
}

fn version_line(out: &mut String, v: &BundleVersion) {
    let replaces = v
        .replaces
        .map_or_else(|| "first version".to_owned(), |n| format!("replaces {n}"));
    outln!(
        out,
        "{} version {}  {}  {}  by {}: {} ({replaces})",
        v.bundle,
        v.version,
        v.hash,
        date_ms(v.at_ms),
        v.by,
        v.reason
    );
}

fn rule_line(out: &mut String, prefix: &str, r: &HandoffRule) {
    let mut parts = Vec::new();
    if let Some(m) = r.handoff_mode {
        parts.push(format!("mode {}", word(&m)));
    }
    if let Some(a) = &r.allowed_context_fields {
        parts.push(format!("allows [{}]", a.join(", ")));
    }
    if !r.blocked_context_fields.is_empty() {
        parts.push(format!("blocks [{}]", r.blocked_context_fields.join(", ")));
    }
    if r.conversation_translation.is_some() {
        parts.push("translation".to_owned());
    }
    outln!(
        out,
        "{prefix}{} → {}  {}  {}",
        r.from_agent_id,
        r.to_agent_id,
        r.id,
        parts.join("; ")
    );
}

fn matched_line(out: &mut String, m: &MatchedRule) {
    let decides = if m.decides.is_empty() {
        "decides nothing here (a higher level sets it all)".to_owned()
    } else {
        format!("decides {}", m.decides.join(", "))
    };
    rule_line(out, &format!("rule ({}) ", word(&m.precedence)), &m.rule);
    outln!(out, "  {decides}");
}

fn diff_lines(out: &mut String, d: &BundleDiff) {
    outln!(out, "diff {} → {}", d.old_hash, d.new_hash);
    for p in &d.pairs {
        outln!(
            out,
            "  pair {} → {} ({}): {} by {} → {} by {}",
            p.from,
            p.to,
            input_kind(p.input),
            crate::verdict(p.old.verdict),
            p.old.rule_id,
            crate::verdict(p.new.verdict),
            p.new.rule_id
        );
    }
    for r in &d.rules {
        outln!(out, "  rule {} {} {}", word(&r.change), r.section, r.id);
    }
}

fn affected_lines(out: &mut String, a: &Affected) {
    outln!(
        out,
        "{} recorded runs re-decided under it: {} would change",
        a.runs_compared,
        a.runs.len()
    );
    for r in &a.runs {
        let path = if r.path_changes {
            ", would take another path"
        } else {
            ""
        };
        outln!(
            out,
            "  run {}: {} stricter, {} looser, {} changed{path} (rules: {})",
            r.run_id,
            r.stricter,
            r.looser,
            r.changed,
            r.rules.join(", ")
        );
    }
    for (rule, e) in &a.per_rule {
        outln!(
            out,
            "  rule {rule}: {} decisions in {} runs ({})",
            e.decisions,
            e.runs.len(),
            e.runs.join(", ")
        );
    }
}
