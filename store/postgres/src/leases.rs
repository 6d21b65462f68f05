//! Leases: which worker drives which run (docs/postgres.md, "Workers"). A claim takes a
//! runnable stream whose lease is free or lapsed, by its priority and how long it has
//! waited (docs/postgres.md#claim-order), and raises its epoch; every append the claimant
//! makes to that stream carries the epoch and is refused once another claim has raised it
//! ([`docket_store::StoreError::Fenced`]). Renewals are one statement per worker, and
//! every time is the database's clock.

use std::time::Duration;

use docket_store::{StoreError, StreamId};

use crate::store::PostgresStore;

/// A worker process, as leases name it: its name and this process's instance.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Holder(String);

impl Holder {
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a run stands in the claim order (docs/postgres.md#claim-order): the `[defaults]
/// priority` of the bundle it was started with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RunPriority {
    High,
    #[default]
    Normal,
    Low,
}

impl RunPriority {
    /// As `docket_leases.priority` holds it: the number of aging steps a run of this
    /// priority waits behind a `HIGH` one that became ready at the same time.
    #[must_use]
    pub fn rank(self) -> i16 {
        match self {
            RunPriority::High => 0,
            RunPriority::Normal => 1,
            RunPriority::Low => 2,
        }
    }

    fn from_rank(rank: i16) -> RunPriority {
        match rank {
            0 => RunPriority::High,
            2 => RunPriority::Low,
            _ => RunPriority::Normal,
        }
    }

    /// The protocol's word for it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            RunPriority::High => "HIGH",
            RunPriority::Normal => "NORMAL",
            RunPriority::Low => "LOW",
        }
    }
}

/// How long a run waits before it is claimed as if it had the next priority up
/// (docs/postgres.md#claim-order): a `NORMAL` run goes before `HIGH` ones that became
/// ready more than this after it, a `LOW` one before `NORMAL` ones that did and `HIGH`
/// ones that became ready more than twice this after it.
pub const DEFAULT_PRIORITY_AGING: Duration = Duration::from_secs(60);

/// A claim on a stream held by this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub stream: StreamId,
    pub epoch: u64,
}

/// A lease as the database holds it, for those who show them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRow {
    pub stream: StreamId,
    pub runnable: bool,
    /// Its place in the claim order.
    pub priority: RunPriority,
    pub epoch: u64,
    pub holder: Option<String>,
    /// Milliseconds until the lease lapses by the database's clock (negative: lapsed).
    pub expires_in_ms: Option<i64>,
    /// Given back waiting on a timer: milliseconds until it is due and the run claimable,
    /// by the database's clock (negative: due).
    pub due_in_ms: Option<i64>,
}

/// A worker as the database last saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerRow {
    pub holder: String,
    pub name: String,
    /// Milliseconds since its last renewal, by the database's clock.
    pub renewed_ms_ago: i64,
    pub stopped: bool,
    /// Leases it holds now.
    pub holds: u64,
}

fn interval(lease: Duration) -> f64 {
    lease.as_secs_f64()
}

impl PostgresStore {
    /// Marks `stream`, a run of `priority`, as waiting for a worker (a new run, a decided
    /// ticket), waking workers. Asked while a worker holds it, the request stays until
    /// that worker gives it back, and the run is driven again then. A run already queued
    /// keeps the time it became ready, and with it its place.
    pub async fn enqueue(
        &self,
        stream: &StreamId,
        priority: RunPriority,
    ) -> Result<(), StoreError> {
        let doing = format!("queueing run {stream} for a worker");
        let client = self.client(&doing).await?;
        client
            .execute(
                "WITH q AS (
                     INSERT INTO docket_leases (stream, priority) VALUES ($1, $2)
                     ON CONFLICT (stream) DO UPDATE SET runnable = true,
                         priority = EXCLUDED.priority,
                         queued_at = CASE WHEN docket_leases.runnable
                             AND docket_leases.holder IS NULL
                             THEN docket_leases.queued_at ELSE now() END
                 )
                 SELECT pg_notify('docket_runnable', $1)",
                &[&stream.as_str(), &priority.rank()],
            )
            .await
            .map_err(self.db(&doing))?;
        Ok(())
    }

    /// Registers this process as worker `name`.
    pub async fn register_worker(&self, name: &str) -> Result<Holder, StoreError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let holder = Holder(format!("{name}/{}-{nanos:08x}", std::process::id()));
        let doing = format!("registering worker {name}");
        let client = self.client(&doing).await?;
        client
            .execute(
                "INSERT INTO docket_workers (holder, name) VALUES ($1, $2)",
                &[&holder.0, &name],
            )
            .await
            .map_err(self.db(&doing))?;
        Ok(holder)
    }

    /// Claims up to `max` streams, for `lease`: those queued and not held, those whose
    /// timer is due ([`PostgresStore::release`] with a due time), and those whose holder
    /// let its lease lapse. They are taken in the claim order (docs/postgres.md#claim-order):
    /// by the time each became ready plus `aging` for each step its priority is below
    /// `HIGH`, so `HIGH` before `NORMAL` before `LOW`, one priority in the order its runs
    /// became ready, and a run that has waited longer than `aging` per step before any
    /// other. A claimed stream is no longer queued until something asks for another drive
    /// ([`PostgresStore::enqueue`]). The appends this store makes to them from now on carry
    /// the new epochs.
    pub async fn claim(
        &self,
        holder: &Holder,
        max: usize,
        lease: Duration,
        aging: Duration,
    ) -> Result<Vec<Lease>, StoreError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let doing = format!("claiming runs for {holder}");
        let client = self.client(&doing).await?;
        // Each priority's queue is read through the index by (priority, queued_at), at most
        // `max` from each; the runs due on a timer and those left behind are few. The
        // candidates are locked (skipping those another worker is claiming) and the first
        // `max` of them in the claim order taken.
        let rows = client
            .query(
                "WITH queued_high AS (
                     SELECT stream, queued_at AS ready_at, priority FROM docket_leases
                     WHERE runnable AND priority = 0 AND holder IS NULL
                     ORDER BY queued_at LIMIT $2
                     FOR UPDATE SKIP LOCKED
                 ), queued_normal AS (
                     SELECT stream, queued_at AS ready_at, priority FROM docket_leases
                     WHERE runnable AND priority = 1 AND holder IS NULL
                     ORDER BY queued_at LIMIT $2
                     FOR UPDATE SKIP LOCKED
                 ), queued_low AS (
                     SELECT stream, queued_at AS ready_at, priority FROM docket_leases
                     WHERE runnable AND priority = 2 AND holder IS NULL
                     ORDER BY queued_at LIMIT $2
                     FOR UPDATE SKIP LOCKED
                 ), due AS (
                     SELECT stream, due_at AS ready_at, priority FROM docket_leases
                     WHERE due_at <= now() AND holder IS NULL AND NOT runnable
                     ORDER BY due_at + make_interval(secs => priority * $4::float8) LIMIT $2
                     FOR UPDATE SKIP LOCKED
                 ), left_behind AS (
                     SELECT stream, queued_at AS ready_at, priority FROM docket_leases
                     WHERE holder IS NOT NULL AND expires_at < now()
                     ORDER BY queued_at + make_interval(secs => priority * $4::float8) LIMIT $2
                     FOR UPDATE SKIP LOCKED
                 ), picked AS (
                     SELECT stream FROM (
                         SELECT * FROM queued_high UNION ALL SELECT * FROM queued_normal
                         UNION ALL SELECT * FROM queued_low UNION ALL SELECT * FROM due
                         UNION ALL SELECT * FROM left_behind
                     ) AS w
                     ORDER BY ready_at + make_interval(secs => priority * $4::float8), priority, stream
                     LIMIT $2
                 )
                 UPDATE docket_leases AS l
                 SET holder = $1, epoch = l.epoch + 1, runnable = false, due_at = NULL,
                     expires_at = now() + make_interval(secs => $3)
                 FROM picked WHERE l.stream = picked.stream
                 RETURNING l.stream, l.epoch",
                &[
                    &holder.0,
                    &i64::try_from(max).unwrap_or(i64::MAX),
                    &interval(lease),
                    &interval(aging),
                ],
            )
            .await
            .map_err(self.db(&doing))?;
        let mut leases = Vec::with_capacity(rows.len());
        for row in rows {
            let stream = StreamId::new(row.get::<_, String>(0))?;
            let epoch = u64::try_from(row.get::<_, i64>(1)).unwrap_or(0);
            self.fence(&stream, Some((holder.clone(), epoch, lease)));
            leases.push(Lease { stream, epoch });
        }
        Ok(leases)
    }

    /// Renews the leases of `held` that `holder` still holds, in one statement; those it no
    /// longer holds (claimed by another since), whose appends stay refused.
    pub async fn renew(
        &self,
        holder: &Holder,
        held: &[Lease],
        lease: Duration,
    ) -> Result<Vec<Lease>, StoreError> {
        let doing = format!("renewing the leases of {holder}");
        let client = self.client(&doing).await?;
        // Only the leases of runs it drives: one it could not give back (the database was
        // down) lapses, and another worker (or this one) claims it again.
        let streams: Vec<&str> = held.iter().map(|l| l.stream.as_str()).collect();
        let rows = client
            .query(
                "WITH w AS (
                     UPDATE docket_workers SET renewed_at = now() WHERE holder = $1
                 )
                 UPDATE docket_leases SET expires_at = now() + make_interval(secs => $2)
                 WHERE holder = $1 AND stream = ANY($3)
                 RETURNING stream, epoch",
                &[&holder.0, &interval(lease), &streams],
            )
            .await
            .map_err(self.db(&doing))?;
        let kept: Vec<(String, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        let lost: Vec<Lease> = held
            .iter()
            .filter(|l| {
                !kept
                    .iter()
                    .any(|(s, e)| s == l.stream.as_str() && u64::try_from(*e).ok() == Some(l.epoch))
            })
            .cloned()
            .collect();
        // Their fences stay: a late append from this process is refused, not merely
        // checked against the version.
        Ok(lost)
    }

    /// Gives a lease back: the stream waits for another worker (`runnable`, or when a
    /// drive was asked for while it was held), for its timer (`due_ms`, ms since the Unix
    /// epoch: claimable from then on), or for something outside to queue it again (a
    /// person's decision). Nothing happens if the lease was claimed by another since.
    pub async fn release(
        &self,
        holder: &Holder,
        lease: &Lease,
        runnable: bool,
        due_ms: Option<i64>,
    ) -> Result<(), StoreError> {
        self.fence(&lease.stream, None);
        let doing = format!("releasing run {} by {holder}", lease.stream);
        let client = self.client(&doing).await?;
        // Milliseconds as seconds: exact in a double up to the year 287,000.
        #[allow(clippy::cast_precision_loss)]
        let due = due_ms.map(|ms| ms as f64 / 1000.0);
        let waiting = client
            .query_opt(
                "UPDATE docket_leases SET holder = NULL, expires_at = NULL,
                     runnable = runnable OR $4,
                     queued_at = CASE WHEN $4 THEN now() ELSE queued_at END,
                     due_at = to_timestamp($5)
                 WHERE stream = $1 AND holder = $2 AND epoch = $3
                 RETURNING runnable",
                &[
                    &lease.stream.as_str(),
                    &holder.0,
                    &i64::try_from(lease.epoch).unwrap_or(i64::MAX),
                    &runnable,
                    &due,
                ],
            )
            .await
            .map_err(self.db(&doing))?
            .is_some_and(|row| row.get::<_, bool>(0));
        if waiting {
            client
                .execute(
                    "SELECT pg_notify('docket_runnable', $1)",
                    &[&lease.stream.as_str()],
                )
                .await
                .map_err(self.db(&doing))?;
        }
        Ok(())
    }

    /// Marks the worker stopped and gives back every lease it holds, runnable, so another
    /// worker takes its runs at once.
    pub async fn stop_worker(&self, holder: &Holder) -> Result<(), StoreError> {
        let doing = format!("stopping worker {holder}");
        let client = self.client(&doing).await?;
        client
            .execute(
                "WITH w AS (
                     UPDATE docket_workers SET stopped_at = now() WHERE holder = $1
                 ), l AS (
                     UPDATE docket_leases SET holder = NULL, expires_at = NULL, runnable = true,
                         queued_at = now()
                     WHERE holder = $1 RETURNING stream
                 )
                 SELECT pg_notify('docket_runnable', stream) FROM l",
                &[&holder.0],
            )
            .await
            .map_err(self.db(&doing))?;
        self.unfence_all(holder);
        Ok(())
    }

    /// How long until the first run given back on a timer is due and claimable, by the
    /// database's clock (zero when one is due now); `None` when no run waits on a timer.
    /// What a worker sleeps at most before it looks for work again.
    pub async fn next_due_in(&self) -> Result<Option<Duration>, StoreError> {
        let doing = "looking for the next timer due";
        let client = self.client(doing).await?;
        let row = client
            .query_one(
                "SELECT (extract(epoch FROM min(due_at) - now()) * 1000)::int8
                 FROM docket_leases WHERE due_at IS NOT NULL AND holder IS NULL",
                &[],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(row
            .get::<_, Option<i64>>(0)
            .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
    }

    /// Every lease, by stream.
    pub async fn leases(&self) -> Result<Vec<LeaseRow>, StoreError> {
        let doing = "listing leases";
        let client = self.client(doing).await?;
        let rows = client
            .query(
                "SELECT stream, runnable, epoch, holder,
                        (extract(epoch FROM expires_at - now()) * 1000)::int8,
                        (extract(epoch FROM due_at - now()) * 1000)::int8, priority
                 FROM docket_leases ORDER BY stream",
                &[],
            )
            .await
            .map_err(self.db(doing))?;
        rows.into_iter()
            .map(|r| {
                Ok(LeaseRow {
                    stream: StreamId::new(r.get::<_, String>(0))?,
                    runnable: r.get(1),
                    priority: RunPriority::from_rank(r.get(6)),
                    epoch: u64::try_from(r.get::<_, i64>(2)).unwrap_or(0),
                    holder: r.get(3),
                    expires_in_ms: r.get(4),
                    due_in_ms: r.get(5),
                })
            })
            .collect()
    }

    /// Every worker the database has seen, the latest first.
    pub async fn workers(&self) -> Result<Vec<WorkerRow>, StoreError> {
        let doing = "listing workers";
        let client = self.client(doing).await?;
        let rows = client
            .query(
                "SELECT w.holder, w.name,
                        (extract(epoch FROM now() - w.renewed_at) * 1000)::int8,
                        w.stopped_at IS NOT NULL,
                        (SELECT count(*) FROM docket_leases l WHERE l.holder = w.holder)
                 FROM docket_workers w ORDER BY w.renewed_at DESC",
                &[],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(rows
            .into_iter()
            .map(|r| WorkerRow {
                holder: r.get(0),
                name: r.get(1),
                renewed_ms_ago: r.get(2),
                stopped: r.get(3),
                holds: u64::try_from(r.get::<_, i64>(4)).unwrap_or(0),
            })
            .collect())
    }
}
