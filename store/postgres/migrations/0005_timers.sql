-- A run waiting on a timer is given back by its worker with the time the timer is due:
-- not queued, but claimable from then on, by whichever worker looks first. A claim clears
-- it; a drive that ends at a timer again sets it again. This index finds the runs due
-- without reading every run's row.
ALTER TABLE docket_leases ADD COLUMN due_at timestamptz;
CREATE INDEX docket_leases_due ON docket_leases (due_at) WHERE due_at IS NOT NULL;
