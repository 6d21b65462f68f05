-- A claimed run is no longer waiting: `runnable` turns false when a worker claims it, and
-- true again when something outside asks for another drive while it is held (a person's
-- decision, a resume); giving the lease back keeps that request instead of dropping it.
-- A lease that lapsed is claimable whatever `runnable` says: the worker that held it left
-- its run behind. This index finds those without reading every run's row.
CREATE INDEX docket_leases_lapsed ON docket_leases (expires_at) WHERE holder IS NOT NULL;
UPDATE docket_leases SET runnable = false WHERE holder IS NOT NULL;
