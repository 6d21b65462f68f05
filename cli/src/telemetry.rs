//! The trace `docket` writes: on stderr, filtered by `RUST_LOG`; and, when asked to
//! (`--otlp ENDPOINT`, or the standard `OTEL_EXPORTER_OTLP_ENDPOINT` /
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), the runtime's spans exported over OTLP/HTTP
//! (protobuf) to a collector (docs/observability.md). Off unless configured; the spans
//! still queued are sent before `docket` exits.

mod client;

use std::sync::OnceLock;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// `--otlp ENDPOINT`, set once by `main`.
pub(crate) static OTLP_FLAG: OnceLock<Option<String>> = OnceLock::new();

/// Where spans go: the flag first, then the standard variables.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Destination {
    /// A URL to send to as given (`…/v1/traces`).
    Url(String),
    /// The exporter reads `OTEL_EXPORTER_OTLP_*` itself (headers, timeouts too); the
    /// endpoint they name is `https://` when `https`.
    Environment {
        /// Whether the endpoint is `https://`.
        https: bool,
    },
}

impl Destination {
    fn https(&self) -> bool {
        match self {
            Self::Url(url) => url.starts_with("https://"),
            Self::Environment { https } => *https,
        }
    }
}

/// The collector URL that traces are posted to, from a base endpoint as the OTLP spec
/// gives it (`http://host:4318` → `http://host:4318/v1/traces`); a URL already ending in
/// `/v1/traces` is kept. `http://` or `https://`.
fn traces_url(endpoint: &str, what: &str) -> Result<String, String> {
    let endpoint = endpoint.trim();
    let Some(rest) = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"))
    else {
        return Err(format!(
            "{what} {endpoint:?} is not an http:// or https:// URL (e.g. \
             http://127.0.0.1:4318)"
        ));
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("{what} {endpoint:?} names no host"));
    }
    if endpoint.ends_with("/v1/traces") {
        Ok(endpoint.to_owned())
    } else {
        Ok(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Where to send, if anywhere: `Err` names a setting that cannot be used.
fn destination() -> Result<Option<Destination>, String> {
    if let Some(Some(flag)) = OTLP_FLAG.get() {
        return traces_url(flag, "--otlp").map(|u| Some(Destination::Url(u)));
    }
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    for name in [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ] {
        if let Some(v) = env(name) {
            // The traces variable is used as given, per the spec; both are checked so a
            // typo is said, not silently dropped.
            let https = traces_url(&v, name)?.starts_with("https://");
            return Ok(Some(Destination::Environment { https }));
        }
    }
    Ok(None)
}

/// The CA file trusting an `https://` collector's certificate besides the system's
/// roots, as the OTLP specification names it: the traces variable, then the general one.
fn ca_file() -> Option<std::path::PathBuf> {
    env("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE")
        .or_else(|| env("OTEL_EXPORTER_OTLP_CERTIFICATE"))
        .map(std::path::PathBuf::from)
}

/// Keeps the exporter alive; dropping it sends what is queued and stops it. Drop it
/// outside the async runtime (the exporter's HTTP client blocks).
pub(crate) struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            if let Err(e) = provider.force_flush() {
                say!("warning: OpenTelemetry spans not all sent: {e}");
            }
            let _ = provider.shutdown();
        }
    }
}

/// Sets up the trace: stderr always, OTLP when configured. A setting that cannot be used
/// is an error naming it; nothing is set up then.
pub(crate) fn init() -> Result<Telemetry, String> {
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(crate::words::stderr_colour())
        .with_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        );
    let destination = destination()?;
    let Some(destination) = destination else {
        let _ = tracing_subscriber::registry().with(stderr).try_init();
        return Ok(Telemetry { provider: None });
    };
    let ca_file = ca_file().filter(|_| destination.https());
    let collector = client::Collector::new(destination.https(), ca_file.as_deref())
        .map_err(|e| format!("cannot set up the OTLP exporter: {e}"))?;
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(collector)
        .with_protocol(Protocol::HttpBinary);
    if let Destination::Url(url) = &destination {
        exporter = exporter.with_endpoint(url.clone());
    }
    let exporter = exporter
        .build()
        .map_err(|e| format!("cannot set up the OTLP exporter: {e}"))?;
    let mut resource = Resource::builder();
    if env("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("docket");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer("docket");
    // The runtime's spans (runs, agent calls, handoffs, tool calls, effects), whatever
    // RUST_LOG says for stderr.
    let exported = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(
            Targets::new()
                .with_target("docket_runtime", LevelFilter::INFO)
                .with_default(LevelFilter::OFF),
        );
    let _ = tracing_subscriber::registry()
        .with(stderr)
        .with(exported)
        .try_init();
    Ok(Telemetry {
        provider: Some(provider),
    })
}

#[cfg(test)]
mod tests {
    use super::traces_url;

    #[test]
    fn a_base_endpoint_gets_the_traces_path_and_a_full_one_is_kept() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318", "x").as_deref(),
            Ok("http://127.0.0.1:4318/v1/traces")
        );
        assert_eq!(
            traces_url("http://c:4318/", "x").as_deref(),
            Ok("http://c:4318/v1/traces")
        );
        assert_eq!(
            traces_url("http://c:4318/v1/traces", "x").as_deref(),
            Ok("http://c:4318/v1/traces")
        );
        assert_eq!(
            traces_url("https://c:4318", "x").as_deref(),
            Ok("https://c:4318/v1/traces")
        );
        let e = traces_url("grpc://c:4317", "--otlp").unwrap_err();
        assert!(e.contains("--otlp") && e.contains("https://"), "{e}");
        assert!(traces_url("http://", "--otlp").is_err());
        assert!(traces_url("localhost:4318", "--otlp").is_err());
    }
}
