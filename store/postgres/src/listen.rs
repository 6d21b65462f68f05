//! Wake-ups: every committed append notifies `docket_events` with its stream's id; one
//! connection per process listens and wakes that stream's tails. A lost notification (the
//! listener reconnecting) only delays a tail until its next poll.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError, Weak};
use std::time::Duration;

use docket_store::StreamId;
use futures::StreamExt;
use tokio::sync::watch;
use tokio_postgres::{AsyncMessage, Client, Connection, NoTls, Socket};

use crate::tls::{Target, Tls};

/// The channel appends notify.
pub(crate) const CHANNEL: &str = "docket_events";
/// The channel a run waiting for a worker is announced on.
pub(crate) const RUNNABLE: &str = "docket_runnable";

/// A wake-up counter per watched stream, and one for runs waiting for a worker.
pub(crate) struct Watchers {
    streams: Mutex<HashMap<StreamId, watch::Sender<u64>>>,
    runnable: watch::Sender<u64>,
}

impl Default for Watchers {
    fn default() -> Watchers {
        Watchers {
            streams: Mutex::default(),
            runnable: watch::channel(0).0,
        }
    }
}

impl Watchers {
    pub(crate) fn runnable(&self) -> watch::Receiver<u64> {
        self.runnable.subscribe()
    }

    pub(crate) fn subscribe(&self, stream: &StreamId) -> watch::Receiver<u64> {
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        streams
            .entry(stream.clone())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    /// Wakes the tails of `stream`, forgetting it once none is left.
    pub(crate) fn wake(&self, stream: &StreamId) {
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(sender) = streams.get(stream) else {
            return;
        };
        if sender.receiver_count() == 0 {
            streams.remove(stream);
            return;
        }
        sender.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// Listens for appends while the store is open, reconnecting after a lost connection.
pub(crate) async fn listen(target: Target, watchers: Weak<Watchers>) {
    let mut backoff = Duration::from_millis(100);
    while watchers.strong_count() > 0 {
        let listened = match &target.tls {
            Tls::Off => once(target.config.connect(NoTls).await, &watchers).await,
            Tls::On(tls) => once(target.config.connect(tls.clone()).await, &watchers).await,
        };
        if listened {
            backoff = Duration::from_millis(100);
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Listens on one connection until it is lost; whether it listened at all.
async fn once<T>(
    connected: Result<(Client, Connection<Socket, T>), tokio_postgres::Error>,
    watchers: &Weak<Watchers>,
) -> bool
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (client, mut connection) = match connected {
        Ok(pair) => pair,
        Err(e) => {
            tracing::debug!(error = %e, "the listening connection could not be made");
            return false;
        }
    };
    let to_wake = watchers.clone();
    let driver = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    let Some(w) = to_wake.upgrade() else { return };
                    if n.channel() == RUNNABLE {
                        w.runnable.send_modify(|c| *c = c.wrapping_add(1));
                    } else if let Ok(stream) = StreamId::new(n.payload()) {
                        w.wake(&stream);
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(error = %e, "the listening connection failed");
                    return;
                }
            }
        }
    });
    let listened = match client
        .batch_execute(&format!("LISTEN {CHANNEL}; LISTEN {RUNNABLE}"))
        .await
    {
        Ok(()) => {
            // Until the connection is lost (the client stays alive meanwhile).
            let _ = driver.await;
            true
        }
        Err(e) => {
            tracing::debug!(error = %e, "LISTEN failed");
            driver.abort();
            false
        }
    };
    drop(client);
    listened
}
