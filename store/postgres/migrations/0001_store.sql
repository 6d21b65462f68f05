-- docket's event log (docs/postgres.md, "Tables"). Every hash and Merkle leaf is computed
-- by docket before it reaches the database, so a run's hashes do not depend on the backend.

-- One row per stream: its latest event. Appends lock the rows of the streams they extend.
CREATE TABLE docket_streams (
    id   text   PRIMARY KEY,
    seq  bigint NOT NULL CHECK (seq > 0),
    head bytea  NOT NULL CHECK (length(head) = 32)
);

-- Every event: `canonical body ‖ prev ‖ hash` as the embedded log's records hold it
-- (store/FORMAT.md), and its RFC 9162 leaf hash. Never updated, never deleted. `epoch`
-- is the claim the appending worker held (NULL for a process that holds none): outside
-- the hashed record, for operators and tests to see who appended what.
CREATE TABLE docket_events (
    stream text   NOT NULL,
    seq    bigint NOT NULL CHECK (seq > 0),
    record bytea  NOT NULL,
    leaf   bytea  NOT NULL CHECK (length(leaf) = 32),
    epoch  bigint,
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

-- A group of appends in one statement (one round trip, one implicit transaction): each
-- append checked in order against its stream's head and, for a worker, its claim, under
-- the rows' locks; the accepted ones written with their events, blobs and wake-ups (a
-- refused one leaves nothing, its blobs included).
-- Returns the refused appends (by index from 1): 'conflict' with the stream's version,
-- or 'fenced' with the claim's epoch and holder now.
CREATE FUNCTION docket_append(
    j_stream text[], j_expected int8[], j_prev bytea[], j_holder text[], j_epoch int8[],
    j_last_seq int8[], j_last_hash bytea[],
    e_job int4[], e_seq int8[], e_record bytea[], e_leaf bytea[],
    b_job int4[], b_hash bytea[], b_bytes bytea[]
) RETURNS TABLE (job int4, refusal text, actual int8, claim int8, holder text)
LANGUAGE plpgsql AS $$
DECLARE
    i int4;
    cur_seq int8;
    cur_head bytea;
    l_epoch int8;
    l_holder text;
    accepted int4[] := '{}';
BEGIN
    PERFORM 1 FROM docket_streams s WHERE s.id = ANY(j_stream) ORDER BY s.id FOR UPDATE;
    PERFORM 1 FROM docket_leases l
        WHERE l.stream = ANY(j_stream) AND l.stream IN (
            SELECT u.s FROM unnest(j_stream, j_holder) AS u(s, h) WHERE u.h IS NOT NULL)
        ORDER BY l.stream FOR SHARE;
    FOR i IN 1 .. coalesce(array_length(j_stream, 1), 0) LOOP
        IF j_holder[i] IS NOT NULL THEN
            SELECT l.epoch, l.holder INTO l_epoch, l_holder
                FROM docket_leases l WHERE l.stream = j_stream[i];
            IF l_epoch IS DISTINCT FROM j_epoch[i] OR l_holder IS DISTINCT FROM j_holder[i] THEN
                job := i; refusal := 'fenced'; actual := NULL;
                claim := coalesce(l_epoch, 0); holder := l_holder;
                RETURN NEXT;
                CONTINUE;
            END IF;
        END IF;
        SELECT s.seq, s.head INTO cur_seq, cur_head FROM docket_streams s WHERE s.id = j_stream[i];
        IF coalesce(cur_seq, 0) <> j_expected[i]
           OR (cur_seq IS NOT NULL AND cur_head <> j_prev[i]) THEN
            job := i; refusal := 'conflict'; actual := coalesce(cur_seq, 0);
            claim := NULL; holder := NULL;
            RETURN NEXT;
            CONTINUE;
        END IF;
        INSERT INTO docket_streams (id, seq, head) VALUES (j_stream[i], j_last_seq[i], j_last_hash[i])
            ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, head = excluded.head;
        PERFORM pg_notify('docket_events', j_stream[i]);
        accepted := accepted || i;
    END LOOP;
    IF cardinality(accepted) > 0 THEN
        INSERT INTO docket_blobs (hash, bytes)
            SELECT DISTINCT ON (t.h) t.h, t.b FROM unnest(b_job, b_hash, b_bytes) AS t(j, h, b)
            WHERE t.j = ANY(accepted)
            ON CONFLICT DO NOTHING;
        INSERT INTO docket_events (stream, seq, record, leaf, epoch)
            SELECT j_stream[t.j], t.s, t.r, t.l, j_epoch[t.j]
            FROM unnest(e_job, e_seq, e_record, e_leaf) AS t(j, s, r, l)
            WHERE t.j = ANY(accepted);
    END IF;
END
$$;
