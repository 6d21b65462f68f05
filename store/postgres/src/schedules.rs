//! Schedules and their firings, kept in the database so that every worker fires the same
//! schedules, each instant once (docs/schedules.md). Plain rows: the application layer
//! (`docket_app::Schedules`) gives them their meaning.

use crate::error::PgError;
use crate::store::PostgresStore;

/// A schedule as `docket_schedules` holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleRow {
    pub name: String,
    /// The schedule (JSON).
    pub body: String,
    /// Its changes so far; a replacement names the version it was read at.
    pub version: i64,
    /// When it is due next, ms since the Unix epoch.
    pub next_at_ms: i64,
    /// Neither paused nor removed.
    pub active: bool,
    /// Holds a firing until its last run ends.
    pub queued: bool,
}

const COLUMNS: &str = "name, body, version, next_at_ms, active, queued";

fn row(r: &tokio_postgres::Row) -> ScheduleRow {
    ScheduleRow {
        name: r.get(0),
        body: r.get(1),
        version: r.get(2),
        next_at_ms: r.get(3),
        active: r.get(4),
        queued: r.get(5),
    }
}

impl PostgresStore {
    /// Every schedule, by name.
    pub async fn schedules(&self) -> Result<Vec<ScheduleRow>, PgError> {
        let doing = "reading the schedules";
        let client = self.client(doing).await?;
        let rows = client
            .query(
                &format!("SELECT {COLUMNS} FROM docket_schedules ORDER BY name"),
                &[],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(rows.iter().map(row).collect())
    }

    /// The schedule `name`, if kept.
    pub async fn schedule(&self, name: &str) -> Result<Option<ScheduleRow>, PgError> {
        let doing = "reading a schedule";
        let client = self.client(doing).await?;
        let found = client
            .query_opt(
                &format!("SELECT {COLUMNS} FROM docket_schedules WHERE name = $1"),
                &[&name],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(found.as_ref().map(row))
    }

    /// Keeps a new schedule; `false` when its name is taken.
    pub async fn insert_schedule(&self, s: &ScheduleRow) -> Result<bool, PgError> {
        let doing = "adding a schedule";
        let client = self.client(doing).await?;
        let n = client
            .execute(
                "INSERT INTO docket_schedules (name, body, version, next_at_ms, active, queued)
                 VALUES ($1, $2, 0, $3, $4, $5) ON CONFLICT (name) DO NOTHING",
                &[&s.name, &s.body, &s.next_at_ms, &s.active, &s.queued],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(n == 1)
    }

    /// Writes `s` as the next version if the row is still at `s.version`; whether it was.
    /// `release` also ends a worker's claim of it.
    pub async fn replace_schedule(&self, s: &ScheduleRow, release: bool) -> Result<bool, PgError> {
        let doing = "changing a schedule";
        let client = self.client(doing).await?;
        let n = client
            .execute(
                "UPDATE docket_schedules
                 SET body = $3, version = version + 1, next_at_ms = $4, active = $5, queued = $6,
                     firing_by = CASE WHEN $7 THEN NULL ELSE firing_by END,
                     firing_until = CASE WHEN $7 THEN NULL ELSE firing_until END
                 WHERE name = $1 AND version = $2",
                &[
                    &s.name,
                    &s.version,
                    &s.body,
                    &s.next_at_ms,
                    &s.active,
                    &s.queued,
                    &release,
                ],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(n == 1)
    }

    /// Ends `holder`'s claim of the schedule `name`, changing nothing else.
    pub async fn release_schedule(&self, name: &str, holder: &str) -> Result<(), PgError> {
        let doing = "giving back a schedule";
        let client = self.client(doing).await?;
        client
            .execute(
                "UPDATE docket_schedules SET firing_by = NULL, firing_until = NULL
                 WHERE name = $1 AND firing_by = $2",
                &[&name, &holder],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(())
    }

    /// Claims, for `hold_ms` by the database's clock, the active schedules due by
    /// `now_ms` or holding a queued firing that no other worker holds; each is claimed by
    /// one worker only.
    pub async fn claim_schedules(
        &self,
        now_ms: i64,
        holder: &str,
        hold_ms: i64,
    ) -> Result<Vec<ScheduleRow>, PgError> {
        let doing = "claiming the schedules due";
        let client = self.client(doing).await?;
        let rows = client
            .query(
                &format!(
                    "UPDATE docket_schedules
                     SET firing_by = $2,
                         firing_until = clock_timestamp() + make_interval(secs => $3::bigint / 1000.0)
                     WHERE name IN (
                         SELECT name FROM docket_schedules
                         WHERE active AND (next_at_ms <= $1 OR queued)
                           AND (firing_until IS NULL OR firing_until < clock_timestamp())
                         FOR UPDATE SKIP LOCKED
                     )
                     RETURNING {COLUMNS}"
                ),
                &[&now_ms, &holder, &hold_ms],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(rows.iter().map(row).collect())
    }

    /// Records firings (schedule, instant due, outcome, the firing as JSON); one recorded
    /// already is kept as it was.
    pub async fn record_firings(
        &self,
        firings: &[(String, i64, String, String)],
    ) -> Result<(), PgError> {
        let doing = "recording schedule firings";
        let mut client = self.client(doing).await?;
        let tx = client.transaction().await.map_err(self.db(doing))?;
        for (schedule, due, outcome, body) in firings {
            tx.execute(
                "INSERT INTO docket_schedule_firings (schedule, due_at_ms, outcome, body)
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                &[schedule, due, outcome, body],
            )
            .await
            .map_err(self.db(doing))?;
        }
        tx.commit().await.map_err(self.db(doing))?;
        Ok(())
    }

    /// The firings (as JSON) of `schedule` (all when `None`), oldest first, the last
    /// `limit`.
    pub async fn firings(
        &self,
        schedule: Option<&str>,
        limit: i64,
    ) -> Result<Vec<String>, PgError> {
        let doing = "reading schedule firings";
        let client = self.client(doing).await?;
        let rows = client
            .query(
                "SELECT body FROM (
                     SELECT id, body FROM docket_schedule_firings
                     WHERE $1::text IS NULL OR schedule = $1
                     ORDER BY id DESC LIMIT $2
                 ) last ORDER BY id",
                &[&schedule, &limit],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}
