//! Effect executors written in Rust and run inside the engine's process: a type
//! implementing [`InProcessEffect`], or a set of closures. A panic becomes an
//! [`EffectCallError::Unavailable`]: the effect may or may not have been applied before
//! the panic, so the runtime asks `verify` rather than recording a failure.

use std::sync::Arc;

use super::{
    DryRunReport, EffectCallError, EffectExecutor, EffectFuture, EffectReceipt, EffectRequest,
    Verification,
};
use crate::transport::catch_panic;

/// An effect implemented in Rust. Runs on the engine's task, so it should not block for
/// long: the request's timeout cannot interrupt synchronous code.
pub trait InProcessEffect: Send + Sync {
    /// Whether [`InProcessEffect::dry_run`] does anything (default: yes).
    fn supports_dry_run(&self) -> bool {
        true
    }

    /// Checks what executing would do, changing nothing.
    ///
    /// # Errors
    /// [`EffectCallError::Failed`] (or any other) when the check cannot be made.
    fn dry_run(&self, request: &EffectRequest) -> Result<DryRunReport, EffectCallError>;

    /// Applies the effect, at most once per idempotency key.
    ///
    /// # Errors
    /// [`EffectCallError::Failed`] when the effect was refused and not applied.
    fn execute(&self, request: &EffectRequest) -> Result<EffectReceipt, EffectCallError>;

    /// Whether the key's effect was applied.
    ///
    /// # Errors
    /// When the executor cannot answer.
    fn verify(&self, request: &EffectRequest) -> Result<Verification, EffectCallError>;
}

type Operation<T> = Box<dyn Fn(&EffectRequest) -> Result<T, EffectCallError> + Send + Sync>;

/// An [`InProcessEffect`] made of closures (see [`InProcessEffectExecutor::from_fns`]).
struct EffectFns {
    dry_run: Option<Operation<DryRunReport>>,
    execute: Operation<EffectReceipt>,
    verify: Operation<Verification>,
}

impl InProcessEffect for EffectFns {
    fn supports_dry_run(&self) -> bool {
        self.dry_run.is_some()
    }

    fn dry_run(&self, request: &EffectRequest) -> Result<DryRunReport, EffectCallError> {
        match &self.dry_run {
            Some(dry_run) => dry_run(request),
            None => Err(EffectCallError::Failed {
                effect_id: request.effect_id.clone(),
                code: "EFFECT_DRY_RUN_UNSUPPORTED".to_owned(),
                message: "this executor has no dry run".to_owned(),
            }),
        }
    }

    fn execute(&self, request: &EffectRequest) -> Result<EffectReceipt, EffectCallError> {
        (self.execute)(request)
    }

    fn verify(&self, request: &EffectRequest) -> Result<Verification, EffectCallError> {
        (self.verify)(request)
    }
}

/// Runs an [`InProcessEffect`] (or closures) as an [`EffectExecutor`].
#[derive(Clone)]
pub struct InProcessEffectExecutor {
    effect: Arc<dyn InProcessEffect>,
}

impl InProcessEffectExecutor {
    /// Wraps a type implementing [`InProcessEffect`].
    pub fn new(effect: impl InProcessEffect + 'static) -> Self {
        Self {
            effect: Arc::new(effect),
        }
    }

    /// An executor from an `execute` and a `verify` closure, without a dry run (add one
    /// with [`InProcessEffectExecutor::with_dry_run`]).
    pub fn from_fns<E, V>(execute: E, verify: V) -> Self
    where
        E: Fn(&EffectRequest) -> Result<EffectReceipt, EffectCallError> + Send + Sync + 'static,
        V: Fn(&EffectRequest) -> Result<Verification, EffectCallError> + Send + Sync + 'static,
    {
        Self::new(EffectFns {
            dry_run: None,
            execute: Box::new(execute),
            verify: Box::new(verify),
        })
    }

    /// Adds a dry run to an executor made by [`InProcessEffectExecutor::from_fns`]
    /// (replacing a wrapped type's own otherwise).
    #[must_use]
    pub fn with_dry_run<D>(self, dry_run: D) -> Self
    where
        D: Fn(&EffectRequest) -> Result<DryRunReport, EffectCallError> + Send + Sync + 'static,
    {
        let inner = self.effect;
        let execute_inner = inner.clone();
        let verify_inner = inner;
        Self::new(EffectFns {
            dry_run: Some(Box::new(dry_run)),
            execute: Box::new(move |r| execute_inner.execute(r)),
            verify: Box::new(move |r| verify_inner.verify(r)),
        })
    }

    fn guarded<T>(
        request: &EffectRequest,
        operation: &str,
        call: impl FnOnce() -> Result<T, EffectCallError>,
    ) -> Result<T, EffectCallError> {
        catch_panic(call).unwrap_or_else(|message| {
            Err(EffectCallError::Unavailable {
                effect_id: request.effect_id.clone(),
                message: format!("the in-process executor panicked during {operation}: {message}"),
            })
        })
    }
}

impl EffectExecutor for InProcessEffectExecutor {
    fn supports_dry_run(&self) -> bool {
        self.effect.supports_dry_run()
    }

    fn dry_run<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, DryRunReport> {
        Box::pin(async move { Self::guarded(request, "dry_run", || self.effect.dry_run(request)) })
    }

    fn execute<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, EffectReceipt> {
        Box::pin(async move { Self::guarded(request, "execute", || self.effect.execute(request)) })
    }

    fn verify<'a>(&'a self, request: &'a EffectRequest) -> EffectFuture<'a, Verification> {
        Box::pin(async move { Self::guarded(request, "verify", || self.effect.verify(request)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    fn request(key: &str) -> EffectRequest {
        EffectRequest {
            run_id: "run".into(),
            episode_id: "ep".into(),
            effect_id: format!("run/{key}").into(),
            kind: "publish".into(),
            lane: "api".into(),
            idempotency_key: key.into(),
            params: json!({}),
            attempt: 1,
            timeout_ms: 1000,
            fence: None,
            target: None,
        }
    }

    #[tokio::test]
    async fn closures_execute_once_per_key_and_verify() {
        let ledger = Arc::new(Mutex::new(BTreeMap::<String, u32>::new()));
        let (writes, reads) = (ledger.clone(), ledger.clone());
        let executor = InProcessEffectExecutor::from_fns(
            move |r| {
                let mut ledger = writes.lock().expect("ledger");
                *ledger.entry(r.idempotency_key.clone()).or_default() += 1;
                Ok(EffectReceipt {
                    result: json!(r.idempotency_key),
                    drift: None,
                })
            },
            move |r| {
                Ok(
                    if reads
                        .lock()
                        .expect("ledger")
                        .contains_key(&r.idempotency_key)
                    {
                        Verification::Applied {
                            result: json!(r.idempotency_key),
                        }
                    } else {
                        Verification::NotApplied
                    },
                )
            },
        );
        assert!(!executor.supports_dry_run());
        assert_eq!(
            executor.verify(&request("a")).await,
            Ok(Verification::NotApplied)
        );
        executor.execute(&request("a")).await.expect("applies");
        assert_eq!(
            executor.verify(&request("a")).await,
            Ok(Verification::Applied { result: json!("a") })
        );
        assert!(matches!(
            executor.dry_run(&request("a")).await,
            Err(EffectCallError::Failed { code, .. }) if code == "EFFECT_DRY_RUN_UNSUPPORTED"
        ));
        let executor = executor.with_dry_run(|_| {
            Ok(DryRunReport {
                ok: true,
                preview: json!("would post"),
                message: None,
            })
        });
        assert!(executor.supports_dry_run());
        assert_eq!(
            executor.dry_run(&request("b")).await.map(|r| r.preview),
            Ok(json!("would post"))
        );
        executor.execute(&request("b")).await.expect("applies");
        assert_eq!(ledger.lock().expect("ledger").len(), 2);
    }

    #[tokio::test]
    async fn a_panic_is_unavailable_so_the_runtime_verifies() {
        let executor = InProcessEffectExecutor::from_fns(
            |_| panic!("platform client bug"),
            |_| Ok(Verification::NotApplied),
        );
        let err = executor.execute(&request("a")).await.expect_err("panicked");
        assert!(
            matches!(&err, EffectCallError::Unavailable { message, .. }
                if message.contains("platform client bug") && message.contains("execute")),
            "{err:?}"
        );
    }
}
