//! Reads across runs and files the web UI needs beyond a single run's routes: the open
//! tickets of every run (the approvals inbox) and the workflow files the server can start
//! (the start form). Both are in the route table like every route (docs/api.md).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use docket_runtime::{SourceKind, SourceRoot, Workflow};

use crate::AppState;
use crate::error::ApiError;

type ApiResult = Result<Response, ApiError>;

/// `GET /api/tickets`: every open ticket, per run in run id order, with what it asks
/// (its `subject`, as `GET /api/runs/{run}` shows it).
pub(crate) async fn tickets(State(state): State<Arc<AppState>>) -> ApiResult {
    let mut tickets = Vec::new();
    // Every run with an open ticket: a tool review leaves its run running.
    for run in state.rt.run_summaries().await? {
        if run.open_tickets.is_empty() {
            continue;
        }
        let s = state.rt.state(&run.run_id).await?;
        let started = s.request().map(|r| r.at_ms);
        for (id, t) in s.open_tickets() {
            tickets.push(json!({
                "run_id": run.run_id,
                "workflow": run.workflow,
                "status": s.status(),
                "started_at_ms": started,
                "ticket": id,
                "reason": t.reason,
                "subject": t.subject,
            }));
        }
    }
    Ok(Json(json!({ "tickets": tickets })).into_response())
}

/// How deep under the working directory workflow files are looked for
/// (`examples/claims/workflow.toml` is at depth 3).
const MAX_DEPTH: usize = 3;
/// At most this many `.toml` files are tried: a working directory with a large tree
/// answers quickly, with what was found first.
const MAX_TRIED: usize = 400;
/// An input file larger than this is listed without its content.
const MAX_INPUT_BYTES: u64 = 64 * 1024;

/// `GET /api/workflows`: the workflow files under the server's working directory (up to
/// [`MAX_DEPTH`] levels, skipping hidden folders, `target` and the data directory), each
/// with its name, entry agent, default input, and the JSON files beside it (and in its
/// `input/` folder) that can be given as its input: the examples' scenarios.
pub(crate) async fn workflows(State(state): State<Arc<AppState>>) -> ApiResult {
    let sources = state.sources.clone();
    let data = std::fs::canonicalize(&state.data).unwrap_or_else(|_| state.data.clone());
    let listed = tokio::task::spawn_blocking(move || {
        let root = sources.dir().to_owned();
        let mut files = Vec::new();
        collect_toml(&root, &data, 1, &mut files);
        let workflows: Vec<Value> = files
            .iter()
            .filter_map(|path| describe(&sources, path))
            .collect();
        json!({ "root": root, "workflows": workflows })
    })
    .await
    .map_err(|e| ApiError::internal(format!("listing workflow files: {e}")))?;
    Ok(Json(listed).into_response())
}

fn collect_toml(dir: &Path, data: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    // Name order: the same list on every call.
    entries.sort();
    for path in entries {
        if out.len() >= MAX_TRIED {
            return;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if path.is_dir() {
            let skip = name.starts_with('.')
                || name == "target"
                || std::fs::canonicalize(&path).is_ok_and(|p| p == data);
            if depth < MAX_DEPTH && !skip {
                collect_toml(&path, data, depth + 1, out);
            }
        } else if name.ends_with(".toml") && name != "Cargo.toml" {
            out.push(path);
        }
    }
}

/// The workflow at `path` as the start form shows it, or `None` when the file is not a
/// workflow (a policy bundle, say).
fn describe(sources: &SourceRoot, path: &Path) -> Option<Value> {
    let root = sources.dir();
    let relative = path.strip_prefix(root).unwrap_or(path);
    let wf = Workflow::load_within(relative, sources).ok()?;
    let dir = path.parent()?;
    let mut inputs = Vec::new();
    for folder in [dir.to_owned(), dir.join("input")] {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        for file in files {
            let small = std::fs::metadata(&file).is_ok_and(|m| m.len() <= MAX_INPUT_BYTES);
            let value = small
                .then(|| sources.read(&file, SourceKind::Input).ok())
                .flatten()
                .and_then(|(_, text)| serde_json::from_str::<Value>(&text).ok());
            inputs.push(json!({
                "path": file.strip_prefix(root).unwrap_or(&file),
                "value": value,
            }));
        }
    }
    let default_input = wf.spec.input.as_deref().map(|i| {
        Path::new(i)
            .strip_prefix(root)
            .map_or(i.to_owned(), |p| p.display().to_string())
    });
    Some(json!({
        "path": relative,
        "name": wf.spec.name,
        "entry": wf.spec.entry,
        "input": default_input,
        "inputs": inputs,
    }))
}
