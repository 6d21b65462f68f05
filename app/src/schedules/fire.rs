//! Firing the schedules due: for each, the instants due under its catch-up rule, its
//! overlap rule against the run it started last, the runs started with ids made of its
//! name and the instant, the firings recorded, and the schedule moved on to its next
//! instant against the version it was read at. Done twice (a crash before the schedule
//! moved on, a second worker), a firing finds its run recorded already and starts none.

use std::path::Path;

use docket_decider::{RunId, Scheduled};
use docket_runtime::{Recorded, RuntimeError, Workflow};

use super::{Firing, Outcome, Overlap, Schedule, Schedules, SchedulesError};
use crate::{App, Store};

/// How long a worker holds a schedule it fires against other workers (ms): a worker that
/// dies while firing leaves it to another after this.
const HOLD_MS: i64 = 30_000;

/// What one round of firing did.
#[derive(Default)]
pub struct Fired {
    /// The runs it recorded, to drive (or queue for workers).
    pub started: Vec<Recorded<Store>>,
    /// Runs a firing done before had started (it was cut short: a crash, a worker that
    /// died) and found recorded, not finished: to drive on (or queue), as `docket resume`
    /// would, since the process that started them may not have driven them.
    pub unfinished: Vec<RunId>,
    /// The firings it recorded.
    pub firings: Vec<Firing>,
    /// Schedules that could not be fired, each with why (logged by the caller; tried
    /// again at the next round).
    pub failed: Vec<(String, SchedulesError)>,
}

/// Fires the schedules of one store through one application.
#[derive(Clone)]
pub struct ScheduleFirer {
    app: App,
    schedules: Schedules,
    holder: String,
    /// Where workflows may be read from, when the firer serves others (`docket serve`'s
    /// root): a schedule's workflow is read under it at every firing, as when it was made.
    sources: Option<docket_runtime::SourceRoot>,
}

impl ScheduleFirer {
    /// Fires the schedules of `app`'s store (its data directory's file, or the database),
    /// as `holder` (a worker's name, in the database's claims).
    #[must_use]
    pub fn new(app: App, holder: impl Into<String>) -> ScheduleFirer {
        let schedules = Schedules::of(app.runtime().store(), app.data());
        ScheduleFirer {
            app,
            schedules,
            holder: holder.into(),
            sources: None,
        }
    }

    /// Reads every schedule's workflow (and its bundle) under `sources` at each firing,
    /// so a file swapped for a link after the schedule was made is refused, not read.
    #[must_use]
    pub fn reading_under(mut self, sources: docket_runtime::SourceRoot) -> ScheduleFirer {
        self.sources = Some(sources);
        self
    }

    /// The schedules fired.
    #[must_use]
    pub fn schedules(&self) -> &Schedules {
        &self.schedules
    }

    /// When the next schedule is due (ms since the Unix epoch), if any is active; a
    /// schedule holding a queued firing counts as due now.
    ///
    /// # Errors
    /// The file or the database.
    pub async fn next_due_ms(&self, now_ms: i64) -> Result<Option<i64>, SchedulesError> {
        Ok(self
            .schedules
            .list()
            .await?
            .iter()
            .filter(|s| s.active())
            .map(|s| {
                if s.queued_at_ms.is_some() {
                    now_ms
                } else {
                    s.next_at_ms
                }
            })
            .min())
    }

    /// Fires every schedule due by the runtime's clock now.
    ///
    /// # Errors
    /// The schedules could not be read (each schedule's own failure is in
    /// [`Fired::failed`]).
    pub async fn fire_due(&self) -> Result<Fired, SchedulesError> {
        let now = self.app.runtime().now_ms();
        let due = self.schedules.claim_due(now, &self.holder, HOLD_MS).await?;
        let mut fired = Fired::default();
        for schedule in due {
            let name = schedule.name.clone();
            if let Err(e) = self.fire(schedule, &mut fired).await {
                fired.failed.push((name, e));
            }
        }
        Ok(fired)
    }

    /// Whether `run` is still going (not finished); a run that cannot be read counts as
    /// ended.
    async fn going(&self, run: Option<&str>) -> Option<String> {
        let run = run?;
        let state = self.app.runtime().state(&RunId::from(run)).await.ok()?;
        (!state.status().is_final()).then(|| run.to_owned())
    }

    /// Whether the run of `id` is recorded; one still running (neither finished nor
    /// waiting for a person nor paused) is added to [`Fired::unfinished`].
    async fn recorded(&self, id: &str, fired: &mut Fired) -> bool {
        let run = RunId::from(id);
        if self.app.runtime().requested(&run).await.is_err() {
            return false;
        }
        if let Ok(state) = self.app.runtime().state(&run).await
            && state.status() == docket_decider::RunStatus::Running
            && state.paused().is_none()
            && !fired.unfinished.contains(&run)
        {
            fired.unfinished.push(run);
        }
        true
    }

    async fn fire(&self, mut s: Schedule, fired: &mut Fired) -> Result<(), SchedulesError> {
        let now = self.app.runtime().now_ms();
        let mut firings = Vec::new();
        let name = s.name.clone();
        let firing = |due: i64, outcome: Outcome| Firing {
            schedule: name.clone(),
            due_at_ms: due,
            fired_at_ms: now,
            late_ms: now.saturating_sub(due),
            fired_by: self.holder.clone(),
            outcome,
            run_id: None,
            previous_run: None,
            missed_until_ms: None,
            missed_count: None,
            error: None,
        };
        let mut changed = false;
        // A firing queued behind a run that has ended since.
        if let Some(queued) = s.queued_at_ms
            && self.going(s.last_run.as_deref()).await.is_none()
        {
            let mut f = firing(queued, Outcome::Started);
            self.start(&s, queued, &mut f, fired).await;
            if f.outcome == Outcome::Started {
                s.last_run.clone_from(&f.run_id);
            }
            firings.push(f);
            s.queued_at_ms = None;
            changed = true;
        }
        if let Some(plan) = s.plan(now)? {
            changed = true;
            if let Some(older) = plan.older {
                let mut f = firing(older.from_ms, Outcome::Missed);
                f.missed_until_ms = Some(older.until_ms);
                f.missed_count = Some(older.count);
                firings.push(f);
            }
            for &due in &plan.missed {
                firings.push(firing(due, Outcome::Missed));
            }
            // Started already by a firing cut short (its run is recorded): counted as
            // started, never started again, whatever the run going.
            let mut to_start = Vec::new();
            for &due in &plan.start {
                if self.recorded(&s.run_id(due), fired).await {
                    let mut f = firing(due, Outcome::Started);
                    f.run_id = Some(s.run_id(due));
                    s.last_run.clone_from(&f.run_id);
                    firings.push(f);
                } else {
                    to_start.push(due);
                }
            }
            let previous = self.going(s.last_run.as_deref()).await;
            let mut cancelled = None;
            if let (Some(previous), false) = (&previous, to_start.is_empty()) {
                match s.overlap {
                    Overlap::Skip => {
                        for due in to_start.drain(..) {
                            let mut f = firing(due, Outcome::Skipped);
                            f.previous_run = Some(previous.clone());
                            firings.push(f);
                        }
                    }
                    Overlap::QueueOne => {
                        // One firing waits: the latest; any it replaces is skipped.
                        let latest = to_start.pop();
                        let replaced = s.queued_at_ms.take().into_iter();
                        for due in to_start.drain(..).chain(replaced) {
                            let mut f = firing(due, Outcome::Skipped);
                            f.previous_run = Some(previous.clone());
                            firings.push(f);
                        }
                        if let Some(latest) = latest {
                            let mut f = firing(latest, Outcome::Queued);
                            f.previous_run = Some(previous.clone());
                            firings.push(f);
                            s.queued_at_ms = Some(latest);
                        }
                    }
                    Overlap::CancelPrevious => {
                        let by = format!("schedule {}", s.name);
                        let reason = "the schedule fired again while this run was still going (overlap cancel-previous)";
                        match self
                            .app
                            .cancel(&RunId::from(previous.as_str()), &by, reason)
                            .await
                        {
                            Ok(_) => {}
                            // Finished meanwhile, or cancelled by a firing done twice.
                            Err(e) => tracing::info!(run = %previous, "not cancelled: {e}"),
                        }
                        cancelled = Some(previous.clone());
                    }
                }
            }
            for due in to_start {
                let mut f = firing(due, Outcome::Started);
                if let Some(previous) = cancelled.take() {
                    f.outcome = Outcome::StartedAfterCancelling;
                    f.previous_run = Some(previous);
                }
                self.start(&s, due, &mut f, fired).await;
                if f.run_id.is_some() && f.error.is_none() {
                    s.last_run.clone_from(&f.run_id);
                }
                firings.push(f);
            }
            s.next_at_ms = plan.next_at_ms;
        }
        if !changed {
            // Holding a queued firing behind a run still going: nothing to write.
            return self.schedules.release(&s.name, &self.holder).await;
        }
        self.schedules.record(firings.clone()).await?;
        fired.firings.extend(firings);
        // Moved on against the version read; lost to a change made meanwhile (paused,
        // removed, another worker), the next round reads it anew, and what this one
        // started is found recorded then.
        if !self.schedules.replace(&s, true).await? {
            tracing::info!(schedule = %s.name, "changed while it fired; read again at the next round");
        }
        Ok(())
    }

    /// Starts the run of the firing due at `due`, into `f` (its run id, or why none).
    async fn start(&self, s: &Schedule, due: i64, f: &mut Firing, fired: &mut Fired) {
        let id = s.run_id(due);
        f.run_id = Some(id.clone());
        let run = match RunId::parse(&id) {
            Ok(run) => run,
            Err(e) => return failed(f, e.to_string()),
        };
        let workflow = s.workflow.clone();
        let sources = self.sources.clone();
        let loaded = tokio::task::spawn_blocking(move || match sources {
            Some(root) => Workflow::load_within(Path::new(&workflow), &root),
            None => Workflow::load(Path::new(&workflow)),
        })
        .await;
        let workflow = match loaded {
            Ok(Ok(w)) => w,
            Ok(Err(e)) => return failed(f, format!("workflow {}: {e}", s.workflow)),
            Err(e) => return failed(f, format!("workflow {}: {e}", s.workflow)),
        };
        let problems = self.app.runtime().unregistered(&workflow.spec);
        if !problems.is_empty() {
            let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
            return failed(f, format!("workflow {}: {}", s.workflow, text.join("; ")));
        }
        let scheduled = Scheduled {
            schedule: s.name.clone(),
            made_by: s.made_by.clone(),
            due_at_ms: due,
        };
        match self
            .app
            .runtime()
            .record_scheduled_start(&workflow, s.input.clone(), run, scheduled)
            .await
        {
            Ok(recorded) => fired.started.push(recorded),
            // Started by this firing done before (a crash, another worker): not again.
            Err(RuntimeError::RunExists(_) | RuntimeError::Conflict { .. }) => {
                self.recorded(&id, fired).await;
            }
            Err(e) => failed(f, e.to_string()),
        }
    }
}

fn failed(f: &mut Firing, error: String) {
    f.outcome = Outcome::Failed;
    f.error = Some(error);
}
