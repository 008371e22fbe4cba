//! Log output: JSON or console lines on stderr, with upstream's `LOG_ENCODER`, `LOG_LEVEL` and
//! `LOG_TIME_ENCODER` settings. `RUST_LOG`, when set, replaces the level with a full
//! `tracing` filter (for example `info,controller=trace,kube=debug`).
//!
//! Contract: [`filter_directives`] and [`format_time`] are pure; [`init`] installs the global
//! subscriber once, at start.

use std::fmt;

use jiff::Timestamp;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

use crate::config::{LogEncoder, LogSettings, TimeEncoder};

/// The filter for `level`: the controller's own messages at that level, dependencies at `warn`.
pub fn filter_directives(level: tracing::Level) -> String {
    let level = level.as_str().to_ascii_lowercase();
    format!("warn,controller={level},skyhook_controller={level},skyhook_api={level}")
}

/// Writes `now` in the format `encoder` names, as zap writes its timestamps.
pub fn format_time(encoder: TimeEncoder, now: Timestamp, out: &mut impl fmt::Write) -> fmt::Result {
    match encoder {
        TimeEncoder::Rfc3339 => write!(out, "{}", now.strftime("%Y-%m-%dT%H:%M:%SZ")),
        TimeEncoder::Rfc3339Nano => write!(out, "{now:.9}"),
        TimeEncoder::Iso8601 => write!(out, "{now:.3}"),
        TimeEncoder::Epoch => {
            let nanos = now.as_nanosecond();
            write!(
                out,
                "{}.{:09}",
                nanos.div_euclid(1_000_000_000),
                nanos.rem_euclid(1_000_000_000)
            )
        }
        TimeEncoder::Millis => {
            let nanos = now.as_nanosecond();
            write!(
                out,
                "{}.{:06}",
                nanos.div_euclid(1_000_000),
                nanos.rem_euclid(1_000_000)
            )
        }
        TimeEncoder::Nanos => write!(out, "{}", now.as_nanosecond()),
    }
}

/// A `tracing-subscriber` timer using [`format_time`].
#[derive(Debug, Clone, Copy)]
struct Timer(TimeEncoder);

impl FormatTime for Timer {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        format_time(self.0, Timestamp::now(), w)
    }
}

/// Installs the global log subscriber.
pub fn init(settings: LogSettings) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.is_empty() => EnvFilter::try_new(directives)?,
        _ => EnvFilter::try_new(filter_directives(settings.level))?,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_timer(Timer(settings.time_encoder))
        .with_writer(std::io::stderr);
    match settings.encoder {
        LogEncoder::Json => builder.json().flatten_event(true).try_init(),
        LogEncoder::Console => builder.with_ansi(false).try_init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        let now: Timestamp = "2026-05-01T12:00:03.123456789Z".parse().unwrap();
        let cases = [
            (TimeEncoder::Rfc3339, "2026-05-01T12:00:03Z"),
            (TimeEncoder::Rfc3339Nano, "2026-05-01T12:00:03.123456789Z"),
            (TimeEncoder::Iso8601, "2026-05-01T12:00:03.123Z"),
            (TimeEncoder::Epoch, "1777636803.123456789"),
            (TimeEncoder::Millis, "1777636803123.456789"),
            (TimeEncoder::Nanos, "1777636803123456789"),
        ];
        for (encoder, want) in cases {
            let mut out = String::new();
            format_time(encoder, now, &mut out).unwrap();
            assert_eq!(out, want, "{encoder:?}");
        }
    }

    #[test]
    fn directives_parse() {
        for level in [tracing::Level::DEBUG, tracing::Level::ERROR] {
            let directives = filter_directives(level);
            assert!(EnvFilter::try_new(&directives).is_ok(), "{directives}");
        }
        assert_eq!(
            filter_directives(tracing::Level::INFO),
            "warn,controller=info,skyhook_controller=info,skyhook_api=info"
        );
    }
}
