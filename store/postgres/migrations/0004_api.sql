-- docket serve over PostgreSQL (docs/postgres.md, "Serving"): what the
-- API keeps outside the event log, in the database, so that every API server over one
-- database accepts the same tokens and sessions and writes one request log. A server
-- keeps no state of its own and can sit behind a load balancer.

-- API tokens: only the SHA-256 of each token's text is kept, as in `<data>/api/tokens.json`.
CREATE TABLE docket_api_tokens (
    name       text        PRIMARY KEY,
    role       text        NOT NULL,
    sha256     text        NOT NULL UNIQUE,
    created_s  bigint      NOT NULL
);

-- Browser sessions: the SHA-256 of the session id (the cookie's value is never stored),
-- the token it was opened with, and its expiry by the database's clock. A revoked token's
-- sessions end with it.
CREATE TABLE docket_api_sessions (
    id_sha256    text        PRIMARY KEY,
    token_sha256 text        NOT NULL REFERENCES docket_api_tokens (sha256) ON DELETE CASCADE,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX docket_api_sessions_expiry ON docket_api_sessions (expires_at);

-- The request log: one row per mutating request once it is answered, from any server.
-- Append-only, as `<data>/api/requests.jsonl`.
CREATE TABLE docket_api_requests (
    id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at_ms   bigint      NOT NULL,
    by_name text        NOT NULL,
    role    text        NOT NULL,
    method  text        NOT NULL,
    path    text        NOT NULL,
    status  integer     NOT NULL
);
