//! Agent responses (the JSON-lines protocol, docs/agent-protocol.md): the responses the
//! golden logs recorded, mutated field by field and byte by byte, through what the
//! runtime does with an agent's bytes (`parse_response`, then `validate_for` the request
//! they answer) and `decide` on the run's state just before that response was recorded,
//! with the events it decides folded into the state and each encoded and decoded again.
//!
//! An input is the canned state's number (`golden/v12/geo 3`: the fixture and which of
//! its responses) on its first line, the response's bytes after.

use docket_decider::{AgentCallFailed, AgentResponded};
use std::sync::Arc;

use docket_decider::{
    AgentRequest, Command, RunEvent, RunState, ValidateResponse, decide, parse_response,
    recorded_bundle,
};
use docket_policies::PolicyBundle;
use proptest::prelude::*;

use super::{Document, TextCase, render_text, split_header, text_cases, with_header};
use crate::mutate::Dictionary;
use crate::{Bound, Target};

/// A run as it stood before an agent's response was recorded.
struct Canned {
    label: String,
    state: RunState,
    bundle: Arc<PolicyBundle>,
    request: Arc<AgentRequest>,
    doc: Document,
}

pub struct Responses {
    canned: Vec<Canned>,
    dict: Dictionary,
    /// Inputs accepted as the call's answer, refused as malformed or invalid, and
    /// inputs whose batch `decide` made (the others it rejected).
    accepted: u64,
    refused: u64,
    decided: u64,
}

impl Responses {
    /// Every response of the golden logs (`tests/golden`), with its run's state before it.
    ///
    /// # Errors
    /// A golden log that cannot be read.
    pub fn new() -> Result<Self, crate::SetupError> {
        let mut canned = Vec::new();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        for fixture in super::segments::golden_fixtures() {
            let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
            super::segments::copy_dir(&fixture.dir, tmp.path())?;
            let events = rt.block_on(async {
                let store = docket_store::EmbeddedStore::open_read_only(tmp.path())
                    .await
                    .map_err(|e| format!("{}: {e}", fixture.label))?;
                let runtime = docket_runtime::Runtime::new(store);
                let run =
                    docket_decider::RunId::parse(&fixture.run_id).map_err(|e| e.to_string())?;
                runtime
                    .events(&run)
                    .await
                    .map_err(|e| format!("{}: {e}", fixture.label))
            })?;
            let events: Vec<RunEvent> = events.into_iter().map(|e| e.event).collect();
            let Some(RunEvent::RunRequested(run)) = events.first() else {
                continue;
            };
            let bundle = Arc::new(recorded_bundle(run).map_err(|e| e.to_string())?);
            let mut state = RunState::default();
            let mut n = 0;
            for event in &events {
                if let RunEvent::AgentResponded(AgentResponded {
                    request_id,
                    response,
                    ..
                }) = event
                    && let Some(request) = state
                        .pending_requests()
                        .into_iter()
                        .find(|r| &r.request_id == request_id)
                {
                    let text =
                        serde_json::to_string_pretty(&**response).map_err(|e| e.to_string())?;
                    canned.push(Canned {
                        label: format!("{} {n}", fixture.label),
                        state: state.clone(),
                        bundle: bundle.clone(),
                        request,
                        doc: Document::json("response", text),
                    });
                    n += 1;
                }
                state.apply(event);
            }
        }
        if canned.is_empty() {
            return Err("no agent.responded in tests/golden".into());
        }
        let trees: Vec<&serde_json::Value> =
            canned.iter().filter_map(|c| c.doc.tree.as_ref()).collect();
        let mut dict = Dictionary::of(&trees);
        dict.extend([
            "SUCCESS",
            "ERROR",
            "TIMEOUT",
            "PARTIAL",
            "HIGH",
            "MEDIUM",
            "LOW",
            "finish",
            "handoff",
            "escalate",
            "spawn",
            "request_capability",
            "request_effect",
            "call_tool",
            "write_domain",
        ]);
        Ok(Self {
            canned,
            dict,
            accepted: 0,
            refused: 0,
            decided: 0,
        })
    }
}

/// What the runtime and the decider do with `bytes` answering the canned call: whether
/// the bytes were accepted as its answer, and whether `decide` made a batch of them.
fn answer(c: &Canned, bytes: &[u8]) -> Result<(bool, bool), String> {
    let request_id = c.request.request_id.clone();
    let at_ms = 1_767_225_600_000;
    let command = match parse_response(bytes) {
        Ok(response) => match response.validate_for(&c.request) {
            Ok(()) => Command::RecordResponse(AgentResponded {
                request_id,
                response: response.into(),
                at_ms,
            }),
            Err(err) => Command::RecordFailure(AgentCallFailed {
                request_id,
                code: "AGENT_INVALID_RESPONSE".into(),
                message: err.to_string(),
                at_ms,
            }),
        },
        Err(err) => Command::RecordFailure(AgentCallFailed {
            request_id,
            code: "AGENT_MALFORMED_RESPONSE".into(),
            message: err.to_string(),
            at_ms,
        }),
    };
    let accepted = matches!(command, Command::RecordResponse(_));
    match decide(&c.state, &c.bundle, command) {
        Ok(batch) => {
            let mut state = c.state.clone();
            for event in &batch {
                state.apply(event);
                let bytes = event.encode();
                if let Err(e) = RunEvent::decode(event.kind(), &bytes) {
                    return Err(format!("an event decide made does not decode again: {e}"));
                }
            }
            let _ = state.status();
            Ok((accepted, true))
        }
        Err(rejection) => {
            let _ = rejection.to_string();
            Ok((accepted, false))
        }
    }
}

impl Target for Responses {
    type Case = TextCase;

    fn name(&self) -> &'static str {
        "responses"
    }

    fn strategy(&self) -> BoxedStrategy<TextCase> {
        text_cases(self.canned.len())
    }

    fn render(&self, case: &TextCase) -> Vec<u8> {
        let c = &self.canned[case.seed % self.canned.len()];
        let mut case = case.clone();
        case.json = true;
        let (mut text, _) = render_text(&c.doc, &case, false, &self.dict);
        // The protocol is one document per line.
        if !case.tree.is_empty()
            && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&text)
        {
            text = serde_json::to_vec(&v).unwrap_or(text);
        }
        with_header(&c.label, &text)
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        self.canned
            .iter()
            .map(|c| with_header(&c.label, c.doc.text.as_bytes()))
            .collect()
    }

    fn check(&mut self, input: &[u8]) -> Result<(), String> {
        let (label, body) = split_header(input);
        let Some(c) = self
            .canned
            .iter()
            .find(|c| c.label == label)
            .or(self.canned.first())
        else {
            return Ok(());
        };
        let (accepted, decided) = answer(c, body)?;
        if accepted {
            self.accepted += 1;
        } else {
            self.refused += 1;
        }
        if decided {
            self.decided += 1;
        }
        Ok(())
    }

    fn notes(&self) -> Vec<String> {
        vec![format!(
            "{} inputs accepted as the call's answer, {} refused (recorded as the call's failure); {} decided, the rest rejected by decide",
            self.accepted, self.refused, self.decided
        )]
    }

    fn bound(&self) -> Bound {
        // The state is cloned for the decision and for the fold; its size is the run's,
        // not the input's: the constant holds it.
        Bound {
            per_byte: 512,
            constant: 32 << 20,
        }
    }
}
