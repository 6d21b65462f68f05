//! Reading a run's events back from the store.

use futures::StreamExt;

use docket_store::{Event, EventStore, Payload, StreamId};

use super::RuntimeError;
use docket_decider::RunEvent;

/// An event as recorded, with its envelope.
#[derive(Debug, Clone)]
pub struct RecordedEvent {
    /// Position in the run's log, from 1.
    pub seq: u64,
    /// Wall time it was appended, ns since the Unix epoch.
    pub recorded_at_ns: i64,
    /// Its hash in the chain (hex).
    pub hash: String,
    /// The policy bundle hash in force (hex), if any.
    pub policy: Option<String>,
    /// The decoded event.
    pub event: RunEvent,
}

pub(super) async fn read_run<S: EventStore>(
    store: &S,
    stream: &StreamId,
    run_id: &str,
) -> Result<Vec<RecordedEvent>, RuntimeError> {
    let Some(head) = store.head(stream).await.map_err(RuntimeError::Store)? else {
        return Err(RuntimeError::UnknownRun(run_id.to_owned()));
    };
    let mut reader = Box::pin(store.read(stream, 1..=head.seq));
    let mut out = Vec::new();
    while let Some(event) = reader.next().await {
        let event = event.map_err(RuntimeError::Store)?;
        let bytes = payload(store, &event).await?;
        let decoded = decode(run_id, &event, &bytes)?;
        out.push(RecordedEvent {
            seq: event.seq,
            recorded_at_ns: event.recorded_at.0,
            hash: event.hash.to_hex(),
            policy: event.policy.map(|h| h.to_hex()),
            event: decoded,
        });
    }
    Ok(out)
}

/// An event's payload bytes, fetched from the blob store when it was stored apart.
pub(super) async fn payload<S: EventStore>(
    store: &S,
    event: &Event,
) -> Result<Vec<u8>, RuntimeError> {
    Ok(match &event.payload {
        Payload::Inline(bytes) => bytes.clone(),
        Payload::Blob(blob) => store
            .get_blob(&blob.hash)
            .await
            .map_err(RuntimeError::Store)?
            .unwrap_or_default(),
    })
}

/// An event of run `run` decoded, or an error naming the run and the event kind.
pub(super) fn decode(run: &str, event: &Event, bytes: &[u8]) -> Result<RunEvent, RuntimeError> {
    RunEvent::decode(&event.kind, bytes).map_err(|source| RuntimeError::Decode {
        run: run.into(),
        source,
    })
}
