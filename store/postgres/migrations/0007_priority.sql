-- Runs are claimed by their priority (docs/postgres.md#claim-order): a run's priority is
-- the `[defaults] priority` of the bundle it was started with, 0 HIGH, 1 NORMAL, 2 LOW,
-- written when it is queued. Runs queued before this version are NORMAL. A claim reads
-- the queue one priority at a time, each in the order the runs became ready, so this
-- index takes the place of the one by `queued_at` alone.
ALTER TABLE docket_leases ADD COLUMN priority smallint NOT NULL DEFAULT 1
    CHECK (priority BETWEEN 0 AND 2);
CREATE INDEX docket_leases_claimable_by_priority ON docket_leases (priority, queued_at)
    WHERE runnable;
DROP INDEX docket_leases_claimable;
