//! Time formats upstream writes into flags, history and logs (Python's `isoformat()` and
//! friends), so files written by either agent read the same.

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};

/// Python's `datetime.isoformat()` of a naive datetime: microseconds are shown unless zero.
fn iso(datetime: DateTime) -> String {
    let micros = datetime.subsec_nanosecond() / 1_000;
    let base = zero_padded(datetime, "T", ":");
    if micros == 0 {
        base
    } else {
        format!("{base}.{micros:06}")
    }
}

/// `datetime.now().isoformat()`: local wall-clock time without an offset (flag files, stream
/// prefixes).
pub fn local_naive(now: &Zoned) -> String {
    iso(now.datetime())
}

/// `datetime.now(timezone.utc).isoformat()`: UTC with `+00:00` (history entries).
pub fn utc_offset(now: Timestamp) -> String {
    format!("{}+00:00", iso(now.to_zoned(TimeZone::UTC).datetime()))
}

/// `%Y-%m-%d-%H%M%S` in UTC: the timestamp in log file names.
pub fn log_file_stamp(now: Timestamp) -> String {
    zero_padded(now.to_zoned(TimeZone::UTC).datetime(), "-", "")
}

/// Year, month, day, hour, minute and second, zero-padded as Python's `%Y-%m-%d` and `%H%M%S`
/// pad them, with `between` after the date and `time_separator` between the time fields.
fn zero_padded(datetime: DateTime, between: &str, time_separator: &str) -> String {
    format!(
        "{:04}-{:02}-{:02}{between}{:02}{time_separator}{:02}{time_separator}{:02}",
        datetime.year(),
        datetime.month(),
        datetime.day(),
        datetime.hour(),
        datetime.minute(),
        datetime.second()
    )
}

/// `str(time.time())`: seconds since the epoch as Python prints a float (interrupt flags).
pub fn epoch_seconds(now: Timestamp) -> String {
    let seconds = now.as_microsecond() as f64 / 1_000_000.0;
    let text = seconds.to_string();
    if text.contains('.') || text.contains('e') {
        text
    } else {
        format!("{text}.0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn formats_match_python() {
        let with_micros = at("2025-06-01T12:34:56.789012Z");
        let whole = at("2025-06-01T12:34:56Z");
        assert_eq!(utc_offset(with_micros), "2025-06-01T12:34:56.789012+00:00");
        assert_eq!(utc_offset(whole), "2025-06-01T12:34:56+00:00");
        assert_eq!(
            local_naive(&with_micros.to_zoned(TimeZone::UTC)),
            "2025-06-01T12:34:56.789012"
        );
        assert_eq!(
            local_naive(&whole.to_zoned(TimeZone::fixed(jiff::tz::offset(2)))),
            "2025-06-01T14:34:56"
        );
        assert_eq!(log_file_stamp(with_micros), "2025-06-01-123456");
        assert_eq!(epoch_seconds(at("2024-04-05T18:41:18.5Z")), "1712342478.5");
        assert_eq!(epoch_seconds(at("2024-04-05T18:41:18Z")), "1712342478.0");
    }
}
