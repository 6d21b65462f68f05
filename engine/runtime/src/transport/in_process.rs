//! Rust code run inside the engine's process: no bytes to carry, but a panic in it must
//! come back as an error naming it, not unwind through the engine.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Runs `code`, turning a panic into `Err` with the panic's message.
pub(crate) fn catch_panic<T>(code: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(code)).map_err(|payload| panic_message(payload.as_ref()))
}

/// Polls a future, turning a panic inside it into `Err` with the panic's message.
pub(crate) struct CatchPanic<F>(pub(crate) F);

impl<F: Future + Unpin> Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.get_mut().0;
        match catch_panic(|| Pin::new(inner).poll(cx)) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Err(message) => Poll::Ready(Err(message)),
        }
    }
}

/// A panic's message, when it was a string.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-string payload".to_owned())
}
