//! Wake-ups: every committed append notifies `docket_events` with its stream's id; one
//! connection per process listens and wakes that stream's tails. A notification is lost
//! only while that connection is down: once it listens again every tail is woken, and a
//! sweep, one statement per process per poll interval however many tails are open, reads
//! the heads of the watched streams and wakes those that moved. No tail queries the
//! database while its stream is idle.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use deadpool_postgres::Pool;
use docket_store::StreamId;
use futures::StreamExt;
use tokio::sync::watch;
use tokio_postgres::{AsyncMessage, Client, Connection, NoTls, Socket};

use crate::tls::{Target, Tls};

/// The channel appends notify.
pub(crate) const CHANNEL: &str = "docket_events";
/// The channel a run waiting for a worker is announced on.
pub(crate) const RUNNABLE: &str = "docket_runnable";

/// A watched stream: its tails' wake-up counter, and its head as the last sweep read it.
struct Watched {
    wakes: watch::Sender<u64>,
    swept: Option<i64>,
}

/// A wake-up counter per watched stream, and one for runs waiting for a worker.
pub(crate) struct Watchers {
    streams: Mutex<HashMap<StreamId, Watched>>,
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
            .or_insert_with(|| Watched {
                wakes: watch::channel(0).0,
                swept: None,
            })
            .wakes
            .subscribe()
    }

    /// Wakes the tails of `stream`, forgetting it once none is left.
    pub(crate) fn wake(&self, stream: &StreamId) {
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(watched) = streams.get(stream) else {
            return;
        };
        if watched.wakes.receiver_count() == 0 {
            streams.remove(stream);
            return;
        }
        watched.wakes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Wakes every tail and every worker waiting for runs: after the listening connection
    /// was down, when notifications may have been lost.
    fn wake_all(&self) {
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        streams.retain(|_, w| w.wakes.receiver_count() > 0);
        for w in streams.values() {
            w.wakes.send_modify(|n| *n = n.wrapping_add(1));
        }
        self.runnable.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The streams that have tails, forgetting the others.
    fn watched(&self) -> Vec<StreamId> {
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        streams.retain(|_, w| w.wakes.receiver_count() > 0);
        streams.keys().cloned().collect()
    }

    /// Takes the heads a sweep read (0 for a stream not created yet) and wakes the tails of
    /// every stream whose head moved since the sweep before, or that no sweep saw yet.
    fn swept(&self, heads: &HashMap<StreamId, i64>) {
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        for (stream, w) in streams.iter_mut() {
            let Some(&head) = heads.get(stream) else {
                continue;
            };
            if w.swept != Some(head) {
                w.swept = Some(head);
                w.wakes.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }
}

/// Reads the heads of the watched streams every `every` while the store is open and
/// wakes the tails of those that moved: the fallback for a lost notification.
pub(crate) async fn sweep(
    pool: Pool,
    database: Arc<str>,
    watchers: Weak<Watchers>,
    every: Duration,
) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(w) = watchers.upgrade() else { return };
        let streams = w.watched();
        if streams.is_empty() {
            continue;
        }
        match heads(&pool, &streams).await {
            Ok(found) => w.swept(&found),
            Err(e) => {
                tracing::debug!(database = %database, error = %e, "the sweep of watched streams' heads failed");
            }
        }
    }
}

async fn heads(
    pool: &Pool,
    streams: &[StreamId],
) -> Result<HashMap<StreamId, i64>, Box<dyn std::error::Error + Send + Sync>> {
    let client = pool.get().await?;
    let query = client
        .prepare_cached("SELECT id, seq FROM docket_streams WHERE id = ANY($1)")
        .await?;
    let ids: Vec<&str> = streams.iter().map(StreamId::as_str).collect();
    let mut found: HashMap<StreamId, i64> = streams.iter().map(|s| (s.clone(), 0)).collect();
    for row in client.query(&query, &[&ids]).await? {
        let (id, seq): (&str, i64) = (row.get(0), row.get(1));
        if let Ok(id) = StreamId::new(id) {
            found.insert(id, seq);
        }
    }
    Ok(found)
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
            // What was appended while no connection listened was not announced.
            if let Some(w) = watchers.upgrade() {
                w.wake_all();
            }
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
