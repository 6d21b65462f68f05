//! Every API route, the role it needs and what it does: one table that the router, the
//! role check and the OpenAPI description all read, so none can leave a route out.

use serde_json::{Map, Value, json};

use crate::tokens::Role;

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
    /// Its query parameters: name and what it means.
    pub query: &'static [(&'static str, &'static str)],
    /// Its JSON body's fields: name, whether required, what it means.
    pub body: &'static [(&'static str, bool, &'static str)],
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
        session: false,
    }
}

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
                "running, interrupted, waiting_for_human, completed, blocked, failed or cancelled",
            ),
            ("workflow", "the workflow's name"),
            (
                "started_after",
                "runs started at or after this time, ms since the Unix epoch",
            ),
            (
                "started_before",
                "runs started before this time, ms since the Unix epoch",
            ),
            (
                "waiting",
                "true: only runs waiting for a human (as status=waiting_for_human)",
            ),
            (
                "cursor",
                "the next_cursor of the previous page (runs are in run id order)",
            ),
            ("limit", "runs per page, 1 to 500 (default 50)"),
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
            ("workflow", true, "the workflow file's path on the server"),
            (
                "input",
                false,
                "the run's input (JSON); default: the workflow's input file",
            ),
            ("run_id", false, "the run's id (default: a new one)"),
        ],
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
        query: &[("after", "only the events after this sequence number")],
        ..route("GET", "/api/runs/{run}/events", Viewer, "A run's events.")
    },
    Route {
        session: true,
        query: &[(
            "after",
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
            "the path on the server of the bundle to decide under",
        )],
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
            ("format", "jsonl (default) or html"),
            (
                "redact",
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
        body: &[("reason", true, "why (recorded in run.cancelled)")],
        ..route(
            "POST",
            "/api/runs/{run}/cancel",
            Operator,
            "Cancel a run; run.cancelled records the token's name as who.",
        )
    },
    Route {
        body: &[
            ("reason", true, "why (recorded in human.decided)"),
            (
                "choose",
                false,
                "on a conflict ticket the output kept, on a question the option (from 1)",
            ),
        ],
        ..route(
            "POST",
            "/api/runs/{run}/tickets/{ticket}/approve",
            Approver,
            "Approve a ticket; human.decided records the token's name as by (202).",
        )
    },
    Route {
        body: &[("reason", true, "why (recorded in human.decided)")],
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
                "one of the options offered: its number (from 1) or its text",
            ),
            ("text", false, "the answer in your own words"),
            ("reason", false, "why"),
        ],
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
                "the role of the bundle's registry you act in (docs/governance.md#human-override)",
            ),
            ("reason", true, "why"),
            (
                "rule",
                false,
                "the rule overridden (default: the one that blocked)",
            ),
        ],
        ..route(
            "POST",
            "/api/runs/{run}/override",
            Approver,
            "Override the rule that blocked a run (202).",
        )
    },
    route(
        "GET",
        "/api/kill-switches",
        Viewer,
        "The kill switches engaged, and every flip with who and why.",
    ),
    Route {
        body: &[("reason", true, "why (kept with the flip)")],
        ..route(
            "POST",
            "/api/kill-switches/{switch}/engage",
            Operator,
            "Engage a kill switch (`global` or a lane).",
        )
    },
    Route {
        body: &[("reason", true, "why (kept with the flip)")],
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
            ("old", "the hash of the bundle before"),
            ("new", "the hash of the bundle after"),
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
            ("from", "the sending agent"),
            ("to", "the receiving agent"),
            ("context", "true: a read-only context handoff"),
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
                "the registered bundle's name (needed when several are registered)",
            ),
            ("reason", "why the rules change (or `reason` in the body)"),
        ],
        body: &[
            (
                "rules",
                true,
                "the new handoff rules: the body itself as a list, or this field of an object",
            ),
            ("reason", false, "why the rules change (or `?reason=`)"),
        ],
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

/// The OpenAPI 3.1 description of [`ROUTES`].
#[must_use]
pub fn openapi() -> Value {
    let mut paths = Map::new();
    for r in ROUTES {
        let mut parameters: Vec<Value> = r
            .path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } }))
            .collect();
        parameters.extend(r.query.iter().map(|(name, what)| {
            json!({ "name": name, "in": "query", "required": false, "description": what, "schema": { "type": "string" } })
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
            },
        });
        if !r.body.is_empty() {
            let properties: Map<String, Value> = r
                .body
                .iter()
                .map(|(name, _, what)| ((*name).to_owned(), json!({ "description": what })))
                .collect();
            let required: Vec<&str> = r
                .body
                .iter()
                .filter(|(_, req, _)| *req)
                .map(|(n, _, _)| *n)
                .collect();
            op["requestBody"] = json!({ "required": true, "content": { "application/json": { "schema": {
                "type": "object", "properties": properties, "required": required,
            }}}});
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
