//! Group commit: the appends of every run in this process that are waiting when a
//! transaction starts go into that one transaction. Each is checked against its stream's
//! head under the stream's row lock; one that lost a race is refused with a conflict and
//! the others still commit.

use std::collections::HashMap;
use std::sync::Arc;

use deadpool_postgres::Pool;
use docket_store::{Appended, Hash, SealedEvent, StoreError, StreamId, genesis};
use tokio::sync::{mpsc, oneshot};

use crate::error::PgError;
use crate::leases::Holder;
use crate::listen::{CHANNEL, Watchers};
use crate::schema::db;
use crate::store::Heads;

/// One append, sealed by its caller, waiting for a transaction.
pub(crate) struct AppendJob {
    pub stream: StreamId,
    /// The stream's version the events follow.
    pub expected: u64,
    /// The claim this process holds on the stream, which must still be the latest.
    pub fence: Option<(Holder, u64)>,
    /// The hash of event `expected` the events were sealed after.
    pub prev: Hash,
    pub events: Vec<SealedEvent>,
    /// Content the events refer to, by hash.
    pub blobs: Vec<(Hash, Vec<u8>)>,
    pub reply: oneshot::Sender<Result<Appended, StoreError>>,
}

/// Most appends in one transaction, and most bytes.
const MAX_JOBS: usize = 512;
const MAX_BYTES: usize = 64 << 20;

/// Times a transaction that failed on a race between processes (two creating one stream,
/// a deadlock, a serialization failure) is tried again before its appends are refused.
const RETRIES: usize = 5;

/// Commits appends until every sender is gone.
pub(crate) async fn commit_loop(
    pool: Pool,
    database: Arc<str>,
    heads: Arc<Heads>,
    watchers: Arc<Watchers>,
    mut rx: mpsc::UnboundedReceiver<AppendJob>,
) {
    while let Some(first) = rx.recv().await {
        let mut size = job_bytes(&first);
        let mut jobs = vec![first];
        while jobs.len() < MAX_JOBS && size < MAX_BYTES {
            match rx.try_recv() {
                Ok(job) => {
                    size += job_bytes(&job);
                    jobs.push(job);
                }
                Err(_) => break,
            }
        }
        let span = tracing::debug_span!("group_commit", appends = jobs.len());
        tracing::Instrument::instrument(
            commit_group(&pool, &database, &heads, &watchers, jobs),
            span,
        )
        .await;
    }
}

fn job_bytes(job: &AppendJob) -> usize {
    job.events.iter().map(|e| e.record.len()).sum::<usize>()
        + job.blobs.iter().map(|(_, b)| b.len()).sum::<usize>()
}

/// What a group's transaction decided for each append.
enum Verdict {
    Accepted(Appended),
    Refused(StoreError),
}

async fn commit_group(
    pool: &Pool,
    database: &str,
    heads: &Heads,
    watchers: &Watchers,
    jobs: Vec<AppendJob>,
) {
    let mut attempt = 0;
    let verdicts = loop {
        match try_commit(pool, database, &jobs).await {
            Ok(verdicts) => break Ok(verdicts),
            Err(e) if attempt < RETRIES && is_race(&e) => attempt += 1,
            Err(e) => break Err(e),
        }
    };
    match verdicts {
        Ok(verdicts) => {
            for (job, verdict) in jobs.into_iter().zip(verdicts) {
                if let Verdict::Accepted(a) = &verdict {
                    if let Some(last) = a.hashes.last() {
                        heads.remember(&job.stream, a.last_seq(), *last);
                    }
                    watchers.wake(&job.stream);
                }
                let _ = job.reply.send(match verdict {
                    Verdict::Accepted(a) => Ok(a),
                    Verdict::Refused(e) => Err(e),
                });
            }
        }
        Err(e) => {
            // Not acknowledged: the head is read again from the database before the next
            // append to these streams.
            let e = Arc::new(e);
            for job in jobs {
                heads.forget(&job.stream);
                let _ = job.reply.send(Err(StoreError::Backend {
                    source: Box::new(e.clone()),
                }));
            }
        }
    }
}

/// Whether a failed transaction lost a race with another process and may be tried again.
fn is_race(e: &PgError) -> bool {
    use tokio_postgres::error::SqlState;
    let PgError::Database { source, .. } = e else {
        return false;
    };
    source.code().is_some_and(|c| {
        *c == SqlState::UNIQUE_VIOLATION
            || *c == SqlState::T_R_DEADLOCK_DETECTED
            || *c == SqlState::T_R_SERIALIZATION_FAILURE
    })
}

async fn try_commit(
    pool: &Pool,
    database: &str,
    jobs: &[AppendJob],
) -> Result<Vec<Verdict>, PgError> {
    let doing = "committing appends";
    let mut client = pool.get().await.map_err(|e| PgError::NoConnection {
        database: database.to_owned(),
        doing: doing.to_owned(),
        why: e.to_string(),
    })?;
    let tx = client.transaction().await.map_err(db(database, doing))?;
    let mut ids: Vec<&str> = jobs.iter().map(|j| j.stream.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let lock = tx
        .prepare_cached(
            "SELECT id, seq, head FROM docket_streams WHERE id = ANY($1) ORDER BY id FOR UPDATE",
        )
        .await
        .map_err(db(database, doing))?;
    let rows = tx
        .query(&lock, &[&ids])
        .await
        .map_err(db(database, doing))?;
    let mut current: HashMap<String, (u64, Hash)> = HashMap::with_capacity(rows.len());
    for row in rows {
        let id: String = row.get(0);
        let seq: i64 = row.get(1);
        let head = hash_of(row.get(2)).ok_or_else(|| PgError::BadRow {
            database: database.to_owned(),
            what: format!("the head of stream {id} is not a 32-byte hash"),
        })?;
        current.insert(id, (u64::try_from(seq).unwrap_or(0), head));
    }
    // The claims of fenced appends, read under a share lock: a claim by another worker
    // (an update of the row) waits for this transaction, or this one sees its epoch.
    let fenced: Vec<&str> = jobs
        .iter()
        .filter(|j| j.fence.is_some())
        .map(|j| j.stream.as_str())
        .collect();
    let mut claims: HashMap<String, (i64, Option<String>)> = HashMap::new();
    if !fenced.is_empty() {
        let lease = tx
            .prepare_cached(
                "SELECT stream, epoch, holder FROM docket_leases WHERE stream = ANY($1) ORDER BY stream FOR SHARE",
            )
            .await
            .map_err(db(database, doing))?;
        for row in tx
            .query(&lease, &[&fenced])
            .await
            .map_err(db(database, doing))?
        {
            claims.insert(row.get(0), (row.get(1), row.get(2)));
        }
    }
    let mut verdicts = Vec::with_capacity(jobs.len());
    let (mut e_stream, mut e_seq, mut e_record, mut e_leaf) = (vec![], vec![], vec![], vec![]);
    let (mut b_hash, mut b_bytes): (Vec<&[u8]>, Vec<&[u8]>) = (vec![], vec![]);
    let mut changed: Vec<&str> = Vec::new();
    for job in jobs {
        let (seq, head) = current
            .get(job.stream.as_str())
            .copied()
            .unwrap_or_else(|| (0, genesis(&job.stream)));
        if let Some((holder, epoch)) = &job.fence {
            let (current, by) = claims
                .get(job.stream.as_str())
                .cloned()
                .unwrap_or((0, None));
            let current = u64::try_from(current).unwrap_or(0);
            if current != *epoch || by.as_deref() != Some(holder.as_str()) {
                verdicts.push(Verdict::Refused(StoreError::Fenced {
                    stream: job.stream.clone(),
                    held: *epoch,
                    current,
                    holder: by.unwrap_or_else(|| "no worker".to_owned()),
                }));
                continue;
            }
        }
        if seq != job.expected || head != job.prev {
            verdicts.push(Verdict::Refused(StoreError::Conflict {
                stream: job.stream.clone(),
                expected: job.expected,
                actual: seq,
            }));
            continue;
        }
        for (hash, bytes) in &job.blobs {
            if !b_hash.contains(&hash.0.as_slice()) {
                b_hash.push(&hash.0);
                b_bytes.push(bytes);
            }
        }
        for e in &job.events {
            e_stream.push(job.stream.as_str());
            e_seq.push(i64::try_from(e.seq).unwrap_or(i64::MAX));
            e_record.push(e.record.as_slice());
            e_leaf.push(e.leaf.0.as_slice());
            if let Some((hash, bytes)) = &e.blob
                && !b_hash.contains(&hash.0.as_slice())
            {
                b_hash.push(&hash.0);
                b_bytes.push(bytes);
            }
        }
        if !changed.contains(&job.stream.as_str()) {
            changed.push(job.stream.as_str());
        }
        let last = job.events.last().map_or((seq, head), |e| (e.seq, e.hash));
        current.insert(job.stream.as_str().to_owned(), last);
        verdicts.push(Verdict::Accepted(Appended {
            stream: job.stream.clone(),
            first_seq: job.expected + 1,
            hashes: job.events.iter().map(|e| e.hash).collect(),
        }));
    }
    if e_stream.is_empty() {
        tx.rollback().await.map_err(db(database, doing))?;
        return Ok(verdicts);
    }
    if !b_hash.is_empty() {
        let put = tx
            .prepare_cached(
                "INSERT INTO docket_blobs (hash, bytes) SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT DO NOTHING",
            )
            .await
            .map_err(db(database, doing))?;
        tx.execute(&put, &[&b_hash, &b_bytes])
            .await
            .map_err(db(database, doing))?;
    }
    let insert = tx
        .prepare_cached(
            "INSERT INTO docket_events (stream, seq, record, leaf) SELECT * FROM unnest($1::text[], $2::int8[], $3::bytea[], $4::bytea[])",
        )
        .await
        .map_err(db(database, doing))?;
    tx.execute(&insert, &[&e_stream, &e_seq, &e_record, &e_leaf])
        .await
        .map_err(db(database, doing))?;
    let (mut h_id, mut h_seq, mut h_head): (Vec<&str>, Vec<i64>, Vec<&[u8]>) =
        (vec![], vec![], vec![]);
    for id in &changed {
        if let Some((seq, head)) = current.get(*id) {
            h_id.push(id);
            h_seq.push(i64::try_from(*seq).unwrap_or(i64::MAX));
            h_head.push(&head.0);
        }
    }
    let heads = tx
        .prepare_cached(
            "INSERT INTO docket_streams (id, seq, head) SELECT * FROM unnest($1::text[], $2::int8[], $3::bytea[])
             ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, head = excluded.head",
        )
        .await
        .map_err(db(database, doing))?;
    tx.execute(&heads, &[&h_id, &h_seq, &h_head])
        .await
        .map_err(db(database, doing))?;
    let notify = tx
        .prepare_cached(&format!(
            "SELECT pg_notify('{CHANNEL}', id) FROM unnest($1::text[]) AS id"
        ))
        .await
        .map_err(db(database, doing))?;
    tx.execute(&notify, &[&h_id])
        .await
        .map_err(db(database, doing))?;
    tx.commit().await.map_err(db(database, doing))?;
    Ok(verdicts)
}

/// A 32-byte column as a hash.
pub(crate) fn hash_of(bytes: &[u8]) -> Option<Hash> {
    <[u8; 32]>::try_from(bytes).ok().map(Hash)
}
