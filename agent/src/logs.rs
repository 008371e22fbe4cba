//! Step output: timestamped, labelled lines, and which old log files to delete.

use std::time::SystemTime;

/// How many log files per step are kept.
pub const KEEP_LOGS: usize = 5;

/// A partial line longer than this is written out without waiting for its newline, so a step
/// that prints without newlines cannot grow the agent's memory without bound.
const MAX_PENDING_LINE: usize = 1 << 20;

/// Turns a stream of output chunks into lines `<label><timestamp> <text>\n`. A line carries the
/// time its first byte was read, as upstream stamps its chunks.
#[derive(Debug)]
pub struct LineStamper {
    label: &'static str,
    pending: Vec<u8>,
    pending_stamp: Option<String>,
}

impl LineStamper {
    /// `label` is `[out]` or `[err]`.
    pub fn new(label: &'static str) -> Self {
        LineStamper {
            label,
            pending: Vec::new(),
            pending_stamp: None,
        }
    }

    /// Feeds a chunk read at time `stamp`; returns the complete lines it finished.
    pub fn push(&mut self, chunk: &[u8], stamp: &str) -> String {
        let mut out = String::new();
        for &byte in chunk {
            if self.pending_stamp.is_none() {
                self.pending_stamp = Some(stamp.to_string());
            }
            if byte == b'\n' {
                self.emit(&mut out);
            } else {
                self.pending.push(byte);
                if self.pending.len() >= MAX_PENDING_LINE {
                    self.emit(&mut out);
                }
            }
        }
        out
    }

    /// Ends the stream: a last line without a newline gets one.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        if !self.pending.is_empty() {
            self.emit(&mut out);
        }
        out
    }

    fn emit(&mut self, out: &mut String) {
        let stamp = self.pending_stamp.take().unwrap_or_default();
        out.push_str(self.label);
        out.push_str(&stamp);
        out.push(' ');
        out.push_str(&String::from_utf8_lossy(&self.pending));
        out.push('\n');
        self.pending.clear();
    }
}

/// A log file found in a step's log directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    pub name: String,
    pub modified: SystemTime,
}

/// Whether `name` is `<stem>-YYYY-MM-DD-HHMMSS.log`.
pub fn is_step_log(stem: &str, name: &str) -> bool {
    let Some(stamp) = name
        .strip_prefix(stem)
        .and_then(|rest| rest.strip_prefix('-'))
        .and_then(|rest| rest.strip_suffix(".log"))
    else {
        return false;
    };
    let bytes = stamp.as_bytes();
    bytes.len() == 17
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 | 10 => *b == b'-',
            _ => b.is_ascii_digit(),
        })
}

/// The `.log` files of step `stem` to delete so that only the newest [`KEEP_LOGS`] remain
/// (newest by modification time, then by name). Callers delete the matching `.log.err` too.
pub fn logs_to_reap(stem: &str, files: &[LogFile]) -> Vec<String> {
    let mut logs: Vec<&LogFile> = files
        .iter()
        .filter(|f| is_step_log(stem, &f.name))
        .collect();
    logs.sort_by(|a, b| {
        b.modified
            .cmp(&a.modified)
            .then_with(|| b.name.cmp(&a.name))
    });
    logs.into_iter()
        .skip(KEEP_LOGS)
        .map(|f| f.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn lines_are_labelled_and_stamped() {
        let mut stamper = LineStamper::new("[out]");
        assert_eq!(stamper.push(b"hello\nwor", "T1"), "[out]T1 hello\n");
        assert_eq!(stamper.push(b"ld\n\nx", "T2"), "[out]T1 world\n[out]T2 \n");
        assert_eq!(stamper.finish(), "[out]T2 x\n");
        assert_eq!(stamper.finish(), "");
    }

    #[test]
    fn invalid_utf8_is_replaced_per_line_not_per_chunk() {
        let mut stamper = LineStamper::new("[err]");
        let snowman = "☃".as_bytes();
        assert_eq!(stamper.push(&snowman[..1], "T"), "");
        assert_eq!(stamper.push(&snowman[1..], "T"), "");
        assert_eq!(
            stamper.push(b"\n\xff\n", "T"),
            "[err]T ☃\n[err]T \u{fffd}\n"
        );
    }

    #[test]
    fn step_log_names_need_the_exact_stamp() {
        assert!(is_step_log("run.sh", "run.sh-2025-06-01-123456.log"));
        assert!(!is_step_log("run.sh", "run.sh-2025-06-01-123456.log.err"));
        assert!(!is_step_log("run.sh", "run.sh-x-2025-06-01-123456.log"));
        assert!(!is_step_log("run", "run.sh-2025-06-01-123456.log"));
        assert!(!is_step_log("run.sh", "run.sh-2025-06-01-12345.log"));
    }

    #[test]
    fn only_the_newest_five_logs_are_kept() {
        let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut files: Vec<LogFile> = (0..8)
            .map(|i| LogFile {
                name: format!("run.sh-2025-06-01-12000{i}.log"),
                modified: base + Duration::from_secs(i),
            })
            .collect();
        files.push(LogFile {
            name: "other.sh-2025-06-01-120000.log".into(),
            modified: base,
        });
        files.push(LogFile {
            name: "run.sh-2025-06-01-120000.log.err".into(),
            modified: base,
        });
        let reaped = logs_to_reap("run.sh", &files);
        assert_eq!(
            reaped,
            [
                "run.sh-2025-06-01-120002.log",
                "run.sh-2025-06-01-120001.log",
                "run.sh-2025-06-01-120000.log"
            ]
        );
        assert!(logs_to_reap("run.sh", &files[..5]).is_empty());
    }

    #[test]
    fn equal_times_fall_back_to_the_name() {
        let t = SystemTime::UNIX_EPOCH;
        let files: Vec<LogFile> = (0..6)
            .map(|i| LogFile {
                name: format!("s-2025-06-01-12000{i}.log"),
                modified: t,
            })
            .collect();
        assert_eq!(logs_to_reap("s", &files), ["s-2025-06-01-120000.log"]);
    }
}
