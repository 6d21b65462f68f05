//! Reads and tails: events fetched in chunks, each checked against the chain as it is read
//! (the database is trusted to keep rows, not to keep them unchanged).

use std::collections::VecDeque;
use std::sync::Arc;

use deadpool_postgres::Pool;
use docket_store::{Event, Hash, StoreError, StreamId, check_event_record};
use futures::Stream;
use tokio::sync::watch;

use crate::error::PgError;
use crate::schema::db;

/// Most events one query returns.
pub(crate) const CHUNK: i64 = 1024;

/// Where a read or tail stands between chunks.
pub(crate) struct Cursor {
    pub pool: Pool,
    pub database: Arc<str>,
    pub stream: StreamId,
    pub next: u64,
    /// The last event to read (`read`), or `None` to follow the stream (`tail`).
    pub to: Option<u64>,
    pub prev: Option<Hash>,
    pub buf: VecDeque<Event>,
    /// A tail's wake-ups (listen.rs): it reads again only when woken.
    pub wake: Option<watch::Receiver<u64>>,
    /// A read's end is still to be cut to the stream's head when it starts.
    pub clamp: bool,
    pub done: bool,
}

impl Cursor {
    pub(crate) fn into_stream(
        self,
    ) -> impl Stream<Item = Result<Event, StoreError>> + Send + 'static {
        futures::stream::unfold(self, |mut c| async move {
            loop {
                if let Some(e) = c.buf.pop_front() {
                    return Some((Ok(e), c));
                }
                if c.done || c.to.is_some_and(|to| c.next > to) {
                    return None;
                }
                let seen = c.wake.as_mut().map(|rx| *rx.borrow_and_update());
                match c.fill().await {
                    Err(e) => {
                        c.done = true;
                        return Some((Err(e), c));
                    }
                    Ok(true) => continue,
                    Ok(false) => {}
                }
                // Nothing new. A read is over; a tail waits to be woken.
                let rx = c.wake.as_mut()?;
                if seen.is_some_and(|s| s != *rx.borrow()) {
                    continue;
                }
                if rx.changed().await.is_err() {
                    // The store was dropped: a tail ends with it.
                    return None;
                }
            }
        })
    }

    /// Reads the next chunk into `buf`; whether it found any event.
    async fn fill(&mut self) -> Result<bool, StoreError> {
        let doing = format!("reading stream {}", self.stream);
        let database = &*self.database;
        let client = self.pool.get().await.map_err(|e| PgError::NoConnection {
            database: database.to_owned(),
            doing: doing.clone(),
            why: e.to_string(),
        })?;
        if self.clamp {
            self.clamp = false;
            let head = client
                .prepare_cached("SELECT seq FROM docket_streams WHERE id = $1")
                .await
                .map_err(db(database, &doing))?;
            let head = client
                .query_opt(&head, &[&self.stream.as_str()])
                .await
                .map_err(db(database, &doing))?
                .map_or(0, |row| u64::try_from(row.get::<_, i64>(0)).unwrap_or(0));
            self.to = self.to.map(|to| to.min(head));
            if self.to.is_some_and(|to| self.next > to) {
                return Ok(false);
            }
        }
        // Without the previous hash, one event before is read too, so the first link is
        // checked as well.
        let from = if self.prev.is_none() && self.next > 1 {
            self.next - 1
        } else {
            self.next
        };
        let last = self
            .to
            .map_or(i64::MAX, |to| i64::try_from(to).unwrap_or(i64::MAX));
        let query = client
            .prepare_cached(
                "SELECT seq, record FROM docket_events WHERE stream = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq LIMIT $4",
            )
            .await
            .map_err(db(database, &doing))?;
        let rows = client
            .query(
                &query,
                &[
                    &self.stream.as_str(),
                    &i64::try_from(from).unwrap_or(i64::MAX),
                    &last,
                    &CHUNK,
                ],
            )
            .await
            .map_err(db(database, &doing))?;
        drop(client);
        let got = rows.len();
        let mut found = false;
        let mut expected = from;
        for row in rows {
            let seq = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
            let record: &[u8] = row.get(1);
            let damaged = |break_| {
                StoreError::from(PgError::Damaged {
                    database: database.to_owned(),
                    stream: self.stream.clone(),
                    break_,
                })
            };
            if seq != expected {
                return Err(damaged(docket_store::ChainBreak::Missing {
                    expected,
                    found: seq,
                }));
            }
            let prev = if seq < self.next { None } else { self.prev };
            let event = check_event_record(&self.stream, seq, prev, record).map_err(damaged)?;
            expected += 1;
            self.prev = Some(event.hash);
            if seq >= self.next {
                self.next = seq + 1;
                self.buf.push_back(event);
                found = true;
            }
        }
        // A read knows how many events the stream held: fewer rows than that is a loss.
        if let Some(to) = self.to
            && expected <= to
            && (got as i64) < CHUNK
        {
            return Err(PgError::Damaged {
                database: database.to_owned(),
                stream: self.stream.clone(),
                break_: docket_store::ChainBreak::Unreadable {
                    seq: expected,
                    what: format!("the event is missing, though the stream's head is {to}"),
                },
            }
            .into());
        }
        Ok(found)
    }
}
