//! `docket worker`: a process that drives the runs of a shared PostgreSQL store
//! (docs/postgres.md, "Workers"). It claims runnable runs (by priority, those that waited
//! long enough first: docs/postgres.md#claim-order), resumes each from its log as
//! `docket resume` does (calls without a recorded answer made again, started effects
//! verified before anything is executed), renews its leases in one statement per interval,
//! and stops driving a run the moment it learns another worker claimed it.

use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};

use docket_decider::{NextStep, RunId, RunStatus};
use docket_runtime::{RunOutcome, RuntimeError};
use docket_store::{StoreError, StreamId};
use docket_store_postgres::{Holder, Lease, PostgresStore};
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::App;

/// How a worker works.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// The worker's name in leases and on the workers page (this process's instance is
    /// added to it).
    pub name: String,
    /// Runs driven at once.
    pub concurrency: usize,
    /// How long a claim holds without renewal: a dead worker's runs go on elsewhere after
    /// at most this long.
    pub lease: Duration,
    /// How often leases are renewed (well within `lease`).
    pub renew_every: Duration,
    /// How long a queued run waits before it is claimed as if it had the next priority up
    /// (docs/postgres.md#claim-order).
    pub priority_aging: Duration,
}

impl WorkerConfig {
    pub fn new(name: impl Into<String>) -> WorkerConfig {
        WorkerConfig {
            name: name.into(),
            concurrency: 16,
            lease: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
            priority_aging: docket_store_postgres::DEFAULT_PRIORITY_AGING,
        }
    }
}

/// What a worker did before it stopped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Runs it claimed.
    pub claimed: u64,
    /// Drives that ended with the run finished or waiting for a person.
    pub settled: u64,
    /// Runs it stopped driving because another worker claimed them.
    pub lost: u64,
    /// Drives that failed (each logged with its run).
    pub failed: u64,
}

/// Why a worker could not work.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Workers share runs through a PostgreSQL store only.
    #[error(
        "a worker needs a PostgreSQL store (--store postgres://…); a data directory is driven by the command that records in it"
    )]
    NotShared,
    /// The database failed where the worker could not go on (registering itself).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A run being driven, and its claim.
struct Driving {
    lease: Lease,
    task: tokio::task::AbortHandle,
}

/// Drives runs until `stop` completes, then gives back the runs it holds (runnable, so
/// another worker takes them at once) and says what it did.
///
/// # Errors
/// [`WorkerError::NotShared`] for a data directory; [`WorkerError::Store`] when the worker
/// cannot register itself. Later database failures are retried: a worker whose renewals
/// fail for as long as its lease stops driving its runs (another worker may claim them).
pub async fn work(
    app: App,
    config: WorkerConfig,
    stop: impl Future<Output = ()>,
) -> Result<WorkerReport, WorkerError> {
    let store = app
        .runtime()
        .store()
        .postgres()
        .cloned()
        .ok_or(WorkerError::NotShared)?;
    // A run waiting on a timer is given back with its due time, not held by a sleeping
    // drive: any worker claims it once it is due.
    app.runtime().set_timers_elsewhere();
    // A switch flipped from any machine stops this worker's effects: the database's
    // switches, whatever the front end set.
    app.runtime()
        .set_kill_switch(std::sync::Arc::new(crate::DatabaseKillSwitch::new(
            store.clone(),
        )));
    let holder = store.register_worker(&config.name).await?;
    let span = tracing::info_span!("worker", holder = %holder);
    let firer = crate::ScheduleFirer::new(app.clone(), holder.to_string());
    let report = drive_runs(&app, &store, &holder, &firer, &config, stop)
        .instrument(span)
        .await;
    if let Err(e) = store.stop_worker(&holder).await {
        tracing::warn!(error = %e, "could not give back this worker's runs: they go on elsewhere once their leases lapse");
    }
    Ok(report)
}

async fn drive_runs(
    app: &App,
    store: &PostgresStore,
    holder: &Holder,
    firer: &crate::ScheduleFirer,
    config: &WorkerConfig,
    stop: impl Future<Output = ()>,
) -> WorkerReport {
    let mut report = WorkerReport::default();
    let mut driving: HashMap<StreamId, Driving> = HashMap::new();
    let mut tasks: JoinSet<(Lease, Result<RunOutcome, RuntimeError>)> = JoinSet::new();
    let mut wakeups = store.runnable_wakeups();
    let mut renewal = tokio::time::interval(config.renew_every);
    renewal.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The last renewal the database confirmed, by this process's monotonic clock.
    let mut renewed = Instant::now();
    let mut stop = std::pin::pin!(stop);
    // When to look at the schedules next: when the next is due, and at least every
    // second (a schedule made or unpaused meanwhile), not at every wake-up.
    let mut schedules_at = Instant::now();
    loop {
        // Schedules due: fired by whichever worker claims each (docs/schedules.md), their
        // runs queued for any worker, this one included.
        if Instant::now() >= schedules_at {
            let due = fire_schedules(app, firer).await;
            schedules_at = Instant::now()
                + due
                    .unwrap_or(Duration::from_secs(1))
                    .clamp(Duration::from_millis(10), Duration::from_secs(1));
        }
        let schedule_due = schedules_at.saturating_duration_since(Instant::now());
        let free = config.concurrency.saturating_sub(driving.len());
        if free > 0 {
            match store
                .claim(holder, free, config.lease, config.priority_aging)
                .await
            {
                Ok(leases) => {
                    for lease in leases {
                        report.claimed += 1;
                        let app = app.clone();
                        let run = RunId::from(lease.stream.as_str());
                        let claimed = lease.clone();
                        let span =
                            tracing::info_span!("claimed_run", run = %run, epoch = lease.epoch);
                        let task = tasks.spawn(
                            async move { (claimed, app.resume(&run).await) }.instrument(span),
                        );
                        driving.insert(lease.stream.clone(), Driving { lease, task });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "could not claim runs"),
            }
        }
        // A run given back on a timer is claimed when it falls due, not at the next renewal.
        let next_look = match store.next_due_in().await {
            // At least a moment: a run due now that this claim skipped (another worker
            // was claiming it) is looked for again, not spun on.
            Ok(Some(due)) if free > 0 => due.clamp(Duration::from_millis(10), config.renew_every),
            _ => config.renew_every,
        };
        let next_look = next_look.min(schedule_due.max(Duration::from_millis(10)));
        tokio::select! {
            () = &mut stop => break,
            _ = renewal.tick() => {
                let held: Vec<Lease> = driving.values().map(|d| d.lease.clone()).collect();
                match store.renew(holder, &held, config.lease).await {
                    Ok(lost) => {
                        renewed = Instant::now();
                        for lease in lost {
                            if let Some(d) = driving.remove(&lease.stream) {
                                d.task.abort();
                                report.lost += 1;
                                tracing::warn!(run = %lease.stream, "another worker claimed this run: no longer driving it");
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "could not renew leases");
                        if renewed.elapsed() >= config.lease {
                            // Others may claim these runs now: stop before they do.
                            for (_, d) in driving.drain() {
                                d.task.abort();
                                report.lost += 1;
                            }
                        }
                    }
                }
            }
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                let Ok((lease, outcome)) = done else { continue };
                if driving.remove(&lease.stream).is_none() {
                    continue;
                }
                settle(store, holder, &lease, outcome, &mut report).await;
            }
            _ = wakeups.changed() => {}
            () = tokio::time::sleep(next_look) => {}
        }
    }
    tasks.abort_all();
    report
}

/// Fires the schedules due and queues the runs they started; how long until the next is
/// due, if any is.
async fn fire_schedules(app: &App, firer: &crate::ScheduleFirer) -> Option<Duration> {
    match firer.fire_due().await {
        Ok(fired) => {
            for (name, e) in &fired.failed {
                tracing::warn!(schedule = %name, "not fired: {e}");
            }
            for recorded in fired.started {
                let run = recorded.state().run_id().cloned().unwrap_or_default();
                if let Err(e) = app.hand_on(recorded).await {
                    tracing::warn!(run = %run, "a scheduled run was recorded but not queued: {e}");
                }
            }
            // Started by a firing cut short (a worker that died before queueing them).
            for run in fired.unfinished {
                if let Err(e) = app.queue(&run).await {
                    tracing::warn!(run = %run, "a scheduled run was recorded but not queued: {e}");
                }
            }
        }
        Err(e) => tracing::warn!("schedules not read: {e}"),
    }
    let now = app.runtime().now_ms();
    match firer.next_due_ms(now).await {
        Ok(Some(at)) => Some(Duration::from_millis(
            u64::try_from(at.saturating_sub(now)).unwrap_or(0),
        )),
        _ => None,
    }
}

/// Gives a driven run's lease back: waiting for a person or finished, nobody needs to
/// claim it; waiting on a timer, it is claimable once the timer is due; a drive that
/// failed leaves it for a person to look at.
async fn settle(
    store: &PostgresStore,
    holder: &Holder,
    lease: &Lease,
    outcome: Result<RunOutcome, RuntimeError>,
    report: &mut WorkerReport,
) {
    let mut due = None;
    let runnable = match outcome {
        // Waiting on a timer: given back with its due time, claimable from then on.
        Ok(outcome) if outcome.state.waits_until_ms().is_some() => {
            report.settled += 1;
            due = outcome.state.waits_until_ms();
            false
        }
        // Paused, or waiting for an outside event: nothing to drive until a person
        // unpauses it or the event is sent (either queues it again).
        Ok(outcome)
            if outcome.state.paused().is_some()
                || outcome.state.next_step() == NextStep::WaitForSignal =>
        {
            report.settled += 1;
            false
        }
        Ok(outcome) => {
            report.settled += 1;
            outcome.state.status() == RunStatus::Running
        }
        Err(RuntimeError::Store(StoreError::Fenced { .. })) => {
            report.lost += 1;
            tracing::warn!(run = %lease.stream, "another worker claimed this run: no longer driving it");
            return;
        }
        // The database failed under the drive (restarted, unreachable for a while), or
        // something was recorded in the run meanwhile (a person's decision, a cancel, from
        // another process): the run is queued again for whichever worker reaches it next,
        // which reads it anew.
        Err(
            e @ (RuntimeError::Store(StoreError::Backend { .. }) | RuntimeError::Conflict { .. }),
        ) => {
            report.failed += 1;
            tracing::warn!(run = %lease.stream, error = %e, "the drive stopped short; the run is queued again");
            true
        }
        Err(e) => {
            report.failed += 1;
            tracing::error!(run = %lease.stream, error = %e, "driving the run failed; it waits until it is queued again (docket resume)");
            false
        }
    };
    if let Err(e) = store.release(holder, lease, runnable, due).await {
        tracing::warn!(run = %lease.stream, error = %e, "could not give the lease back: it lapses by itself");
    }
}
