//! Every API route, the role it needs and what it does: one table that the router, the
//! role check and the OpenAPI description all read, so none can leave a route out.

use serde_json::{Map, Value, json};

use crate::tokens::Role;

/// What a query parameter or a body field holds, as the handlers take it: the OpenAPI
/// description says the same, so a request valid by the description is one the route
/// reads.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// Any text.
    Text,
    /// Text with something besides spaces (a reason, a role).
    Said,
    /// Any JSON value.
    Json,
    /// A whole number from `min` to `max`.
    Number {
        /// The least.
        min: u64,
        /// The greatest.
        max: u64,
    },
    /// A whole number, possibly negative (a time in ms since the Unix epoch).
    Signed,
    /// `true` or `false`.
    Flag,
    /// One of these words.
    Word(&'static [&'static str]),
    /// A run id: letters, digits, `.`, `_`, `-`, starting with a letter or digit.
    RunId,
    /// A question's option: its number (from 1) or its text.
    Choice,
    /// A list of handoff rules, each an object (seed 001's shape).
    Rules,
}

impl Kind {
    /// Its JSON Schema.
    #[must_use]
    pub fn schema(self) -> Value {
        match self {
            Self::Text => json!({ "type": "string" }),
            Self::Said => json!({ "type": "string", "pattern": "\\S" }),
            Self::Json => json!({}),
            Self::Number { min, max } => {
                json!({ "type": "integer", "minimum": min, "maximum": max })
            }
            Self::Signed => json!({ "type": "integer", "minimum": i64::MIN, "maximum": i64::MAX }),
            Self::Flag => json!({ "type": "boolean" }),
            Self::Word(words) => json!({ "type": "string", "enum": words }),
            Self::RunId => json!({
                "type": "string",
                "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$",
            }),
            Self::Choice => json!({ "oneOf": [
                { "type": "integer", "minimum": 1, "maximum": u32::MAX },
                { "type": "string", "pattern": "\\S" },
            ]}),
            Self::Rules => json!({ "type": "array", "items": { "type": "object" } }),
        }
    }
}

/// A query parameter: its name, what it holds, what it means.
pub type Param = (&'static str, Kind, &'static str);

/// A body field: its name, whether required, what it holds, what it means.
pub type Field = (&'static str, bool, Kind, &'static str);

/// One route of the API.
pub struct Route {
    /// `GET`, `POST`.
    pub method: &'static str,
    /// The path as axum matches it (`/api/runs/{run}`).
    pub path: &'static str,
    /// The least role that may call it.
    pub role: Role,
    /// What it does, one line.
    pub summary: &'static str,
    /// Its query parameters.
    pub query: &'static [Param],
    /// Its JSON body's fields (an object; unknown fields are refused).
    pub body: &'static [Field],
    /// Body fields of which at least one must be given (with something besides spaces,
    /// when text).
    pub at_least_one: &'static [&'static str],
    /// An example of its body (JSON text), for the description and its test.
    pub example: &'static str,
    /// Whether a browser session cookie (`POST /api/session`) may stand for the bearer
    /// token: only reads a browser makes without headers (an `EventSource`, a link).
    pub session: bool,
}

const fn route(
    method: &'static str,
    path: &'static str,
    role: Role,
    summary: &'static str,
) -> Route {
    Route {
        method,
        path,
        role,
        summary,
        query: &[],
        body: &[],
        at_least_one: &[],
        example: "",
        session: false,
    }
}

/// A sequence number.
const SEQ: Kind = Kind::Number {
    min: 0,
    max: u64::MAX,
};

use Role::{Admin, Approver, Operator, Viewer};

/// The API (docs/api.md lists the same routes, with examples).
pub const ROUTES: &[Route] = &[
    route(
        "GET",
        "/api/openapi.json",
        Viewer,
        "This description (OpenAPI 3.1).",
    ),
    route(
        "POST",
        "/api/session",
        Viewer,
        "Exchange the bearer token for a browser session: an HttpOnly, SameSite=Strict cookie that routes marked x-docket-session (the event stream, exports) accept; answers the token's name and role.",
    ),
    route(
        "DELETE",
        "/api/session",
        Viewer,
        "End the request's browser session and clear its cookie.",
    ),
    route(
        "GET",
        "/api/tickets",
        Viewer,
        "Every open ticket across runs, oldest run first, with what it asks.",
    ),
    route(
        "GET",
        "/api/workflows",
        Operator,
        "The workflow files under the server's working directory that POST /api/runs can start, each with its default input and the JSON inputs beside it.",
    ),
    Route {
        query: &[
            (
                "status",
                Kind::Word(&[
                    "running",
                    "interrupted",
                    "waiting_for_human",
                    "completed",
                    "blocked",
                    "failed",
                    "cancelled",
                ]),
                "running, interrupted, waiting_for_human, completed, blocked, failed or cancelled",
            ),
            ("workflow", Kind::Text, "the workflow's name"),
            (
                "started_after",
                Kind::Signed,
                "runs started at or after this time, ms since the Unix epoch",
            ),
            (
                "started_before",
                Kind::Signed,
                "runs started before this time, ms since the Unix epoch",
            ),
            (
                "waiting",
                Kind::Flag,
                "true: only runs waiting for a human (as status=waiting_for_human)",
            ),
            (
                "cursor",
                Kind::RunId,
                "the next_cursor of the previous page (runs are in run id order); anything else is refused",
            ),
            (
                "limit",
                Kind::Number { min: 1, max: 500 },
                "runs per page, 1 to 500 (default 50)",
            ),
        ],
        ..route(
            "GET",
            "/api/runs",
            Viewer,
            "List runs, filtered, a page at a time.",
        )
    },
    Route {
        body: &[
            (
                "workflow",
                true,
                Kind::Text,
                "the workflow file's path on the server",
            ),
            (
                "input",
                false,
                Kind::Json,
                "the run's input (JSON); default: the workflow's input file",
            ),
            (
                "run_id",
                false,
                Kind::RunId,
                "the run's id (default: a new one)",
            ),
        ],
        example: r#"{ "workflow": "examples/geo/workflow.toml", "input": { "brand": "Acme" }, "run_id": "acme-1" }"#,
        ..route(
            "POST",
            "/api/runs",
            Operator,
            "Start a run; answers 202 once it is recorded and drives it in the background, with `warnings` when its bundle would scope content off the interaction matrix to nothing.",
        )
    },
    route(
        "GET",
        "/api/runs/{run}",
        Viewer,
        "A run's summary: status, handoffs, open tickets, output, whether it is driven.",
    ),
    Route {
        query: &[("after", SEQ, "only the events after this sequence number")],
        ..route("GET", "/api/runs/{run}/events", Viewer, "A run's events.")
    },
    Route {
        session: true,
        query: &[(
            "after",
            SEQ,
            "start after this sequence number (else the Last-Event-ID header, else 0)",
        )],
        ..route(
            "GET",
            "/api/runs/{run}/events/stream",
            Viewer,
            "A run's events as server-sent events, then each new one as it is recorded (id: its sequence).",
        )
    },
    Route {
        query: &[(
            "at",
            Kind::Text,
            "an event number, or first, last, first-X, last-X (as docket inspect --at); default last",
        )],
        ..route(
            "GET",
            "/api/runs/{run}/state",
            Viewer,
            "The run as it stood at an event (docket inspect --at --json).",
        )
    },
    route(
        "GET",
        "/api/runs/{run}/verification",
        Viewer,
        "The run's log checked: chain links, hashes, blobs, Merkle tree.",
    ),
    route(
        "GET",
        "/api/runs/{run}/replay",
        Viewer,
        "Re-derive every decision of the run from its log (docket replay --json).",
    ),
    Route {
        body: &[(
            "policies",
            true,
            Kind::Text,
            "the path on the server of the bundle to decide under",
        )],
        example: r#"{ "policies": "examples/geo/policy.toml" }"#,
        ..route(
            "POST",
            "/api/runs/{run}/what-if",
            Operator,
            "What the run would have been under another bundle (docket replay --policies --json).",
        )
    },
    Route {
        session: true,
        query: &[
            (
                "format",
                Kind::Word(&["jsonl", "html"]),
                "jsonl (default) or html",
            ),
            (
                "redact",
                Kind::Text,
                "jsonl only: [SEQ:]POINTER values to withhold, comma-separated (docs/export-format.md#redacted-exports)",
            ),
        ],
        ..route(
            "GET",
            "/api/runs/{run}/export",
            Viewer,
            "The run's export for auditors: JSON lines (docs/export-format.md) or its HTML report.",
        )
    },
    route(
        "POST",
        "/api/runs/{run}/resume",
        Operator,
        "Continue a run from its log (202; driven in the background).",
    ),
    Route {
        body: &[("reason", true, Kind::Said, "why (recorded in run.paused)")],
        example: r#"{ "reason": "the agent posts too often" }"#,
        ..route(
            "POST",
            "/api/runs/{run}/pause",
            Operator,
            "Pause a run: nothing new starts until it is unpaused; run.paused records the token's name as who.",
        )
    },
    Route {
        body: &[
            (
                "name",
                true,
                Kind::Said,
                "the event's name, as the bundle's [[signals]] declares it",
            ),
            (
                "payload",
                false,
                Kind::Json,
                "its content (JSON; default null), within the signal's max_payload_bytes",
            ),
            (
                "idempotency_key",
                false,
                Kind::Said,
                "your key for this event: sent again with it, it is recorded once (200, naming the event)",
            ),
        ],
        example: r#"{ "name": "comment", "payload": { "text": "love it" }, "idempotency_key": "c-1842" }"#,
        ..route(
            "POST",
            "/api/runs/{run}/events",
            Operator,
            "Send an outside event to a run: signal.received records the token's name as its sender, the bundle keeps or refuses it (`signal`), and an agent waiting for it is driven on in the background.",
        )
    },
    Route {
        body: &[
            (
                "role",
                true,
                Kind::Said,
                "the role you write in: a person's entry (authority = \"human\") of the run's bundle whose write_scopes hold the domain",
            ),
            (
                "reason",
                true,
                Kind::Said,
                "why (recorded in human.wrote_domain)",
            ),
            (
                "content",
                true,
                Kind::Json,
                "the domain's new version (JSON), kept as the domain's rules say",
            ),
        ],
        example: r#"{ "role": "operator", "reason": "summarised the call", "content": { "threads": [] } }"#,
        ..route(
            "POST",
            "/api/runs/{run}/domains/{domain}",
            Operator,
            "Write a domain of a run as a person (201): human.wrote_domain records the token's name as who and the role, then the domain's next version; a write the bundle refuses is 422 and records nothing.",
        )
    },
    Route {
        body: &[("reason", true, Kind::Said, "why (recorded in run.unpaused)")],
        example: r#"{ "reason": "fixed" }"#,
        ..route(
            "POST",
            "/api/runs/{run}/unpause",
            Operator,
            "Let a paused run go on (driven in the background, as after a decision); run.unpaused records the token's name as who.",
        )
    },
    Route {
        body: &[(
            "message",
            true,
            Kind::Said,
            "the user's next message: the new run's input is the previous turn's with `message` set to it",
        )],
        example: r#"{ "message": "How does that NPV compare with my budget?" }"#,
        ..route(
            "POST",
            "/api/runs/{run}/messages",
            Operator,
            "Send the user's next message to a finished run (the latest turn of its session): records the session's next turn, a new run whose agents are told the earlier turns (context.handoff.session), the token's name as who sent it, and drives it in the background; 201 with the new run. 409 when the run is not finished, not the latest turn, or another message started the next turn first (docs/agent-protocol.md#sessions).",
        )
    },
    Route {
        body: &[(
            "reason",
            true,
            Kind::Said,
            "why (recorded in run.cancelled)",
        )],
        example: r#"{ "reason": "wrong input" }"#,
        ..route(
            "POST",
            "/api/runs/{run}/cancel",
            Operator,
            "Cancel a run; run.cancelled records the token's name as who.",
        )
    },
    Route {
        body: &[
            (
                "reason",
                true,
                Kind::Said,
                "why (recorded in human.decided)",
            ),
            (
                "choose",
                false,
                Kind::Number {
                    min: 0,
                    max: u32::MAX as u64,
                },
                "on a conflict ticket the output kept, on a question the option (from 1)",
            ),
        ],
        example: r#"{ "reason": "looks right", "choose": 1 }"#,
        ..route(
            "POST",
            "/api/runs/{run}/tickets/{ticket}/approve",
            Approver,
            "Approve a ticket; human.decided records the token's name as by (202).",
        )
    },
    Route {
        body: &[(
            "reason",
            true,
            Kind::Said,
            "why (recorded in human.decided)",
        )],
        example: r#"{ "reason": "not for this client" }"#,
        ..route(
            "POST",
            "/api/runs/{run}/tickets/{ticket}/deny",
            Approver,
            "Deny a ticket: the run stops, blocked.",
        )
    },
    Route {
        body: &[
            (
                "choice",
                false,
                Kind::Choice,
                "one of the options offered: its number (from 1) or its text",
            ),
            ("text", false, Kind::Text, "the answer in your own words"),
            ("reason", false, Kind::Text, "why"),
        ],
        example: r#"{ "choice": 1, "text": "the second region first", "reason": "budget" }"#,
        at_least_one: &["choice", "text"],
        ..route(
            "POST",
            "/api/runs/{run}/tickets/{ticket}/answer",
            Approver,
            "Answer an agent's question (choice and/or text) (202).",
        )
    },
    Route {
        body: &[
            (
                "role",
                true,
                Kind::Said,
                "the role of the bundle's registry you act in (docs/governance.md#human-override)",
            ),
            ("reason", true, Kind::Said, "why"),
            (
                "rule",
                false,
                Kind::Text,
                "the rule overridden (default: the one that blocked)",
            ),
        ],
        example: r#"{ "role": "compliance", "reason": "signed off by legal", "rule": "handoff.strategy-to-publisher" }"#,
        ..route(
            "POST",
            "/api/runs/{run}/override",
            Approver,
            "Override the rule that blocked a run (202).",
        )
    },
    route(
        "GET",
        "/api/workers",
        Viewer,
        "The workers sharing the runs of a PostgreSQL store (alive or stopped, runs held, last renewal by the database's clock) and every run's lease (holder, fencing epoch, queued or not, time left). Empty on a data directory, whose runs this server drives.",
    ),
    route(
        "GET",
        "/api/schedules",
        Viewer,
        "The schedules (removed ones too), each with its timing, rules, who made it, when it is next due and the run it started last, and the latest 50 firings of all.",
    ),
    Route {
        body: &[
            (
                "name",
                true,
                Kind::Said,
                "the schedule's name: letters, digits, '.', '_', '-' (at most 64); never reused",
            ),
            (
                "workflow",
                true,
                Kind::Text,
                "the workflow file's path on the server, read again at each firing",
            ),
            (
                "input",
                false,
                Kind::Json,
                "the runs' input (JSON); default: the workflow's input file, read now",
            ),
            (
                "cron",
                false,
                Kind::Said,
                "a cron expression (5 fields: minute hour day-of-month month day-of-week); give it or every",
            ),
            (
                "every",
                false,
                Kind::Said,
                "an interval instead: 90s, 15m, 2h 30m, 1d, PT2H",
            ),
            (
                "time_zone",
                false,
                Kind::Text,
                "the IANA time zone the cron expression is read in (default UTC)",
            ),
            (
                "overlap",
                false,
                Kind::Word(&["skip", "queue-one", "cancel-previous"]),
                "while its last run is still going: skip (default), queue-one or cancel-previous",
            ),
            (
                "catch_up",
                false,
                Kind::Word(&["all", "latest"]),
                "after downtime: latest (default) or all (the latest 100)",
            ),
        ],
        at_least_one: &["cron", "every"],
        example: r#"{ "name": "nightly-geo", "workflow": "examples/geo/workflow.toml", "input": { "brand": "Acme" }, "cron": "0 2 * * *", "time_zone": "Europe/Paris", "overlap": "skip", "catch_up": "latest" }"#,
        ..route(
            "POST",
            "/api/schedules",
            Operator,
            "Make a schedule (201): runs of a workflow on a cron expression or an interval, made by the token's name; a name taken is a 409.",
        )
    },
    route(
        "GET",
        "/api/schedules/{name}",
        Viewer,
        "A schedule and its latest 200 firings: when each was due, how late it fired, the run it started or why none.",
    ),
    route(
        "POST",
        "/api/schedules/{name}/pause",
        Operator,
        "Pause a schedule (by the token's name): nothing fires until it is unpaused, and what falls due meanwhile is not caught up.",
    ),
    route(
        "POST",
        "/api/schedules/{name}/unpause",
        Operator,
        "Unpause a schedule (by the token's name): next due at its first instant from now.",
    ),
    route(
        "DELETE",
        "/api/schedules/{name}",
        Operator,
        "Remove a schedule (by the token's name): it fires no more, and is kept with its firings.",
    ),
    route(
        "GET",
        "/api/kill-switches",
        Viewer,
        "The kill switches engaged, and every flip with who and why.",
    ),
    Route {
        body: &[("reason", true, Kind::Said, "why (kept with the flip)")],
        example: r#"{ "reason": "the outbox is down" }"#,
        ..route(
            "POST",
            "/api/kill-switches/{switch}/engage",
            Operator,
            "Engage a kill switch (`global` or a lane).",
        )
    },
    Route {
        body: &[("reason", true, Kind::Said, "why (kept with the flip)")],
        example: r#"{ "reason": "the outbox is down" }"#,
        ..route(
            "POST",
            "/api/kill-switches/{switch}/release",
            Operator,
            "Release a kill switch.",
        )
    },
    route(
        "GET",
        "/api/policies",
        Viewer,
        "The policy bundles recorded in runs, by hash, with how many runs recorded each.",
    ),
    route(
        "GET",
        "/api/policies/{hash}",
        Viewer,
        "A recorded bundle: its source text and name.",
    ),
    Route {
        query: &[
            ("old", Kind::Text, "the hash of the bundle before"),
            ("new", Kind::Text, "the hash of the bundle after"),
        ],
        ..route(
            "GET",
            "/api/policies/diff",
            Viewer,
            "What changed between two recorded bundles, per agent pair and per rule.",
        )
    },
    Route {
        query: &[
            ("from", Kind::Text, "the sending agent"),
            ("to", Kind::Text, "the receiving agent"),
            ("context", Kind::Flag, "true: a read-only context handoff"),
        ],
        ..route(
            "GET",
            "/api/policies/{hash}/explain",
            Viewer,
            "The decision of a recorded bundle for a handoff, with its rule chain.",
        )
    },
    Route {
        query: &[(
            "bundle",
            Kind::Text,
            "the registered bundle's name (needed when several are registered)",
        )],
        ..route(
            "GET",
            "/api/governance/handoff-rules",
            Viewer,
            "The handoff rules of a registered bundle's latest version (seed 001's shape), with its version and hash.",
        )
    },
    Route {
        query: &[(
            "bundle",
            Kind::Text,
            "the registered bundle's name (needed when several are registered)",
        )],
        ..route(
            "GET",
            "/api/governance/handoff-rules/{from_agent}/{to_agent}",
            Viewer,
            "The rules deciding one agent pair, in precedence order, and the decision they give.",
        )
    },
    Route {
        query: &[
            (
                "bundle",
                Kind::Text,
                "the registered bundle's name (needed when several are registered)",
            ),
            (
                "reason",
                Kind::Said,
                "why the rules change (or `reason` in the body)",
            ),
        ],
        body: &[
            (
                "rules",
                true,
                Kind::Rules,
                "the new handoff rules: the body itself as a list, or this field of an object",
            ),
            (
                "reason",
                false,
                Kind::Said,
                "why the rules change (or `?reason=`)",
            ),
        ],
        example: r#"{ "rules": [{ "from_agent_id": "external", "to_agent_id": "governance", "blocked_context_fields": ["regions"] }], "reason": "no regions" }"#,
        ..route(
            "PUT",
            "/api/governance/handoff-rules",
            Admin,
            "Replace the handoff rules: validated, registered as the next bundle version (by the token's name, with the reason); answers the diff and the recorded runs the change would have affected.",
        )
    },
    route(
        "GET",
        "/api/requests",
        Admin,
        "The API's request log: every mutating request with its principal and status.",
    ),
];

/// The route of `method` and matched `path`, if the table has it.
#[must_use]
pub fn find(method: &str, path: &str) -> Option<&'static Route> {
    ROUTES.iter().find(|r| r.method == method && r.path == path)
}

/// The JSON Schema of a body made of `fields`: an object with them, no other.
fn body_schema(fields: &[Field]) -> Value {
    let properties: Map<String, Value> = fields
        .iter()
        .map(|(name, _, kind, what)| {
            let mut schema = kind.schema();
            schema["description"] = json!(what);
            ((*name).to_owned(), schema)
        })
        .collect();
    let required: Vec<&str> = fields
        .iter()
        .filter(|(_, required, _, _)| *required)
        .map(|(name, _, _, _)| *name)
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The methods the table has for matched `path`.
#[must_use]
pub fn methods(path: &str) -> Vec<&'static str> {
    ROUTES
        .iter()
        .filter(|r| r.path == path)
        .map(|r| r.method)
        .collect()
}

/// The OpenAPI 3.1 description of [`ROUTES`].
#[must_use]
pub fn openapi() -> Value {
    let mut paths = Map::new();
    for r in ROUTES {
        let mut parameters: Vec<Value> = r
            .path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| {
                let schema = if name == "run" {
                    Kind::RunId.schema()
                } else {
                    Kind::Text.schema()
                };
                json!({ "name": name, "in": "path", "required": true, "schema": schema })
            })
            .collect();
        parameters.extend(r.query.iter().map(|(name, kind, what)| {
            json!({ "name": name, "in": "query", "required": false, "description": what, "schema": kind.schema() })
        }));
        let mut op = json!({
            "summary": r.summary,
            "operationId": format!("{} {}", r.method, r.path),
            "x-docket-role": r.role.as_str(),
            "x-docket-session": r.session,
            "security": if r.session { json!([{ "bearer": [] }, { "session": [] }]) } else { json!([{ "bearer": [] }]) },
            "parameters": parameters,
            "responses": {
                "200": { "description": "OK" },
                "400": { "$ref": "#/components/responses/Error" },
                "401": { "$ref": "#/components/responses/Error" },
                "403": { "$ref": "#/components/responses/Error" },
                "404": { "$ref": "#/components/responses/Error" },
                "409": { "$ref": "#/components/responses/Error" },
                "default": { "$ref": "#/components/responses/Error" },
            },
        });
        if r.method == "POST" {
            op["responses"]["202"] =
                json!({ "description": "Recorded; the run is driven on in the background" });
        }
        if !r.body.is_empty() {
            let mut schema = body_schema(r.body);
            // The replacement of handoff rules also takes the list alone as its body.
            if r.body
                .iter()
                .any(|(_, _, kind, _)| matches!(kind, Kind::Rules))
            {
                schema["additionalProperties"] = json!(true);
                schema = json!({ "oneOf": [Kind::Rules.schema(), schema] });
            }
            if !r.at_least_one.is_empty() {
                schema["anyOf"] = r
                    .at_least_one
                    .iter()
                    .map(|name| {
                        let mut given = Map::new();
                        given.insert(
                            (*name).to_owned(),
                            json!({ "not": { "type": "string", "pattern": "^\\s*$" } }),
                        );
                        json!({ "required": [name], "properties": given })
                    })
                    .collect();
            }
            let example: Value = serde_json::from_str(r.example).unwrap_or(Value::Null);
            op["requestBody"] = json!({ "required": true, "content": { "application/json": {
                "schema": schema,
                "example": example,
            }}});
        }
        let entry = paths
            .entry(r.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        entry[r.method.to_lowercase()] = op;
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "docket API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Runs, tickets, kill switches and policy bundles of one data directory (docs/api.md). Every route needs a bearer token (x-docket-session routes also take the session cookie of POST /api/session); x-docket-role is the least role that may call it.",
        },
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": { "type": "http", "scheme": "bearer" },
                "session": { "type": "apiKey", "in": "cookie", "name": crate::session::COOKIE },
            },
            "responses": { "Error": {
                "description": "{ error: { code, message, where } }",
                "content": { "application/json": { "schema": {
                    "type": "object",
                    "properties": { "error": { "type": "object", "properties": {
                        "code": { "type": "string" },
                        "message": { "type": "string" },
                        "where": { "type": ["string", "null"] },
                    }, "required": ["code", "message", "where"] } },
                }}},
            }},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::{Kind, ROUTES, openapi};
    use serde_json::{Value, json};

    /// Each body's example is valid by its schema, and so is each of its fields given the
    /// other values its kind allows; a text field given a number is not.
    #[test]
    fn every_example_body_fits_its_schema() {
        let description = openapi();
        for r in ROUTES.iter().filter(|r| !r.body.is_empty()) {
            let documented = &description["paths"][r.path][r.method.to_lowercase()]["requestBody"]
                ["content"]["application/json"];
            let schema = &documented["schema"];
            let validator = jsonschema::validator_for(schema)
                .unwrap_or_else(|e| panic!("{} {}: {e}", r.method, r.path));
            let example = &documented["example"];
            assert!(
                validator.is_valid(example),
                "{} {}: {example}",
                r.method,
                r.path
            );
            for (name, _, kind, _) in r.body {
                let others: Vec<Value> = match kind {
                    Kind::Text => vec![json!(""), json!("é ü")],
                    Kind::Said => vec![json!(" a "), json!("x")],
                    Kind::Json => vec![json!(null), json!([1]), json!({ "a": 1 })],
                    Kind::Number { min, max } => vec![json!(min), json!(max)],
                    Kind::Choice => vec![json!(1), json!(u32::MAX), json!("the first")],
                    Kind::RunId => vec![json!("a"), json!("A.b_c-1")],
                    _ => Vec::new(),
                };
                for value in others {
                    let mut body = example.clone();
                    body[*name] = value;
                    assert!(validator.is_valid(&body), "{} {}: {body}", r.method, r.path);
                }
                if matches!(kind, Kind::Said | Kind::Text | Kind::RunId) {
                    let mut body = example.clone();
                    body[*name] = json!(5);
                    assert!(
                        !validator.is_valid(&body),
                        "{} {}: {body}",
                        r.method,
                        r.path
                    );
                }
            }
            let mut extra = example.clone();
            extra["unknown_field"] = json!(1);
            let open = r.body.iter().any(|(_, _, k, _)| matches!(k, Kind::Rules));
            assert_eq!(validator.is_valid(&extra), open, "{} {}", r.method, r.path);
        }
    }
}
