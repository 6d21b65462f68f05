-- Schedules (docs/schedules.md): runs of a workflow started on a cron expression or an
-- interval by the workers, exactly once per instant across them.

-- Every schedule, removed ones included (a name is never reused): `body` is the schedule
-- as docket writes it (JSON, docs/schedules.md#the-format), `version` counts its changes
-- (each change is made against the version read), `next_at_ms` and `active` find the
-- schedules due, `queued` those holding a firing until their last run ends. A worker
-- firing a schedule claims it until `firing_until` (by the database's clock): another
-- worker fires it only once that claim lapsed or was ended.
CREATE TABLE docket_schedules (
    name         text        PRIMARY KEY CHECK (name <> ''),
    body         text        NOT NULL,
    version      bigint      NOT NULL,
    next_at_ms   bigint      NOT NULL,
    active       boolean     NOT NULL,
    queued       boolean     NOT NULL,
    firing_by    text,
    firing_until timestamptz
);
CREATE INDEX docket_schedules_due ON docket_schedules (next_at_ms) WHERE active;

-- Every firing: the instant due, what became of it, the run it started (in `body`, JSON).
-- A firing done twice (a worker that died before moving the schedule on) is recorded
-- once. Never updated, never deleted.
CREATE TABLE docket_schedule_firings (
    id          bigint      GENERATED ALWAYS AS IDENTITY,
    schedule    text        NOT NULL,
    due_at_ms   bigint      NOT NULL,
    outcome     text        NOT NULL,
    body        text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule, due_at_ms, outcome)
);
