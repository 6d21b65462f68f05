-- docket's event log (docs/postgres.md, "Tables"). Every hash and Merkle leaf is computed
-- by docket before it reaches the database, so a run's hashes do not depend on the backend.

-- One row per stream: its latest event. Appends lock the rows of the streams they extend.
CREATE TABLE docket_streams (
    id   text   PRIMARY KEY,
    seq  bigint NOT NULL CHECK (seq > 0),
    head bytea  NOT NULL CHECK (length(head) = 32)
);

-- Every event: `canonical body ‖ prev ‖ hash` as the embedded log's records hold it
-- (store/FORMAT.md), and its RFC 9162 leaf hash. Never updated, never deleted.
CREATE TABLE docket_events (
    stream text   NOT NULL,
    seq    bigint NOT NULL CHECK (seq > 0),
    record bytea  NOT NULL,
    leaf   bytea  NOT NULL CHECK (length(leaf) = 32),
    PRIMARY KEY (stream, seq)
);

-- Content the events refer to by BLAKE3 hash (large payloads, a bundle's files).
CREATE TABLE docket_blobs (
    hash  bytea PRIMARY KEY CHECK (length(hash) = 32),
    bytes bytea NOT NULL
);

-- Folded run states: a cache of the log, tied to the hash of the event they fold up to.
CREATE TABLE docket_snapshots (
    stream     text   NOT NULL,
    seq        bigint NOT NULL,
    event_hash bytea  NOT NULL,
    state      bytea  NOT NULL,
    PRIMARY KEY (stream, seq)
);

-- Callers' digests of streams (the run list's summaries): a cache, one per stream.
CREATE TABLE docket_digests (
    stream     text   PRIMARY KEY,
    seq        bigint NOT NULL,
    event_hash bytea  NOT NULL,
    bytes      bytea  NOT NULL
);

-- Values the events commit to by digest, outside the hashed records so they can be
-- erased; an erased one keeps its tombstone (who, when, why) in its place.
CREATE TABLE docket_disclosures (
    stream    text  NOT NULL,
    digest    bytea NOT NULL CHECK (length(digest) = 32),
    bytes     bytea,
    tombstone bytea,
    PRIMARY KEY (stream, digest),
    CHECK ((bytes IS NULL) <> (tombstone IS NULL))
);

-- Who drives each run that workers drive: a lease with a fencing epoch. `epoch` grows
-- with every claim; an append from a process that holds an older epoch is refused in the
-- same transaction that checks the stream's version. Times are the database's clock.
CREATE TABLE docket_leases (
    stream     text        PRIMARY KEY,
    -- Waiting to be driven (a new run, a decided ticket, a worker that left it).
    runnable   boolean     NOT NULL DEFAULT true,
    epoch      bigint      NOT NULL DEFAULT 0,
    holder     text,
    expires_at timestamptz,
    queued_at  timestamptz NOT NULL DEFAULT now(),
    CHECK ((holder IS NULL) = (expires_at IS NULL))
);
CREATE INDEX docket_leases_claimable ON docket_leases (queued_at) WHERE runnable;

-- The workers alive or last seen: one row each, renewed with their leases.
CREATE TABLE docket_workers (
    holder     text        PRIMARY KEY,
    name       text        NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    renewed_at timestamptz NOT NULL DEFAULT now(),
    stopped_at timestamptz
);
