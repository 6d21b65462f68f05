-- What a data directory keeps beside its log, kept in the database so that every worker
-- and command naming the database sees the same (docs/postgres.md, "Tables").

-- The kill switches engaged now (`global` or a lane): who engaged each, when, why. A
-- flip is one statement that changes this table and appends to the history, so readers
-- see a switch and its history move together; an unreadable table stops every effect.
CREATE TABLE docket_kill_switches (
    switch text   PRIMARY KEY CHECK (switch <> ''),
    by     text   NOT NULL,
    at_ms  bigint NOT NULL,
    reason text   NOT NULL
);

-- Every flip, in the order the database took them: engaged or released, who, when, why,
-- and whether it changed anything (engaging an engaged switch does not). Never updated,
-- never deleted.
CREATE TABLE docket_kill_switch_flips (
    id      bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    switch  text    NOT NULL,
    engaged boolean NOT NULL,
    by      text    NOT NULL,
    at_ms   bigint  NOT NULL,
    reason  text    NOT NULL,
    changed boolean NOT NULL
);

-- The public halves of the keys that sealed runs in this database, as
-- `NAME+KEYID+BASE64` verifier keys (docs/checkpoints.md), current and retired: any
-- machine verifies the seals with them, without the sealing machine's key files. The
-- private halves never reach the database.
CREATE TABLE docket_keys (
    verifier    text        PRIMARY KEY,
    name        text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    -- When a sealing process first said the key was replaced; NULL while it is current.
    retired_at  timestamptz
);

-- The signed checkpoints of the log of run heads (`_heads`), one per size it was signed
-- at: what `<data>/checkpoints/heads.note` holds for a data directory, kept whole so an
-- auditor can take any of them.
CREATE TABLE docket_heads_checkpoints (
    size      bigint      PRIMARY KEY CHECK (size > 0),
    note      text        NOT NULL,
    signed_at timestamptz NOT NULL DEFAULT now()
);
