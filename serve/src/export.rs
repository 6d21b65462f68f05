//! `GET /api/runs/{run}/export`: the bytes `docket export` writes, JSON lines
//! (docs/export-format.md, values withheld with `redact`) or the HTML report
//! (docs/report.md), signed when the run was sealed at its current size. Both call
//! `docket_evidence::export_run`.

use std::path::Path;

use docket_app::Store;
use docket_decider::RunId;
use docket_evidence::{ExportRequest, LoggedEvent, Redaction, RunExportError, Sealing};
use docket_runtime::{Runtime, RuntimeError};
use docket_store::{EventStore as _, StreamId};

use crate::ApiError;

/// What the export route was asked for.
pub(crate) enum Wanted {
    Jsonl(Vec<Redaction>),
    Html,
}

/// The export of `run`.
pub(crate) async fn export(
    rt: &Runtime<Store>,
    data: &Path,
    run: &RunId,
    wanted: Wanted,
) -> Result<(Vec<u8>, Sealing), ApiError> {
    let fail = |e: RunExportError| {
        let at = format!("run {run}");
        match e {
            // What was asked cannot be withheld: the caller's mistake, not the server's.
            RunExportError::Jsonl(e) => ApiError::refused(e.to_string()).at("query.redact"),
            e => ApiError::internal(format!("cannot export run {run}: {e}")).at(at),
        }
    };
    let store = rt.store();
    let stream = StreamId::new(run.as_str())
        .map_err(|e| ApiError::bad_request(e.to_string()).at(format!("run {run}")))?;
    let Some(head) = store.head(&stream).await.map_err(RuntimeError::Store)? else {
        return Err(RuntimeError::UnknownRun(run.to_string()).into());
    };
    let sealing = docket_evidence::run_seal(store, data, run.as_str(), head.seq)
        .await
        .map_err(fail)?;
    let events: Vec<LoggedEvent>;
    let request = match &wanted {
        Wanted::Jsonl(redact) => ExportRequest::Jsonl { redact },
        Wanted::Html => {
            events = rt
                .events(run)
                .await?
                .into_iter()
                .map(|e| LoggedEvent {
                    seq: e.seq,
                    recorded_at_ns: e.recorded_at_ns,
                    hash: e.hash,
                    event: e.event,
                })
                .collect();
            ExportRequest::Html { events: &events }
        }
    };
    let bytes = docket_evidence::export_run(store, &stream, head.seq, &sealing, request)
        .await
        .map_err(fail)?;
    Ok((bytes, sealing))
}
