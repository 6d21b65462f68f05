//! Sessions (docs/agent-protocol.md#sessions): the user's next message to a finished run
//! starts the session's next turn, a run of its own whose `run.requested` carries the
//! session state of the turns before, so every run replays from its own log.

use serde_json::Value;

use docket_decider::{RunId, RunStatus, Session};
use docket_store::EventStore;

use super::{Recorded, Runtime, RuntimeError, TurnRefusal};
use crate::workflow::Workflow;

/// The run id of a session's turn `turn` (from 2): derived from the session's id, so two
/// messages sent at once to the same turn race for one id and the log lets one win.
#[must_use]
pub fn turn_run_id(session: &RunId, turn: u32) -> String {
    format!("{session}.{turn}")
}

/// A turn's input: the previous turn's input with `message` set to the user's message
/// (other fields kept, so the workflow's input type still holds), or `{"message": TEXT}`
/// when that input is not an object.
#[must_use]
pub fn message_input(previous: &Value, message: &str) -> Value {
    let mut input = match previous {
        Value::Object(fields) => fields.clone(),
        _ => serde_json::Map::new(),
    };
    input.insert("message".to_owned(), Value::String(message.to_owned()));
    Value::Object(input)
}

impl<S: EventStore + 'static> Runtime<S> {
    /// Records the next turn of `run`'s session, started by `message` from `by`, without
    /// driving it ([`Recorded::drive`] goes on): a new run, named by [`turn_run_id`],
    /// whose `run.requested` carries the session's earlier turns. `run` must be the
    /// session's latest turn and finished (completed, failed or cancelled).
    ///
    /// # Errors
    /// [`RuntimeError::UnknownRun`]; [`RuntimeError::TurnRefused`] for a run that is not
    /// finished, or not the latest turn (naming it), or when another message started the
    /// next turn first; [`RuntimeError::MessageRefused`] for an empty message or
    /// sender; the errors of [`Runtime::record_start`]. Nothing is recorded then.
    pub async fn record_turn(
        &self,
        run: &RunId,
        message: &str,
        by: &str,
    ) -> Result<Recorded<S>, RuntimeError> {
        if by.trim().is_empty() {
            return Err(RuntimeError::MessageRefused(
                "a message must name who sends it".to_owned(),
            ));
        }
        if message.trim().is_empty() {
            return Err(RuntimeError::MessageRefused(
                "the message is empty".to_owned(),
            ));
        }
        let state = self.state(run).await?;
        let request = state
            .request()
            .ok_or_else(|| RuntimeError::NoRequest(run.clone()))?;
        let status = state.status();
        if !matches!(
            status,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        ) {
            return Err(RuntimeError::TurnRefused {
                run: run.clone(),
                why: TurnRefusal::NotFinished(status),
            });
        }
        if request.workflow.evidence.redactable {
            return Err(RuntimeError::TurnRefused {
                run: run.clone(),
                why: TurnRefusal::Redactable,
            });
        }
        let (session_id, turn, mut turns) = match request.session.as_deref() {
            Some(s) => (s.id.clone(), s.turn, s.turns.clone()),
            None => (run.clone(), 1, Vec::new()),
        };
        let next = turn + 1;
        let next_id = RunId::from(turn_run_id(&session_id, next));
        if self.exists(&next_id).await? {
            let latest = self.latest_turn(&session_id, next).await?;
            return Err(RuntimeError::TurnRefused {
                run: run.clone(),
                why: TurnRefusal::NotLatestTurn {
                    turn,
                    session: session_id,
                    latest,
                },
            });
        }
        turns.extend(state.as_session_turn());
        let session = Session {
            id: session_id.clone(),
            turn: next,
            previous_run: run.clone(),
            by: by.to_owned(),
            turns,
        };
        let workflow = Workflow {
            spec: request.workflow.clone(),
            bundle_source: request.bundle_source.clone(),
            bundle_source_name: request.bundle_source_name.clone(),
        };
        let problems = crate::workflow::check_executables(&workflow.spec);
        if !problems.is_empty() {
            return Err(RuntimeError::WorkflowRefused {
                what: format!("workflow {} (as run {run} recorded it)", workflow.spec.name),
                problems,
            });
        }
        let input = message_input(&request.input, message);
        match self
            .record_start_as(
                &workflow,
                input,
                Some(next_id.clone()),
                (None, Some(Box::new(session))),
            )
            .await
        {
            Err(RuntimeError::RunExists(_) | RuntimeError::Conflict { .. }) => {
                Err(RuntimeError::TurnRefused {
                    run: run.clone(),
                    why: TurnRefusal::TurnTaken {
                        turn: next,
                        run: next_id,
                    },
                })
            }
            other => other,
        }
    }

    /// Whether a run of this id is in the log.
    async fn exists(&self, run: &RunId) -> Result<bool, RuntimeError> {
        let stream = Self::stream(run)?;
        Ok(self
            .inner
            .store
            .head(&stream)
            .await
            .map_err(RuntimeError::Store)?
            .is_some())
    }

    /// The session's latest turn, from turn `from` (which exists) on.
    async fn latest_turn(&self, session: &RunId, from: u32) -> Result<RunId, RuntimeError> {
        let mut latest = RunId::from(turn_run_id(session, from));
        let mut turn = from;
        loop {
            turn = turn.saturating_add(1);
            let next = RunId::from(turn_run_id(session, turn));
            if !self.exists(&next).await? {
                return Ok(latest);
            }
            latest = next;
        }
    }
}
