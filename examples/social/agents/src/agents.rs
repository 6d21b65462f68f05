//! The six roles of seed 004 §2 that a campaign needs, each a pure function of its
//! request. An agent learns where it stands from its decision inputs only: the goal of its
//! episode, the results of the children it spawned, the effects and tools it asked for.

use docket_protocol::{
    Action, AgentRequest, AgentResponse, BudgetRequest, Confidence, EpisodeResult, EpisodeStatus,
};
use serde_json::{Map, Value, json};

/// The agents, by the name the binary takes.
pub const AGENTS: [&str; 7] = [
    "orchestrator",
    "planner",
    "creator",
    "publisher",
    "engagement",
    "verifier",
    "doc",
];

/// The agent function for a name of [`AGENTS`].
#[must_use]
pub fn agent(name: &str) -> Option<fn(&AgentRequest) -> AgentResponse> {
    Some(match name {
        "orchestrator" => orchestrator,
        "planner" => planner,
        "creator" => creator,
        "publisher" => publisher,
        "engagement" => engagement,
        "verifier" => verifier,
        "doc" => doc,
        _ => return None,
    })
}

/// How the publisher's result begins when a person accepted the post's visibility on
/// review (the verifier could not read the outbox).
const ACCEPTED_ON_REVIEW: &str = "published; visibility accepted by a person on review";

/// What each call reports using: a model call's worth of tokens, so the episodes' budgets
/// move (`docket status` shows them).
const CALL_INPUT_TOKENS: u64 = 400;
const CALL_OUTPUT_TOKENS: u64 = 150;

fn respond(request: &AgentRequest, actions: Vec<Action>) -> AgentResponse {
    let mut response =
        AgentResponse::success(request.request_id.clone(), Confidence::High, actions);
    response.usage.input_tokens = CALL_INPUT_TOKENS;
    response.usage.output_tokens = CALL_OUTPUT_TOKENS;
    response
}

fn refuse(request: &AgentRequest, code: &str, message: &str) -> AgentResponse {
    AgentResponse::error(request.request_id.clone(), code, message)
}

/// The payloads of the decision inputs of `output_type`, in order.
fn inputs<'a>(request: &'a AgentRequest, output_type: &str) -> Vec<&'a Value> {
    request
        .decision_inputs
        .iter()
        .filter(|i| i.output_type == output_type)
        .map(|i| &*i.payload)
        .collect()
}

/// This episode's goal packet: `{episode_id, episode_type, goal, budget, inputs}`.
fn episode_goal(request: &AgentRequest) -> Option<&Value> {
    inputs(request, "episode_goal").into_iter().next()
}

fn episode_type(request: &AgentRequest) -> &str {
    episode_goal(request)
        .and_then(|g| g["episode_type"].as_str())
        .unwrap_or_default()
}

/// The task packet's `trigger`: what the campaign's `trouble` asks this episode to run
/// into (empty for a campaign without trouble).
fn trigger(request: &AgentRequest) -> &str {
    episode_goal(request)
        .and_then(|g| g["inputs"]["trigger"].as_str())
        .unwrap_or_default()
}

fn capsules(request: &AgentRequest) -> &Value {
    episode_goal(request).map_or(&Value::Null, |g| &g["inputs"]["capsule_refs"])
}

/// The latest version of a domain this agent may read (`domain:ID@vN`).
fn domain<'a>(request: &'a AgentRequest, id: &str) -> Option<&'a Value> {
    let prefix = format!("domain:{id}@v");
    request
        .context_inputs
        .iter()
        .filter(|c| c.output_type.starts_with(&prefix))
        .map(|c| &*c.payload)
        .next_back()
}

fn finish(result: EpisodeResult) -> Action {
    Action::FinishEpisode { result }
}

fn result(status: EpisodeStatus, summary: &str, artifacts: &[String]) -> EpisodeResult {
    let mut result = EpisodeResult::new(status, summary);
    result.artifacts_created = artifacts.to_vec();
    result
}

fn failed(summary: &str, error_class: &str) -> EpisodeResult {
    let mut result = EpisodeResult::new(EpisodeStatus::Failed, summary);
    result.error_class = Some(error_class.to_owned());
    result
}

fn spawn(agent: &str, episode_type: &str, goal: String, inputs: Value) -> Action {
    Action::Spawn {
        agent: agent.into(),
        episode_type: episode_type.to_owned(),
        goal,
        budget: BudgetRequest::default(),
        inputs: match inputs {
            Value::Object(map) => map,
            _ => Map::new(),
        },
        trigger: None,
    }
}

/// A spawn of recursion with a class, naming why it is needed (docs/governance.md in the
/// repository, "Recursion classes"): a `verify` child after a side effect, a probe when
/// visibility is uncertain.
fn spawn_because(
    trigger: &str,
    agent: &str,
    episode_type: &str,
    goal: String,
    inputs: Value,
) -> Action {
    let mut action = spawn(agent, episode_type, goal, inputs);
    if let Action::Spawn { trigger: t, .. } = &mut action {
        *t = Some(trigger.to_owned());
    }
    action
}

fn write(domain: &str, content: Value) -> Action {
    Action::WriteDomain {
        domain: domain.to_owned(),
        content,
    }
}

/// The strings of a JSON array (none when it is not one).
fn strings(list: &Value) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect()
}

/// A short content hash, as the asset graph records it (seed 004 §4.2) and as the
/// duplicate-risk check compares it (§5.4).
fn content_hash(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex()[..16].to_owned()
}

/// The orchestrator (§2.1): one child episode per role, in order, each with a task packet
/// (goal, capsule refs, trigger). It publishes nothing and writes no domain. A child that
/// did not end ok ends the campaign: the root finishes `failed` with a task for a human,
/// naming, like a campaign that ends ok, what its children created and how each ended.
pub fn orchestrator(request: &AgentRequest) -> AgentResponse {
    let Some(campaign) = request
        .decision_inputs
        .iter()
        .find(|i| i.source_agent == "external")
        .map(|i| &*i.payload)
    else {
        return refuse(
            request,
            "INPUT_MISSING_CAMPAIGN",
            "the orchestrator expects a campaign request from external",
        );
    };
    let name = campaign["campaign"].as_str().unwrap_or("campaign");
    let trouble = campaign["trouble"].as_str().unwrap_or_default();
    let packet = |capsule_refs: Value| json!({ "trigger": trouble, "capsule_refs": capsule_refs });
    let mut brief = json!({
        "campaign": name,
        "brand": campaign["brand"],
        "platform": campaign["platform"],
        "topic": campaign["topic"],
        "launch_date": campaign["launch_date"],
    });
    // The post's slot, when the campaign gives one (a time, or `+20s` from publishing).
    if !campaign["publish_at"].is_null() {
        brief["publish_at"] = campaign["publish_at"].clone();
    }
    let results = inputs(request, "episode_result");
    let Some(last) = results.last() else {
        return respond(
            request,
            vec![spawn(
                "planner",
                "plan",
                format!("plan the {name} post"),
                packet(brief),
            )],
        );
    };
    let child = last["episode_type"].as_str().unwrap_or_default();
    let child_result = &last["result"];
    // What the children created (a post, a reply...) and how each ended, in order: the
    // campaign's result says both, whether it ends ok or failed.
    let artifacts: Vec<String> = results
        .iter()
        .flat_map(|r| strings(&r["result"]["artifacts_created"]))
        .collect();
    let decisions: Vec<Value> = results
        .iter()
        .map(|r| json!({ "episode": r["episode_id"], "type": r["episode_type"], "status": r["result"]["status"] }))
        .collect();
    if child_result["status"] != "ok" {
        let mut failure = failed(
            &format!(
                "the {child} episode ended {}: {}",
                child_result["status"].as_str().unwrap_or("?"),
                child_result["summary"].as_str().unwrap_or_default()
            ),
            child_result["error_class"]
                .as_str()
                .unwrap_or("child_failed"),
        );
        failure.artifacts_created = artifacts;
        failure.decisions = decisions;
        failure.next_actions = vec![json!({
            "for": "human",
            "task": format!("review the stopped {child} episode of {name} before a new run"),
        })];
        return respond(request, vec![finish(failure)]);
    }
    let next = match child {
        "plan" => spawn(
            "creator",
            "create",
            format!("produce the asset for the {name} plan"),
            packet(brief),
        ),
        "create" => spawn(
            "publisher",
            "publish",
            format!(
                "publish the {name} asset on {}",
                campaign["platform"].as_str().unwrap_or("the platform")
            ),
            packet(brief),
        ),
        // Live engagement: the engagement agent waits for events the ingestion system
        // sends to the running campaign (§4.4).
        "publish" if campaign["engagement"]["live"] == true => spawn(
            "engagement",
            "engage",
            format!("answer the engagement on the {name} post as it arrives"),
            packet(json!({ "campaign": name, "engagement": campaign["engagement"] })),
        ),
        "publish"
            if campaign["engagement_events"]
                .as_array()
                .is_some_and(|e| !e.is_empty()) =>
        {
            spawn(
                "engagement",
                "engage",
                format!("answer the engagement on the {name} post"),
                packet(
                    json!({ "campaign": name, "engagement_events": campaign["engagement_events"] }),
                ),
            )
        }
        "publish" | "engage" => spawn(
            "doc",
            "document",
            format!("journal the {name} campaign"),
            packet(json!({
                "campaign": name,
                "episodes": results.iter().map(|r| json!({
                    "episode": r["episode_id"], "type": r["episode_type"], "summary": r["result"]["summary"],
                })).collect::<Vec<_>>(),
            })),
        ),
        "document" => {
            // The publisher says when a person, not a lookup, accepted the post's visibility.
            let accepted_by_a_person = results.iter().any(|r| {
                r["episode_type"] == "publish"
                    && r["result"]["summary"]
                        .as_str()
                        .is_some_and(|s| s.starts_with(ACCEPTED_ON_REVIEW))
            });
            let published = if accepted_by_a_person {
                "published (its visibility accepted by a person on review)"
            } else {
                "published and verified"
            };
            let mut done = result(
                EpisodeStatus::Ok,
                &format!("{name}: planned, created, {published}; engagement answered; journaled"),
                &artifacts,
            );
            done.decisions = decisions;
            return respond(request, vec![finish(done)]);
        }
        other => {
            return refuse(
                request,
                "UNEXPECTED_EPISODE_RESULT",
                &format!("no step follows a {other:?} episode"),
            );
        }
    };
    respond(request, vec![next])
}

/// The planner (§2.2): writes the plan node, citing the capsules it used (§4.1). Missing
/// its brand capsule (`brand_capsule_missing`) it recurses to retrieve it (§5.1), and two
/// retrievals that find nothing stop it (`no_new_information`).
pub fn planner(request: &AgentRequest) -> AgentResponse {
    let Some(goal) = episode_goal(request) else {
        return refuse(
            request,
            "INPUT_MISSING_GOAL",
            "the planner runs in an episode",
        );
    };
    if episode_type(request) == "retrieve" {
        // The capsule is nowhere: nothing new to report.
        return respond(request, vec![finish(result(EpisodeStatus::Ok, "", &[]))]);
    }
    if trigger(request) == "brand_capsule_missing" {
        let tried = inputs(request, "episode_result").len();
        let place = ["the brand kit", "past plan nodes"][tried.min(1)];
        return respond(
            request,
            vec![spawn_because(
                "missing_capsule",
                "planner",
                "retrieve",
                format!("locate the brand capsule in {place}"),
                json!({}),
            )],
        );
    }
    let brief = capsules(request);
    let name = brief["campaign"].as_str().unwrap_or("campaign");
    let plan_id = format!("plan-{name}-1");
    let content = json!({
        "summary": format!("{plan_id}: one {} post announcing {}", brief["platform"].as_str().unwrap_or("social"), brief["topic"].as_str().unwrap_or("the launch")),
        "plan_node": {
            "id": plan_id,
            "blueprint": "text_post",
            "platform": brief["platform"],
            "topic": brief["topic"],
            "launch_date": brief["launch_date"],
            "brand": brief["brand"],
            "pointers": ["capsule:brand/voice@3", "capsule:kb/launch-facts@7"],
        },
        "plan_edges": [{
            "from": plan_id, "to": "engagement",
            "rationale": "answer launch questions within the day",
            "evidence_refs": ["capsule:engagement/last-launch@2"],
        }],
        "goal": goal["goal"],
    });
    respond(
        request,
        vec![
            write("plan_graph", content),
            finish(result(
                EpisodeStatus::Ok,
                &format!("{plan_id} written to the plan graph"),
                &[format!("plan_graph:{plan_id}")],
            )),
        ],
    )
}

/// The creator (§2.3): turns the plan node into a text asset recorded with its blueprint,
/// plan id, prompt and provider refs and hash (§4.2). Troubles: `render_runaway` burns its
/// whole token budget (`budget_exhausted`); `tone_rubric_fails` recurses into rewrites
/// that keep failing the tone rubric (`failure_repeats`); `creator_edits_plan` tries to
/// write the plan graph, which only the planner may (`policy_blocks`).
pub fn creator(request: &AgentRequest) -> AgentResponse {
    let Some(goal) = episode_goal(request) else {
        return refuse(
            request,
            "INPUT_MISSING_GOAL",
            "the creator runs in an episode",
        );
    };
    if episode_type(request) == "rewrite" {
        let episode = goal["episode_id"].as_str().unwrap_or("rewrite");
        let mut rubric = failed(
            &format!("{episode}: the rewrite still reads off-brand (tone rubric: 2/5)"),
            "tone_rubric",
        );
        rubric.artifacts_created = vec![format!("rubric-report:{episode}")];
        return respond(request, vec![finish(rubric)]);
    }
    let Some(plan) = domain(request, "plan_graph") else {
        return refuse(
            request,
            "PLAN_NODE_MISSING",
            "no plan graph version to create from",
        );
    };
    let node = &plan["plan_node"];
    let plan_id = node["id"].as_str().unwrap_or("plan");
    let text = format!(
        "{} is here: {}. Doors open {}. Tell us what you will build first!",
        node["brand"].as_str().unwrap_or("We"),
        node["topic"].as_str().unwrap_or("something new"),
        node["launch_date"].as_str().unwrap_or("soon"),
    );
    let hash = content_hash(&text);
    let asset_id = format!("asset-{hash}");
    let asset = json!({
        "summary": format!("{asset_id}: caption for {plan_id}"),
        "asset": {
            "id": asset_id, "blueprint_type": "text_post", "plan_id": plan_id,
            "prompt_refs": ["prompt:caption/launch@2"], "provider_config_ref": "provider:copy-model/default",
            "hash": hash, "text": text,
        },
    });
    let created = finish(result(
        EpisodeStatus::Ok,
        &format!("{asset_id} written to the asset graph"),
        &[format!("asset_graph:{asset_id}")],
    ));
    match trigger(request) {
        "render_runaway" => {
            // The answer that crosses the budget is recorded; its actions are not carried out.
            let mut response = respond(request, vec![write("asset_graph", asset), created]);
            response.usage.input_tokens = goal["budget"]["tokens"].as_u64().unwrap_or(u64::MAX / 2);
            response
        }
        "tone_rubric_fails" => {
            let attempt = inputs(request, "episode_result").len() + 1;
            respond(
                request,
                vec![spawn_because(
                    "rubric_failure",
                    "creator",
                    "rewrite",
                    format!(
                        "rewrite the caption of {asset_id} in the brand voice (attempt {attempt})"
                    ),
                    json!({}),
                )],
            )
        }
        "creator_edits_plan" => respond(
            request,
            vec![
                write(
                    "plan_graph",
                    json!({ "summary": format!("{plan_id}: moved to a video blueprint"), "plan_node": { "id": plan_id, "blueprint": "video" } }),
                ),
                write("asset_graph", asset),
                created,
            ],
        ),
        _ => respond(request, vec![write("asset_graph", asset), created]),
    }
}

/// The publisher (§2.4): writes the schedule item, asks for the post (dry run → execute
/// once per key → verify, all docket's), then has the verifier prove it is visible (§8.1:
/// a `verify` child; its episode result needs that verification). Its result says who
/// confirmed the post: the verifier, or a person who accepted a review the verifier asked
/// for; a verification that failed still names the post, which is out.
pub fn publisher(request: &AgentRequest) -> AgentResponse {
    if episode_goal(request).is_none() {
        return refuse(
            request,
            "INPUT_MISSING_GOAL",
            "the publisher runs in an episode",
        );
    }
    if let Some(verified) = inputs(request, "episode_result").last() {
        let verdict = &verified["result"];
        // The post the verifier names, whatever it concluded: it is out either way.
        let post = strings(&verdict["artifacts_created"]);
        let summary = verdict["summary"].as_str().unwrap_or_default();
        if verdict["status"] != "ok" {
            let mut stopped = failed(
                &format!("the post could not be verified: {summary}"),
                verdict["error_class"]
                    .as_str()
                    .unwrap_or("verification_failed"),
            );
            stopped.artifacts_created = post;
            return respond(request, vec![finish(stopped)]);
        }
        // An ok result that still carries a task for a person is one a person accepted on
        // review: the verifier did not read the outbox.
        let checked_by_a_person = verdict["next_actions"]
            .as_array()
            .is_some_and(|a| a.iter().any(|n| n["for"] == "human"));
        let summary = if checked_by_a_person {
            format!("{ACCEPTED_ON_REVIEW} ({summary})")
        } else {
            format!("published and verified: {summary}")
        };
        let mut done = result(EpisodeStatus::Ok, &summary, &post);
        done.verification_needed = true;
        return respond(request, vec![finish(done)]);
    }
    if let Some(effect) = inputs(request, "effect_result").last() {
        let status = effect["status"].as_str().unwrap_or_default();
        if status != "applied" && status != "deduplicated" {
            return respond(
                request,
                vec![finish(failed(
                    &format!(
                        "the post was {status}: {}",
                        effect["reason"]
                            .as_str()
                            .or(effect["message"].as_str())
                            .unwrap_or_default()
                    ),
                    &format!("effect_{status}"),
                ))],
            );
        }
        let verify = spawn_because(
            "side_effect_attempted",
            "verifier",
            "verify",
            format!(
                "confirm the post {} is visible once",
                effect["idempotency_key"].as_str().unwrap_or_default()
            ),
            json!({
                "trigger": trigger(request),
                "verify": { "kind": effect["kind"], "idempotency_key": effect["idempotency_key"], "receipt": effect["receipt"] },
            }),
        );
        // The publisher attaches the published payload's snapshot ref to the creator's
        // asset (§4.2), changing nothing else of it (docs/governance.md#domain-content).
        let snapshot = effect["receipt"]["result"]["post_id"]
            .as_str()
            .map(|id| format!("outbox:{id}"));
        let attached = domain(request, "asset_graph")
            .cloned()
            .zip(snapshot)
            .and_then(|(mut graph, snapshot)| {
                graph
                    .get_mut("asset")?
                    .as_object_mut()?
                    .insert("snapshot_ref".to_owned(), json!(snapshot));
                Some(write("asset_graph", graph))
            });
        return respond(request, attached.into_iter().chain([verify]).collect());
    }
    let Some(asset) = domain(request, "asset_graph").map(|a| &a["asset"]) else {
        return refuse(
            request,
            "ASSET_BUNDLE_MISSING",
            "no asset graph version to publish",
        );
    };
    let brief = capsules(request);
    let campaign = brief["campaign"].as_str().unwrap_or("campaign");
    let hash = asset["hash"].as_str().unwrap_or_default();
    // Same campaign, same asset hash, same window: the same key (duplicate risk, §5.4).
    let key = format!("publish:{campaign}:{hash}");
    // A slot the campaign gives is the post's `not_before`: docket holds it until then.
    let not_before = slot(&brief["publish_at"]);
    let item = json!({
        "summary": format!("{} scheduled on {} at {}", asset["id"].as_str().unwrap_or("asset"), brief["platform"].as_str().unwrap_or("the platform"), not_before.as_deref().unwrap_or("launch")),
        "schedule_items": [{ "asset_id": asset["id"], "platform": brief["platform"], "lane": "api", "slot": not_before.as_deref().map_or(brief["launch_date"].clone(), |s| json!(s)), "idempotency_key": key }],
    });
    respond(
        request,
        vec![
            write("schedule", item),
            Action::RequestEffect {
                kind: "publish".into(),
                lane: "api".into(),
                idempotency_key: Some(key),
                params: json!({ "platform": brief["platform"], "asset_id": asset["id"], "asset_hash": hash, "text": asset["text"] }),
                not_before,
            },
        ],
    )
}

/// The post's slot as an RFC 3339 time: the campaign's `publish_at` as given, or, for
/// `+DURATION` (`+20s`, `+1h`), that long after now (this agent reads its clock; docket
/// records the time it was given). `None` without a slot or with one it cannot read.
fn slot(publish_at: &Value) -> Option<String> {
    let text = publish_at.as_str()?.trim();
    match text.strip_prefix('+') {
        Some(after) => {
            let span: jiff::Span = after.parse().ok()?;
            let at = jiff::Timestamp::now()
                .checked_add(
                    span.to_duration(jiff::SpanRelativeTo::days_are_24_hours())
                        .ok()?,
                )
                .ok()?;
            Some(at.round(jiff::Unit::Second).ok()?.to_string())
        }
        None => Some(text.to_owned()),
    }
}

/// The messages sent, as the outbox receipts name them (`outbox:POST_ID`).
fn sent_posts(sent: &[&Value]) -> Vec<String> {
    sent.iter()
        .filter_map(|e| e["receipt"]["result"]["post_id"].as_str())
        .map(|id| format!("outbox:{id}"))
        .collect()
}

/// The engagement agent (§2.5): one reply per engagement event, each a side effect with
/// its own key (one send attempt per event, §8.2); a DM waits for a person's approval. A
/// refused send (the kill switch) ends its episode: the lane stops (§6, hard rule), and
/// its result names the replies already sent.
pub fn engagement(request: &AgentRequest) -> AgentResponse {
    if capsules(request)["engagement"]["live"] == true {
        return live_engagement(request);
    }
    let Some(events) = capsules(request)["engagement_events"].as_array() else {
        return refuse(
            request,
            "ENGAGEMENT_EVENTS_MISSING",
            "the task packet lists no engagement events",
        );
    };
    let sent = inputs(request, "effect_result");
    if let Some(refused) = sent
        .iter()
        .find(|e| e["status"] != "applied" && e["status"] != "deduplicated")
    {
        let rule = refused["rule_id"].as_str().unwrap_or_default();
        let class = if rule.starts_with("kill_switch") {
            "kill_switch"
        } else {
            "send_refused"
        };
        let mut stopped = failed(
            &format!(
                "the {} to {} was not sent ({}: {}); no further sends on this lane",
                refused["kind"].as_str().unwrap_or("message"),
                refused["idempotency_key"].as_str().unwrap_or_default(),
                rule,
                refused["reason"].as_str().unwrap_or_default()
            ),
            class,
        );
        stopped.artifacts_created = sent_posts(&sent);
        stopped.next_actions = vec![
            json!({ "for": "human", "task": "answer the remaining engagement by hand once the lane is open" }),
        ];
        return respond(request, vec![finish(stopped)]);
    }
    if let Some(event) = events.get(sent.len()) {
        let id = event["event_id"].as_str().unwrap_or("event");
        let author = event["author"].as_str().unwrap_or("there");
        let (kind, text) = if event["type"] == "dm" {
            (
                "dm",
                format!("Hi {author}, thanks for writing. Your early-bird code is RAIZE-EARLY."),
            )
        } else {
            (
                "comment",
                format!("Thanks {author}! Doors open on launch day; see you there."),
            )
        };
        return respond(
            request,
            vec![Action::RequestEffect {
                kind: kind.into(),
                lane: lane(kind).into(),
                idempotency_key: Some(format!("{kind}:{id}")),
                params: reply_params(event, id, author, &text),
                not_before: None,
            }],
        );
    }
    let summary = format!("{} engagement events answered", sent.len());
    verify_replies_then_finish(request, &sent, summary)
}

/// Verification first (§3.2, §8.1): every reply the episode sent that only the executor
/// confirmed is confirmed by the verifier, one `verify` child each naming
/// `side_effect_attempted`, before the episode
/// writes its conversation summary and ends ok; a reply the verifier could not confirm
/// fails the episode (`visibility_unconfirmed`), naming it.
fn verify_replies_then_finish(
    request: &AgentRequest,
    sent: &[&Value],
    summary: String,
) -> AgentResponse {
    let checks = inputs(request, "episode_result");
    if let Some(check) = checks.iter().find(|c| c["result"]["status"] == "failed") {
        let mut unconfirmed = failed(
            &format!(
                "{summary}, but a reply is unconfirmed: {}",
                check["result"]["summary"].as_str().unwrap_or_default()
            ),
            "visibility_unconfirmed",
        );
        unconfirmed.artifacts_created = sent_posts(sent);
        return respond(request, vec![finish(unconfirmed)]);
    }
    // A reply a person carried out, or the verifier already confirmed, needs no more.
    let to_verify: Vec<&Value> = sent
        .iter()
        .copied()
        .filter(|e| e["status"] == "applied" && e["verified_by"] == "executor")
        .collect();
    if let Some(reply) = to_verify.get(checks.len()) {
        return respond(
            request,
            vec![spawn_because(
                "side_effect_attempted",
                "verifier",
                "verify",
                format!(
                    "confirm the reply {} is visible once",
                    reply["idempotency_key"].as_str().unwrap_or_default()
                ),
                json!({
                    "verify": { "kind": reply["kind"], "idempotency_key": reply["idempotency_key"], "receipt": reply["receipt"] },
                }),
            )],
        );
    }
    let thread: Vec<Value> = sent
        .iter()
        .map(|e| json!({ "key": e["idempotency_key"], "kind": e["kind"], "status": e["status"], "verified": true, "receipt": e["receipt"] }))
        .collect();
    respond(
        request,
        vec![
            write(
                "conversation_summaries",
                json!({ "summary": summary, "thread": thread }),
            ),
            finish(result(
                EpisodeStatus::Ok,
                &format!("{summary}, each verified"),
                &sent_posts(sent),
            )),
        ],
    )
}

/// The lane a reply goes out on: comments through the platform's page (the browser
/// lane: sandbox first, drift evidence), DMs through its API.
fn lane(kind: &str) -> &'static str {
    if kind == "comment" { "browser" } else { "api" }
}

/// A reply's parameters; a comment names the page its thread is on (the event's `page`,
/// `thread` when it names none).
fn reply_params(event: &Value, id: &str, author: &str, text: &str) -> Value {
    let mut params = json!({ "in_reply_to": id, "to": author, "text": text });
    if event["type"] != "dm" {
        params["page"] = json!(event["page"].as_str().unwrap_or("thread"));
    }
    params
}

/// The engagement agent with engagement arriving while the campaign runs (§4.4): it waits
/// for `engagement` events (sent by the ingestion system, delivered by docket scoped to
/// what it answers), annotates each in `engagement_annotations` (a label and a risk flag,
/// naming the event: the event itself it never alters) and replies as for a listed event,
/// until it has answered the campaign's `expect` events (default 2) or a wait's `window`
/// (default 1h) passes without one.
fn live_engagement(request: &AgentRequest) -> AgentResponse {
    let live = &capsules(request)["engagement"];
    let expect = live["expect"].as_u64().unwrap_or(2) as usize;
    let sent = inputs(request, "effect_result");
    let received: Vec<(&str, &Value)> = request
        .decision_inputs
        .iter()
        .filter(|i| i.output_type == "event" && i.source_agent.as_str() == "events")
        .map(|i| {
            (
                i.payload["signal_id"].as_str().unwrap_or_default(),
                &i.payload["payload"],
            )
        })
        .collect();
    if let Some(refused) = sent
        .iter()
        .find(|e| e["status"] != "applied" && e["status"] != "deduplicated")
    {
        let mut stopped = failed(
            &format!(
                "the reply {} was not sent ({}: {}); no further sends on this lane",
                refused["idempotency_key"].as_str().unwrap_or_default(),
                refused["rule_id"].as_str().unwrap_or_default(),
                refused["reason"].as_str().unwrap_or_default()
            ),
            if refused["rule_id"]
                .as_str()
                .is_some_and(|r| r.starts_with("kill_switch"))
            {
                "kill_switch"
            } else {
                "send_refused"
            },
        );
        stopped.artifacts_created = sent_posts(&sent);
        stopped.next_actions = vec![
            json!({ "for": "human", "task": "answer the remaining engagement by hand once the lane is open" }),
        ];
        return respond(request, vec![finish(stopped)]);
    }
    let timed_out = !inputs(request, "event_timed_out").is_empty();
    if let Some((signal_id, event)) = received.get(sent.len()) {
        let id = event["event_id"].as_str().unwrap_or("event");
        let author = event["author"].as_str().unwrap_or("there");
        let (kind, text, label) = if event["type"] == "dm" {
            (
                "dm",
                format!("Hi {author}, thanks for writing. Your early-bird code is RAIZE-EARLY."),
                "request",
            )
        } else {
            (
                "comment",
                format!("Thanks {author}! Doors open on launch day; see you there."),
                "question",
            )
        };
        return respond(
            request,
            vec![
                write(
                    "engagement_annotations",
                    json!({ "signal_id": signal_id, "event_id": id, "label": label, "risk": "low" }),
                ),
                Action::RequestEffect {
                    kind: kind.into(),
                    lane: lane(kind).into(),
                    idempotency_key: Some(format!("{kind}:{id}")),
                    params: reply_params(event, id, author, &text),
                    not_before: None,
                },
            ],
        );
    }
    if sent.len() < expect && !timed_out {
        return respond(
            request,
            vec![Action::Wait {
                until: None,
                duration: Some(live["window"].as_str().unwrap_or("1h").to_owned()),
                event: Some("engagement".into()),
                reason: format!(
                    "{} of {expect} engagement events answered; waiting for the next",
                    sent.len()
                ),
            }],
        );
    }
    let summary = if timed_out {
        format!(
            "{} engagement events answered; no more came in the window",
            sent.len()
        )
    } else {
        format!("{} engagement events answered", sent.len())
    };
    verify_replies_then_finish(request, &sent, summary)
}

/// How many times the verifier asks for a lookup whose executor failed.
pub const LOOKUP_ATTEMPTS: usize = 2;

/// The verifier (§2.6): proves a post is visible exactly once by looking it up in the
/// outbox (a governed tool call), and writes a verification report. A lookup that read
/// nothing (refused, failed [`LOOKUP_ATTEMPTS`] times, or answered without a count) is no
/// evidence either way: the episode ends `needs_review`, naming the post its receipt gives
/// and asking a person to check the platform for it, not as a post found 0 times. With
/// `visibility_uncertain` it recurses to probe again (Class D, §3.2) until its depth limit
/// stops it (`depth_exceeded`). Every result names the post the effect's receipt gives,
/// so a failed verification still says what is out.
pub fn verifier(request: &AgentRequest) -> AgentResponse {
    let Some(key) = episode_goal(request).map(|g| g["inputs"]["verify"]["idempotency_key"].clone())
    else {
        return refuse(
            request,
            "INPUT_MISSING_GOAL",
            "the verifier runs in an episode",
        );
    };
    let key_text = key.as_str().unwrap_or_default();
    // The post the effect's receipt names.
    let receipt_post: Vec<String> = episode_goal(request)
        .and_then(|g| g["inputs"]["verify"]["receipt"]["result"]["post_id"].as_str())
        .map(|id| format!("outbox:{id}"))
        .into_iter()
        .collect();
    let unconfirmed = |why: &str| {
        let mut result = failed(why, "visibility_unconfirmed");
        result.artifacts_created.clone_from(&receipt_post);
        respond(request, vec![finish(result)])
    };
    if trigger(request) == "visibility_uncertain" {
        if let Some(probe) = inputs(request, "episode_result").last() {
            return unconfirmed(&format!(
                "visibility of {key_text} unconfirmed: {}",
                probe["result"]["summary"].as_str().unwrap_or_default()
            ));
        }
        return respond(
            request,
            vec![spawn_because(
                "visibility_uncertain",
                "verifier",
                "tool_probe",
                format!("probe the platform again for {key_text}"),
                json!({ "trigger": "visibility_uncertain", "verify": { "idempotency_key": key } }),
            )],
        );
    }
    let lookups = inputs(request, "tool_result");
    let look_up = || {
        // docket runs the lookup and charges it to this episode's `tool_calls` budget
        // itself (decider version 11): the agent reports only tools it runs on its own.
        respond(
            request,
            vec![Action::CallTool {
                name: "outbox_lookup".into(),
                arguments: json!({ "idempotency_key": key }),
            }],
        )
    };
    let Some(lookup) = lookups.last().copied() else {
        return look_up();
    };
    let status = lookup["status"].as_str();
    let found = match (status, lookup["result"]["count"].as_u64()) {
        (Some("returned"), Some(found)) => found,
        // The lookup only reads the outbox: a failed one is tried again.
        (Some("failed"), _) if lookups.len() < LOOKUP_ATTEMPTS => return look_up(),
        _ => {
            // The outbox was not read: that is no evidence of absence, nor of the
            // post. A person looks at the platform before the result is used.
            let why = match status {
                Some("returned") => "answered without a count of the records it read".to_owned(),
                Some("denied") => format!(
                    "was refused [{}]: {}",
                    lookup["rule_id"].as_str().unwrap_or_default(),
                    lookup["reason"].as_str().unwrap_or_default()
                ),
                Some("failed") => format!(
                    "failed {} times, last {}: {}",
                    lookups.len(),
                    lookup["code"].as_str().unwrap_or_default(),
                    lookup["message"].as_str().unwrap_or_default()
                ),
                other => format!("answered with status {other:?}"),
            };
            let mut review = result(
                EpisodeStatus::NeedsReview,
                &format!(
                    "visibility of {key_text} not checked: the outbox lookup {why}; check the platform for the post"
                ),
                &receipt_post,
            );
            // What the person is asked to do; an approved result still carries it, which
            // is how the publisher tells a person's check from the verifier's.
            review.next_actions = vec![json!({
                "for": "human",
                "task": format!(
                    "check the platform for {} ({key_text})",
                    receipt_post.first().map_or("the post", String::as_str)
                ),
            })];
            return respond(request, vec![finish(review)]);
        }
    };
    let post = &lookup["result"]["records"][0];
    if found != 1 {
        return unconfirmed(&format!(
            "{key_text} found {found} times in the outbox (expected once)"
        ));
    }
    let summary = format!(
        "{key_text} visible once in the outbox ({})",
        post["post_id"].as_str().unwrap_or_default()
    );
    respond(
        request,
        vec![
            write(
                "verification_reports",
                json!({ "summary": summary, "report": { "idempotency_key": key, "post_id": post["post_id"], "copies": found, "visible": true } }),
            ),
            finish(result(
                EpisodeStatus::Ok,
                &summary,
                &[format!(
                    "outbox:{}",
                    post["post_id"].as_str().unwrap_or_default()
                )],
            )),
        ],
    )
}

/// The doc agent (§2.7): appends a journal entry of the campaign's episodes, for
/// continuity between runs.
pub fn doc(request: &AgentRequest) -> AgentResponse {
    let packet = capsules(request);
    let Some(episodes) = packet["episodes"].as_array() else {
        return refuse(
            request,
            "EPISODES_MISSING",
            "the task packet lists no episodes to journal",
        );
    };
    let campaign = packet["campaign"].as_str().unwrap_or("campaign");
    let entry = format!("journal:{campaign}");
    respond(
        request,
        vec![
            write(
                "docs_journal",
                json!({ "summary": format!("{campaign}: {} episodes journaled", episodes.len()), "journal": episodes }),
            ),
            finish(result(
                EpisodeStatus::Ok,
                &format!("{entry} appended"),
                std::slice::from_ref(&entry),
            )),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn goal_request(agent: &str, episode_type: &str, inputs: Value) -> AgentRequest {
        AgentRequest::new("r1", "orchestrator", agent, "episode").with_decision_input(
            "orchestrator",
            "episode_goal",
            json!({ "episode_id": "ep-2", "episode_type": episode_type, "goal": "g", "budget": {"tokens": 1000}, "inputs": inputs }),
        )
    }

    fn actions(response: &AgentResponse) -> Value {
        serde_json::to_value(response).expect("serialises")["actions"].clone()
    }

    #[test]
    fn every_named_agent_exists() {
        for name in AGENTS {
            assert!(agent(name).is_some(), "{name}");
        }
        assert!(agent("outbox").is_none());
    }

    #[test]
    fn the_orchestrator_starts_with_a_plan_episode_and_never_posts() {
        let request = AgentRequest::new("r1", "external", "orchestrator", "campaign")
            .with_decision_input(
                "external",
                "campaign_request",
                json!({"campaign": "spring", "platform": "linkedin"}),
            );
        let a = actions(&orchestrator(&request));
        assert_eq!(a[0]["type"], "spawn");
        assert_eq!(a[0]["agent"], "planner");
        assert_eq!(a[0]["episode_type"], "plan");
    }

    #[test]
    fn a_runaway_render_reports_its_whole_budget() {
        let request = goal_request("creator", "create", json!({"trigger": "render_runaway"}))
            .with_context_input(
                "planner",
                "domain:plan_graph@v1",
                json!({"plan_node": {"id": "p"}}),
            );
        let response = creator(&request);
        assert_eq!(response.usage.input_tokens, 1000);
    }

    #[test]
    fn the_same_asset_gets_the_same_publish_key() {
        let request = goal_request(
            "publisher",
            "publish",
            json!({"capsule_refs": {"campaign": "spring"}}),
        )
        .with_context_input(
            "creator",
            "domain:asset_graph@v1",
            json!({"asset": {"id": "a", "hash": "abc", "text": "t"}}),
        );
        let a = actions(&publisher(&request));
        assert_eq!(a[1]["type"], "request_effect");
        assert_eq!(a[1]["idempotency_key"], "publish:spring:abc");
        assert_eq!(actions(&publisher(&request)), a);
    }

    #[test]
    fn a_refused_dm_stops_the_engagement_lane() {
        let request = goal_request(
            "engagement",
            "engage",
            json!({"capsule_refs": {"engagement_events": [{"event_id": "e1", "type": "dm", "author": "jo"}, {"event_id": "e2", "type": "comment"}]}}),
        )
        .with_decision_input("effects", "effect_result", json!({"status": "refused", "kind": "dm", "rule_id": "kill_switch.api", "idempotency_key": "dm:e1"}));
        let a = actions(&engagement(&request));
        assert_eq!(a[0]["type"], "finish_episode");
        assert_eq!(a[0]["result"]["error_class"], "kill_switch");
    }

    #[test]
    fn a_stopped_lane_names_the_replies_already_sent() {
        let request = goal_request(
            "engagement",
            "engage",
            json!({"capsule_refs": {"engagement_events": [{"event_id": "e1", "type": "comment"}, {"event_id": "e2", "type": "dm"}]}}),
        )
        .with_decision_input("effects", "effect_result", json!({"status": "applied", "kind": "comment", "idempotency_key": "comment:e1", "receipt": {"result": {"post_id": "comment-2"}}}))
        .with_decision_input("effects", "effect_result", json!({"status": "refused", "kind": "dm", "rule_id": "kill_switch.api", "idempotency_key": "dm:e2"}));
        let a = actions(&engagement(&request));
        assert_eq!(a[0]["result"]["status"], "failed");
        assert_eq!(
            a[0]["result"]["artifacts_created"],
            json!(["outbox:comment-2"])
        );
    }

    /// The verifier's request for `key`, whose post the receipt names `publish-1`, after
    /// the lookups `outcomes`.
    fn verify_request(outcomes: &[Value]) -> AgentRequest {
        let mut request = goal_request(
            "verifier",
            "verify",
            json!({"verify": {"kind": "publish", "idempotency_key": "publish:s:abc", "receipt": {"result": {"post_id": "publish-1"}}}}),
        );
        for outcome in outcomes {
            request = request.with_decision_input("tools", "tool_result", outcome.clone());
        }
        request
    }

    #[test]
    fn a_lookup_that_read_nothing_is_not_a_post_found_0_times() {
        let read_nothing = [
            (
                json!({"status": "denied", "rule_id": "workflow.tools", "reason": "no executor"}),
                "the outbox lookup was refused [workflow.tools]: no executor",
            ),
            (
                json!({"status": "returned", "result": {"records": []}}),
                "the outbox lookup answered without a count of the records it read",
            ),
        ];
        for (outcome, why) in read_nothing {
            let a = actions(&verifier(&verify_request(&[outcome])));
            let result = &a[0]["result"];
            assert_eq!(result["status"], "needs_review", "{result}");
            assert_eq!(
                result["summary"],
                format!(
                    "visibility of publish:s:abc not checked: {why}; check the platform for the post"
                )
            );
            assert_eq!(result["artifacts_created"], json!(["outbox:publish-1"]));
            assert_eq!(
                result["next_actions"],
                json!([{"for": "human", "task": "check the platform for outbox:publish-1 (publish:s:abc)"}])
            );
        }
        // A failed lookup is asked for again once.
        let failed = json!({"status": "failed", "code": "EXIT_1", "message": "down"});
        let a = actions(&verifier(&verify_request(std::slice::from_ref(&failed))));
        assert_eq!(a[0]["type"], "call_tool");
        let a = actions(&verifier(&verify_request(&[failed.clone(), failed])));
        assert_eq!(a[0]["result"]["status"], "needs_review");
        // A lookup that read the outbox and counted 0 records fails, naming the receipt's post.
        let a = actions(&verifier(&verify_request(&[
            json!({"status": "returned", "result": {"count": 0, "records": []}}),
        ])));
        let result = &a[0]["result"];
        assert_eq!(result["status"], "failed", "{result}");
        assert_eq!(
            result["summary"],
            "publish:s:abc found 0 times in the outbox (expected once)"
        );
        assert_eq!(result["artifacts_created"], json!(["outbox:publish-1"]));
    }

    fn publisher_given(verdict: Value) -> Value {
        let request = goal_request("publisher", "publish", json!({})).with_decision_input(
            "verifier",
            "episode_result",
            json!({"episode_id": "ep-5", "episode_type": "verify", "result": verdict}),
        );
        actions(&publisher(&request))[0]["result"].clone()
    }

    #[test]
    fn the_publisher_says_who_confirmed_the_post() {
        let verified = publisher_given(json!({
            "status": "ok", "summary": "k visible once in the outbox (publish-1)",
            "artifacts_created": ["outbox:publish-1"], "next_actions": [],
        }));
        assert_eq!(
            verified["summary"],
            "published and verified: k visible once in the outbox (publish-1)"
        );
        // A needs_review result a person approved reaches the publisher as ok, with the
        // check it asked for.
        let reviewed = publisher_given(json!({
            "status": "ok", "summary": "visibility of k not checked: the outbox lookup was refused [r]: x; check the platform for the post",
            "artifacts_created": ["outbox:publish-1"],
            "next_actions": [{"for": "human", "task": "check the platform for outbox:publish-1 (k)"}],
        }));
        assert_eq!(
            reviewed["summary"],
            "published; visibility accepted by a person on review (visibility of k not checked: the outbox lookup was refused [r]: x; check the platform for the post)"
        );
        assert_eq!(reviewed["artifacts_created"], json!(["outbox:publish-1"]));
        let unconfirmed = publisher_given(json!({
            "status": "failed", "summary": "k found 0 times in the outbox (expected once)",
            "error_class": "visibility_unconfirmed", "artifacts_created": ["outbox:publish-1"],
        }));
        assert_eq!(unconfirmed["status"], "failed");
        assert_eq!(
            unconfirmed["artifacts_created"],
            json!(["outbox:publish-1"])
        );
    }

    #[test]
    fn a_failed_campaign_names_what_its_children_created() {
        let child = |id: &str, kind: &str, status: &str, artifacts: Value| json!({"episode_id": id, "episode_type": kind, "result": {"status": status, "summary": "s", "artifacts_created": artifacts, "error_class": "kill_switch"}});
        let request = AgentRequest::new("r1", "external", "orchestrator", "campaign")
            .with_decision_input(
                "external",
                "campaign_request",
                json!({"campaign": "spring"}),
            )
            .with_decision_input(
                "planner",
                "episode_result",
                child("ep-2", "plan", "ok", json!(["plan_graph:p"])),
            )
            .with_decision_input(
                "publisher",
                "episode_result",
                child("ep-4", "publish", "ok", json!(["outbox:publish-1"])),
            )
            .with_decision_input(
                "engagement",
                "episode_result",
                child("ep-6", "engage", "failed", json!(["outbox:comment-2"])),
            );
        let result = actions(&orchestrator(&request))[0]["result"].clone();
        assert_eq!(result["status"], "failed");
        assert_eq!(result["error_class"], "kill_switch");
        assert_eq!(
            result["artifacts_created"],
            json!(["plan_graph:p", "outbox:publish-1", "outbox:comment-2"])
        );
        assert_eq!(
            result["decisions"],
            json!([
                {"episode": "ep-2", "type": "plan", "status": "ok"},
                {"episode": "ep-4", "type": "publish", "status": "ok"},
                {"episode": "ep-6", "type": "engage", "status": "failed"},
            ])
        );
    }
}
