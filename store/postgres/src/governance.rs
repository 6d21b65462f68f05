//! What a data directory keeps beside its log, kept in the database instead so every
//! process naming it sees the same (docs/postgres.md, "Tables"): the kill switches and
//! their history, the verifier keys of the processes that seal runs, and the signed
//! checkpoints of the log of run heads. Plain rows: the runtime and the evidence crate
//! give them their meaning (`docket_app` joins the two).

use crate::error::PgError;
use crate::store::PostgresStore;

/// The advisory lock kill-switch flips take in turn ("docket-ks" in ASCII).
const FLIP_LOCK: i64 = 0x646f_636b_6574_2d6b;

/// A kill switch engaged now, as `docket_kill_switches` holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngagedSwitch {
    /// `global` or a lane.
    pub switch: String,
    pub by: String,
    /// Milliseconds since the Unix epoch, by the database's clock.
    pub at_ms: i64,
    pub reason: String,
}

/// One flip, as `docket_kill_switch_flips` holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchFlip {
    pub switch: String,
    /// Engaged (`true`) or released.
    pub on: bool,
    pub by: String,
    /// Milliseconds since the Unix epoch, by the database's clock.
    pub at_ms: i64,
    pub reason: String,
    /// Whether it changed anything (engaging an engaged switch does not).
    pub changed: bool,
}

/// A verifier key recorded by a process that sealed runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRow {
    /// `NAME+KEYID+BASE64`.
    pub verifier: String,
    pub retired: bool,
}

/// A signed checkpoint of the log of run heads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeadsCheckpointRow {
    pub size: u64,
    /// The signed note.
    pub note: String,
}

impl PostgresStore {
    /// The switches engaged now, by name. An error here must stop effects (the runtime
    /// counts every switch engaged when it cannot read them).
    pub async fn kill_switches(&self) -> Result<Vec<EngagedSwitch>, PgError> {
        let doing = "reading the kill switches";
        let client = self.client(doing).await?;
        let rows = client
            .query(
                "SELECT switch, by, at_ms, reason FROM docket_kill_switches ORDER BY switch",
                &[],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(rows
            .iter()
            .map(|r| EngagedSwitch {
                switch: r.get(0),
                by: r.get(1),
                at_ms: r.get(2),
                reason: r.get(3),
            })
            .collect())
    }

    /// Every flip so far, oldest first.
    pub async fn kill_switch_history(&self) -> Result<Vec<SwitchFlip>, PgError> {
        let doing = "reading the kill switches' history";
        let client = self.client(doing).await?;
        let rows = client
            .query(
                "SELECT switch, engaged, by, at_ms, reason, changed
                 FROM docket_kill_switch_flips ORDER BY id",
                &[],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(rows
            .iter()
            .map(|r| SwitchFlip {
                switch: r.get(0),
                on: r.get(1),
                by: r.get(2),
                at_ms: r.get(3),
                reason: r.get(4),
                changed: r.get(5),
            })
            .collect())
    }

    /// Engages (`on`) or releases `switch` and appends the flip to the history, in one
    /// transaction: the switch and its history never disagree. Flips take one advisory
    /// lock in turn (they are rare), so concurrent flips are all recorded, each seeing the
    /// one before, and the history's order is the order they took effect. The time is the
    /// database's, so flips from machines with different clocks order as they happened.
    /// The name is checked by the caller.
    pub async fn flip_kill_switch(
        &self,
        switch: &str,
        on: bool,
        by: &str,
        reason: &str,
    ) -> Result<SwitchFlip, PgError> {
        let doing = format!(
            "{} the kill switch {switch}",
            if on { "engaging" } else { "releasing" }
        );
        let change = if on {
            "INSERT INTO docket_kill_switches (switch, by, at_ms, reason)
             SELECT $1, $2, at_ms, $3 FROM now_ms
             ON CONFLICT (switch) DO NOTHING RETURNING 1"
        } else {
            "DELETE FROM docket_kill_switches WHERE switch = $1 RETURNING 1"
        };
        let statement = format!(
            "WITH now_ms AS (
                 SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS at_ms
             ),
             change AS ({change})
             INSERT INTO docket_kill_switch_flips (switch, engaged, by, at_ms, reason, changed)
             SELECT $1, $4, $2, at_ms, $3, EXISTS (SELECT 1 FROM change) FROM now_ms
             RETURNING at_ms, changed"
        );
        let mut client = self.client(&doing).await?;
        let tx = client.transaction().await.map_err(self.db(&doing))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&FLIP_LOCK])
            .await
            .map_err(self.db(&doing))?;
        let row = tx
            .query_one(&statement, &[&switch, &by, &reason, &on])
            .await
            .map_err(self.db(&doing))?;
        tx.commit().await.map_err(self.db(&doing))?;
        Ok(SwitchFlip {
            switch: switch.to_owned(),
            on,
            by: by.to_owned(),
            at_ms: row.get(0),
            reason: reason.to_owned(),
            changed: row.get(1),
        })
    }

    /// Records the verifier keys of a process that seals: its current key, if it has one,
    /// and the keys it retired (marked retired, never removed: seals made with them still
    /// verify).
    pub async fn record_keys(
        &self,
        current: Option<&str>,
        retired: &[String],
    ) -> Result<(), PgError> {
        let doing = "recording the verifier keys";
        let client = self.client(doing).await?;
        let name = |verifier: &str| verifier.split('+').next().unwrap_or_default().to_owned();
        if let Some(current) = current {
            client
                .execute(
                    "INSERT INTO docket_keys (verifier, name) VALUES ($1, $2)
                     ON CONFLICT (verifier) DO NOTHING",
                    &[&current, &name(current)],
                )
                .await
                .map_err(self.db(doing))?;
        }
        for key in retired {
            client
                .execute(
                    "INSERT INTO docket_keys (verifier, name, retired_at) VALUES ($1, $2, now())
                     ON CONFLICT (verifier) DO UPDATE
                     SET retired_at = coalesce(docket_keys.retired_at, now())",
                    &[key, &name(key)],
                )
                .await
                .map_err(self.db(doing))?;
        }
        Ok(())
    }

    /// Every verifier key recorded, current first, each group in the order recorded.
    pub async fn keys(&self) -> Result<Vec<KeyRow>, PgError> {
        let doing = "reading the verifier keys";
        let client = self.client(doing).await?;
        let rows = client
            .query(
                "SELECT verifier, retired_at IS NOT NULL FROM docket_keys
                 ORDER BY retired_at IS NOT NULL, recorded_at, verifier",
                &[],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(rows
            .iter()
            .map(|r| KeyRow {
                verifier: r.get(0),
                retired: r.get(1),
            })
            .collect())
    }

    /// Keeps a signed checkpoint of the log of run heads at `size` (the first one signed at
    /// a size stays: another process signing the same size signs the same tree).
    pub async fn put_heads_checkpoint(&self, size: u64, note: &str) -> Result<bool, PgError> {
        let doing = "keeping the heads checkpoint";
        let client = self.client(doing).await?;
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        let written = client
            .execute(
                "INSERT INTO docket_heads_checkpoints (size, note) VALUES ($1, $2)
                 ON CONFLICT (size) DO NOTHING",
                &[&size, &note],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(written == 1)
    }

    /// The signed checkpoint of the log of run heads at the largest size, if any.
    pub async fn latest_heads_checkpoint(&self) -> Result<Option<HeadsCheckpointRow>, PgError> {
        let doing = "reading the heads checkpoint";
        let client = self.client(doing).await?;
        let row = client
            .query_opt(
                "SELECT size, note FROM docket_heads_checkpoints ORDER BY size DESC LIMIT 1",
                &[],
            )
            .await
            .map_err(self.db(doing))?;
        Ok(row.map(|r| HeadsCheckpointRow {
            size: u64::try_from(r.get::<_, i64>(0)).unwrap_or(0),
            note: r.get(1),
        }))
    }
}
