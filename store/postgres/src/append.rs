//! Group commit: the appends of every run in this process that are waiting when a
//! transaction starts go into that one transaction. Each is checked against its stream's
//! head under the stream's row lock; one that lost a race is refused with a conflict and
//! the others still commit.

use std::sync::Arc;

use deadpool_postgres::Pool;
use docket_store::{Appended, Hash, SealedEvent, StoreError, StreamId};
use tokio::sync::{mpsc, oneshot};

use crate::error::PgError;
use crate::leases::Holder;
use crate::listen::Watchers;
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
    let client = pool.get().await.map_err(|e| PgError::NoConnection {
        database: database.to_owned(),
        doing: doing.to_owned(),
        why: e.to_string(),
    })?;
    let n = jobs.len();
    let (mut j_stream, mut j_expected, mut j_prev) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut j_holder, mut j_epoch) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut j_last_seq, mut j_last_hash) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut e_job, mut e_seq, mut e_record, mut e_leaf) = (vec![], vec![], vec![], vec![]);
    let (mut b_job, mut b_hash, mut b_bytes): (Vec<i32>, Vec<&[u8]>, Vec<&[u8]>) =
        (vec![], vec![], vec![]);
    for (i, job) in jobs.iter().enumerate() {
        let index = i32::try_from(i + 1).unwrap_or(i32::MAX);
        j_stream.push(job.stream.as_str());
        j_expected.push(to_i64(job.expected));
        j_prev.push(job.prev.0.as_slice());
        j_holder.push(job.fence.as_ref().map(|(h, _)| h.as_str()));
        j_epoch.push(job.fence.as_ref().map(|(_, e)| to_i64(*e)));
        let (last_seq, last_hash) = job
            .events
            .last()
            .map_or((job.expected, job.prev), |e| (e.seq, e.hash));
        j_last_seq.push(to_i64(last_seq));
        j_last_hash.push(last_hash.0.to_vec());
        for (hash, bytes) in &job.blobs {
            b_job.push(index);
            b_hash.push(hash.0.as_slice());
            b_bytes.push(bytes.as_slice());
        }
        for e in &job.events {
            e_job.push(index);
            e_seq.push(to_i64(e.seq));
            e_record.push(e.record.as_slice());
            e_leaf.push(e.leaf.0.as_slice());
            if let Some((hash, bytes)) = &e.blob {
                b_job.push(index);
                b_hash.push(hash.0.as_slice());
                b_bytes.push(bytes.as_slice());
            }
        }
    }
    let append = client
        .prepare_cached(
            "SELECT job, refusal, actual, claim, holder FROM docket_append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
        )
        .await
        .map_err(db(database, doing))?;
    let refused = client
        .query(
            &append,
            &[
                &j_stream,
                &j_expected,
                &j_prev,
                &j_holder,
                &j_epoch,
                &j_last_seq,
                &j_last_hash,
                &e_job,
                &e_seq,
                &e_record,
                &e_leaf,
                &b_job,
                &b_hash,
                &b_bytes,
            ],
        )
        .await
        .map_err(db(database, doing))?;
    let mut verdicts: Vec<Option<StoreError>> = (0..n).map(|_| None).collect();
    for row in refused {
        let index = usize::try_from(row.get::<_, i32>(0)).unwrap_or(0);
        let Some(job) = index.checked_sub(1).and_then(|i| jobs.get(i)) else {
            continue;
        };
        let refusal: &str = row.get(1);
        let error = if refusal == "fenced" {
            StoreError::Fenced {
                stream: job.stream.clone(),
                held: job.fence.as_ref().map_or(0, |(_, e)| *e),
                current: to_u64(row.get::<_, Option<i64>>(3).unwrap_or(0)),
                holder: row
                    .get::<_, Option<String>>(4)
                    .unwrap_or_else(|| "no worker".to_owned()),
            }
        } else {
            StoreError::Conflict {
                stream: job.stream.clone(),
                expected: job.expected,
                actual: to_u64(row.get::<_, Option<i64>>(2).unwrap_or(0)),
            }
        };
        verdicts[index - 1] = Some(error);
    }
    Ok(jobs
        .iter()
        .zip(verdicts)
        .map(|(job, refused)| match refused {
            Some(e) => Verdict::Refused(e),
            None => Verdict::Accepted(Appended {
                stream: job.stream.clone(),
                first_seq: job.expected + 1,
                hashes: job.events.iter().map(|e| e.hash).collect(),
            }),
        })
        .collect())
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A 32-byte column as a hash.
pub(crate) fn hash_of(bytes: &[u8]) -> Option<Hash> {
    <[u8; 32]>::try_from(bytes).ok().map(Hash)
}
