//! Agents written in Rust and run inside the engine's process: no serialisation, no
//! process, but the same checks on what they answer, and a panic becomes an error.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::{AgentCallError, AgentExecutor, CallFuture, check_response, traced};
use crate::transport::{CatchPanic, catch_panic};
use docket_decider::{AgentRequest, AgentResponse};

/// An agent implemented in Rust. Closures `Fn(&AgentRequest) -> AgentResponse` are agents.
pub trait InProcessAgent: Send + Sync {
    /// Handles one request. Runs on the engine's task: it should not block for long, as
    /// the request's timeout cannot interrupt synchronous code (use
    /// [`InProcessExecutor::from_async_fn`] for work that waits).
    fn handle(&self, request: &AgentRequest) -> AgentResponse;
}

impl<F> InProcessAgent for F
where
    F: Fn(&AgentRequest) -> AgentResponse + Send + Sync,
{
    fn handle(&self, request: &AgentRequest) -> AgentResponse {
        self(request)
    }
}

type AsyncHandler =
    dyn Fn(AgentRequest) -> Pin<Box<dyn Future<Output = AgentResponse> + Send>> + Send + Sync;

enum Handler {
    Sync(Arc<dyn InProcessAgent>),
    Async(Arc<AsyncHandler>),
}

/// Runs an [`InProcessAgent`] or an async function as an agent.
pub struct InProcessExecutor {
    handler: Handler,
}

impl InProcessExecutor {
    /// Wraps a synchronous agent (a struct implementing [`InProcessAgent`] or a closure).
    pub fn new(agent: impl InProcessAgent + 'static) -> Self {
        Self {
            handler: Handler::Sync(Arc::new(agent)),
        }
    }

    /// Wraps an async agent; its future is cut off at the request's `timeout_ms`.
    pub fn from_async_fn<F, Fut>(agent: F) -> Self
    where
        F: Fn(AgentRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = AgentResponse> + Send + 'static,
    {
        Self {
            handler: Handler::Async(Arc::new(move |request| Box::pin(agent(request)))),
        }
    }
}

impl AgentExecutor for InProcessExecutor {
    fn call<'a>(&'a self, request: &'a AgentRequest) -> CallFuture<'a> {
        traced("in_process", request, async move {
            let panicked = |message| AgentCallError::Panicked { message };
            let answered = match &self.handler {
                Handler::Sync(agent) => catch_panic(|| agent.handle(request)).map_err(panicked),
                Handler::Async(agent) => {
                    let running = CatchPanic(agent(request.clone()));
                    let limit = Duration::from_millis(request.timeout_ms);
                    match tokio::time::timeout(limit, running).await {
                        Ok(answered) => answered.map_err(panicked),
                        Err(_) => Err(AgentCallError::Timeout {
                            timeout_ms: request.timeout_ms,
                        }),
                    }
                }
            };
            answered.and_then(|response| check_response(request, response))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use docket_decider::{Action, Confidence};
    use serde_json::json;

    fn request() -> AgentRequest {
        AgentRequest::new("r1", "external", "echo", "ECHO").in_run("run", "ep", "c")
    }

    fn echo(request: &AgentRequest) -> AgentResponse {
        AgentResponse::success(
            request.request_id.clone(),
            Confidence::High,
            vec![Action::Finish {
                output: json!({"capability": request.capability_code}),
            }],
        )
    }

    #[tokio::test]
    async fn a_closure_answers() {
        let executor = InProcessExecutor::new(echo);
        let response = executor.call(&request()).await.expect("answers");
        assert_eq!(
            response.actions,
            vec![Action::Finish {
                output: json!({"capability": "ECHO"})
            }]
        );
    }

    #[tokio::test]
    async fn works_behind_an_arc_dyn() {
        let executor: Arc<dyn AgentExecutor> = Arc::new(InProcessExecutor::new(echo));
        assert!(executor.call(&request()).await.is_ok());
    }

    #[tokio::test]
    async fn a_panic_is_an_error() {
        let executor =
            InProcessExecutor::new(|_: &AgentRequest| -> AgentResponse { panic!("agent bug") });
        let err = executor.call(&request()).await.expect_err("panicked");
        assert!(
            matches!(&err, AgentCallError::Panicked { message } if message == "agent bug"),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_panic_in_an_async_agent_is_an_error() {
        let executor = InProcessExecutor::from_async_fn(|request: AgentRequest| async move {
            if request.attempt == 1 {
                panic!("first attempt fails: {}", request.request_id);
            }
            echo(&request)
        });
        let err = executor.call(&request()).await.expect_err("panicked");
        assert!(
            matches!(&err, AgentCallError::Panicked { message } if message == "first attempt fails: r1"),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn an_async_agent_is_cut_off_at_the_timeout() {
        let executor = InProcessExecutor::from_async_fn(|_request: AgentRequest| async move {
            std::future::pending::<AgentResponse>().await
        });
        let err = executor
            .call(&request().with_timeout_ms(20))
            .await
            .expect_err("never answers");
        assert!(
            matches!(err, AgentCallError::Timeout { timeout_ms: 20 }),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn responses_are_checked() {
        let executor = InProcessExecutor::new(|_: &AgentRequest| {
            AgentResponse::success("someone-else", Confidence::High, vec![])
        });
        let err = executor.call(&request()).await.expect_err("wrong id");
        assert!(
            matches!(&err, AgentCallError::RequestIdMismatch { expected, actual }
                if expected == "r1" && actual == "someone-else"),
            "{err:?}"
        );

        let executor = InProcessExecutor::new(|request: &AgentRequest| {
            AgentResponse::success(request.request_id.clone(), Confidence::High, vec![])
        });
        let err = executor.call(&request()).await.expect_err("no actions");
        assert!(
            matches!(&err, AgentCallError::Invalid(v) if v.field == "actions"),
            "{err:?}"
        );
        assert_eq!(err.code(), "AGENT_INVALID_RESPONSE");
    }
}
