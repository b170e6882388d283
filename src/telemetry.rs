//! Logging set-up and error formatting.

use tracing_subscriber::{fmt, prelude::*, EnvFilter};

/// Structured logs on stderr: JSON when `TICKERTAPE_LOG_FORMAT=json`,
/// readable text otherwise; level from `RUST_LOG` (default `info`).
pub fn init() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,mongodb=warn,actix_server=warn"));
    let json = std::env::var("TICKERTAPE_LOG_FORMAT").is_ok_and(|v| v == "json");
    let registry = tracing_subscriber::registry().with(filter);
    let result = if json {
        registry
            .with(fmt::layer().json().with_writer(std::io::stderr))
            .try_init()
    } else {
        // Colour codes only for a person at a terminal, not in a log file.
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        registry
            .with(fmt::layer().with_ansi(ansi).with_writer(std::io::stderr))
            .try_init()
    };
    let _ = result; // already initialised (tests): keep the first
}

/// An error with its causes, `outer: inner: innermost`, for logs only.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The span of one HTTP request: method, route pattern (never the query
/// string, which can hold a visitor's page, nor the client address) and
/// status; what runs inside (a report query, a login) is logged within it.
pub struct RequestSpan;

impl tracing_actix_web::RootSpanBuilder for RequestSpan {
    fn on_request_start(request: &actix_web::dev::ServiceRequest) -> tracing::Span {
        let route = request
            .match_pattern()
            .unwrap_or_else(|| "(no route)".to_owned());
        tracing::info_span!(
            "request",
            method = %request.method(),
            route = %route,
            status = tracing::field::Empty,
        )
    }

    fn on_request_end<B: actix_web::body::MessageBody>(
        span: tracing::Span,
        outcome: &Result<actix_web::dev::ServiceResponse<B>, actix_web::Error>,
    ) {
        let status = match outcome {
            Ok(response) => response.status(),
            Err(e) => e.as_response_error().status_code(),
        };
        span.record("status", status.as_u16());
    }
}
