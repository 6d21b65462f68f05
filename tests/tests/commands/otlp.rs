//! The OpenTelemetry export (docs/observability.md): a geo run with `--otlp` sends its
//! spans, before `docket` exits, to a collector (here a small OTLP/HTTP receiver on
//! 127.0.0.1:0 decoding the protobuf with `opentelemetry-proto`): the run's span, one
//! `invoke_agent {agent}` per agent call and one span per handoff, named and attributed as
//! the GenAI conventions say, each child of the run's span in one trace, and each
//! `docket.seq` the position of the event that records the step.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use docket_tests::{docket_on, exit_code, geo_agents_built, geo_workflow, run_events, stdout_text};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;

/// A receiver of OTLP/HTTP posts: every request body, in the order received.
fn receiver() -> (String, Arc<Mutex<Vec<Vec<u8>>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = format!("http://{}", listener.local_addr().expect("address"));
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let kept = bodies.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let kept = kept.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut writer = stream;
                // Requests on one connection, one after another (keep-alive).
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().expect("content-length");
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).expect("body");
                    kept.lock().expect("lock").push(body);
                    let _ = writer.write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
                    );
                }
            });
        }
    });
    (address, bodies)
}

fn spans(bodies: &[Vec<u8>]) -> Vec<Span> {
    bodies
        .iter()
        .flat_map(|b| {
            ExportTraceServiceRequest::decode(b.as_slice())
                .expect("an OTLP trace export")
                .resource_spans
        })
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .collect()
}

/// A span's attributes, strings and integers as text.
fn attributes(span: &Span) -> BTreeMap<String, String> {
    span.attributes
        .iter()
        .filter_map(|kv| {
            let v = match kv.value.as_ref()?.value.as_ref()? {
                AnyValue::StringValue(s) => s.clone(),
                AnyValue::IntValue(i) => i.to_string(),
                AnyValue::BoolValue(b) => b.to_string(),
                other => format!("{other:?}"),
            };
            Some((kv.key.clone(), v))
        })
        .collect()
}

#[test]
fn a_geo_run_exports_its_spans_with_genai_names_attributes_and_parents() {
    geo_agents_built();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let (collector, bodies) = receiver();
    let workflow = geo_workflow();
    let out = docket_on(
        &data,
        &[
            "run",
            workflow.to_str().expect("utf-8"),
            "--run-id",
            "traced",
            "--otlp",
            &collector,
        ],
    );
    assert_eq!(
        exit_code(&out),
        0,
        "{}{}",
        stdout_text(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    // Flushed before the process exited: everything is here already.
    let spans = spans(&bodies.lock().expect("lock"));
    let events = run_events(&data, "traced");

    let runs: Vec<&Span> = spans.iter().filter(|s| s.name == "run geo").collect();
    assert_eq!(runs.len(), 1, "{:?}", names(&spans));
    let run = runs[0];
    assert!(run.parent_span_id.is_empty(), "the run's span is a root");
    let a = attributes(run);
    assert_eq!(a["docket.run_id"], "traced");
    assert_eq!(a["docket.status"], "completed");

    // One invoke_agent span per agent call, in the run's trace, child of the run.
    let called: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "agent.call_scheduled")
        .map(|e| {
            e["payload"]["request"]["target_agent"]
                .as_str()
                .expect("agent")
                .to_owned()
        })
        .collect();
    let calls: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("invoke_agent "))
        .collect();
    assert_eq!(calls.len(), called.len(), "{:?}", names(&spans));
    let mut agents = Vec::new();
    for span in &calls {
        assert_eq!(span.trace_id, run.trace_id);
        assert_eq!(span.parent_span_id, run.span_id, "{}", span.name);
        let a = attributes(span);
        assert_eq!(a["gen_ai.operation.name"], "invoke_agent");
        assert_eq!(
            span.name,
            format!("invoke_agent {}", a["gen_ai.agent.name"])
        );
        assert_eq!(a["docket.run_id"], "traced");
        assert!(a.contains_key("gen_ai.usage.input_tokens"), "{a:?}");
        assert!(a.contains_key("gen_ai.usage.output_tokens"), "{a:?}");
        // docket.seq: where the agent's answer is recorded.
        let seq: usize = a["docket.seq"].parse().expect("an integer");
        let answer = &events[seq - 1];
        assert_eq!(answer["kind"], "agent.responded", "{answer}");
        agents.push(a["gen_ai.agent.name"].clone());
    }
    agents.sort();
    let mut expected = called.clone();
    expected.sort();
    assert_eq!(agents, expected);

    // One span per handoff, at the seq of its handoff.allowed, child of the run, with
    // the tokens its audit counted before and after scoping.
    let recorded: Vec<(u64, String, String, String, String)> = events
        .iter()
        .filter(|e| e["kind"] == "handoff.allowed")
        .map(|e| {
            let audit = &e["payload"]["audit"];
            (
                e["seq"].as_u64().expect("seq"),
                e["payload"]["from"].as_str().expect("from").to_owned(),
                e["payload"]["to"].as_str().expect("to").to_owned(),
                audit["context_before_scoping"]["total_tokens"].to_string(),
                audit["context_after_scoping"]["total_tokens"].to_string(),
            )
        })
        .collect();
    // Scoping removed something somewhere in the geo run, so the counts are not all equal.
    assert!(
        recorded
            .iter()
            .any(|(_, _, _, before, after)| before != after),
        "{recorded:?}"
    );
    let mut handoffs: Vec<(u64, String, String, String, String)> = spans
        .iter()
        .filter(|s| s.name.starts_with("handoff "))
        .map(|s| {
            assert_eq!(s.parent_span_id, run.span_id, "{}", s.name);
            let a = attributes(s);
            assert_eq!(
                s.name,
                format!(
                    "handoff {} → {}",
                    a["docket.handoff.from"], a["docket.handoff.to"]
                )
            );
            assert_eq!(a["docket.verdict"], "allow");
            (
                a["docket.seq"].parse().expect("an integer"),
                a["docket.handoff.from"].clone(),
                a["docket.handoff.to"].clone(),
                a["docket.handoff.tokens_before"].clone(),
                a["docket.handoff.tokens_after"].clone(),
            )
        })
        .collect();
    handoffs.sort();
    assert_eq!(handoffs, recorded);
}

fn names(spans: &[Span]) -> Vec<&str> {
    spans.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn an_endpoint_docket_cannot_send_to_is_refused_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = docket_on(dir.path(), &["runs", "--otlp", "grpc://collector:4317"]);
    assert_eq!(exit_code(&out), 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--otlp") && err.contains("https://"), "{err}");
}

#[test]
fn a_ca_file_docket_cannot_read_is_refused_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(docket_tests::docket_bin())
        .args(["runs", "--otlp", "https://collector:4318", "--data"])
        .arg(dir.path())
        .env(
            "OTEL_EXPORTER_OTLP_CERTIFICATE",
            dir.path().join("no-ca.pem"),
        )
        .output()
        .expect("docket runs");
    assert_eq!(exit_code(&out), 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot read the CA file") && err.contains("no-ca.pem"),
        "{err}"
    );
}
