//! Container logs as the kubelet keeps and serves them: files in the CRI log format (one line per
//! output line, `<RFC 3339 time> <stdout|stderr> <F|P> <text>`), read back with the options of
//! `kubectl logs` (`tailLines`, `sinceSeconds`/`sinceTime`, `timestamps`, `limitBytes`,
//! `previous`). Everything here is pure; the files are written by the runtime and read by the
//! `__kubelet-logs` entry point.

use jiff::{SignedDuration, Timestamp};

/// Output longer than this without a newline is logged in pieces tagged partial, as container
/// runtimes do, so one endless line cannot grow a buffer without bound.
pub const MAX_LINE: usize = 16 * 1024;

/// Which output a log line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// One line of the log file, in the CRI format.
pub fn encode_line(at: Timestamp, stream: Stream, partial: bool, text: &[u8]) -> Vec<u8> {
    let tag = if partial { "P" } else { "F" };
    let mut line = format!("{at} {} {tag} ", stream.name()).into_bytes();
    line.extend_from_slice(text);
    line.push(b'\n');
    line
}

/// Splits a stream's output into log lines: complete lines (without their newline), and pieces of
/// [`MAX_LINE`] bytes of longer ones, which are partial.
#[derive(Debug, Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
}

impl LineSplitter {
    /// The lines `bytes` completes, each with whether it is partial.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<(Vec<u8>, bool)> {
        self.pending.extend_from_slice(bytes);
        let mut lines = Vec::new();
        loop {
            match self.pending.iter().position(|&b| b == b'\n') {
                Some(end) if end <= MAX_LINE => {
                    let rest = self.pending.split_off(end + 1);
                    let mut line = std::mem::replace(&mut self.pending, rest);
                    line.pop();
                    lines.push((line, false));
                }
                _ if self.pending.len() > MAX_LINE => {
                    let rest = self.pending.split_off(MAX_LINE);
                    lines.push((std::mem::replace(&mut self.pending, rest), true));
                }
                _ => return lines,
            }
        }
    }

    /// What is left when the stream ends: a last line without a newline, logged as complete (the
    /// kubelet shows it; nothing will follow it).
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        (!self.pending.is_empty()).then(|| std::mem::take(&mut self.pending))
    }
}

/// A parsed line of a log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine<'a> {
    pub time: Timestamp,
    pub stream: Stream,
    pub partial: bool,
    pub text: &'a [u8],
}

/// Parses one line of a log file (without its newline); `None` for a malformed line, which
/// readers skip as the kubelet does.
pub fn parse_line(line: &[u8]) -> Option<LogLine<'_>> {
    let mut fields = line.splitn(4, |&b| b == b' ');
    let time = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
    let stream = match fields.next()? {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        _ => return None,
    };
    let partial = match fields.next()? {
        b"P" => true,
        b"F" => false,
        _ => return None,
    };
    Some(LogLine {
        time,
        stream,
        partial,
        text: fields.next().unwrap_or_default(),
    })
}

/// Where to start reading: the `since*` options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    Seconds(i64),
    Time(Timestamp),
}

/// The options of a `containerLogs` request (the query of `pods/log`, passed on by the API
/// server).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub tail_lines: Option<u64>,
    pub since: Option<Since>,
    pub limit_bytes: Option<u64>,
}

/// A query the API server would not have sent; the message names the parameter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid log option {name}={value:?}: {reason}")]
pub struct BadOption {
    pub name: String,
    pub value: String,
    pub reason: &'static str,
}

impl LogOptions {
    /// Parses the URL query (`follow=true&tailLines=10&...`); unknown parameters are ignored.
    pub fn from_query(query: &str) -> Result<Self, BadOption> {
        let mut options = Self::default();
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            let bad = |reason| BadOption {
                name: name.to_string(),
                value: value.to_string(),
                reason,
            };
            let flag = || match value.as_ref() {
                "true" | "1" => Ok(true),
                "false" | "0" | "" => Ok(false),
                _ => Err(bad("expected true or false")),
            };
            let count = || value.parse::<u64>().map_err(|_| bad("expected a number"));
            match name.as_ref() {
                "follow" => options.follow = flag()?,
                "previous" => options.previous = flag()?,
                "timestamps" => options.timestamps = flag()?,
                "tailLines" => options.tail_lines = Some(count()?),
                "limitBytes" => options.limit_bytes = Some(count()?),
                "sinceSeconds" => {
                    let seconds = value.parse().map_err(|_| bad("expected seconds"))?;
                    options.since = Some(Since::Seconds(seconds));
                }
                "sinceTime" => {
                    let time = value
                        .parse()
                        .map_err(|_| bad("expected an RFC 3339 time"))?;
                    options.since = Some(Since::Time(time));
                }
                _ => {}
            }
        }
        Ok(options)
    }

    /// The first moment whose lines are shown.
    fn since_time(&self, now: Timestamp) -> Option<Timestamp> {
        match self.since? {
            Since::Time(time) => Some(time),
            Since::Seconds(seconds) => now.checked_sub(SignedDuration::from_secs(seconds)).ok(),
        }
    }
}

/// Renders log file content for a request. The first call gets the whole file so far (where
/// `tailLines` applies); later calls, while following, get what was appended. Only complete
/// lines (ending in a newline) are consumed; the caller passes the rest again with what follows.
#[derive(Debug)]
pub struct LogRenderer {
    timestamps: bool,
    since: Option<Timestamp>,
    tail_lines: Option<u64>,
    bytes_left: Option<u64>,
}

/// What one [`LogRenderer::render`] call produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub output: Vec<u8>,
    /// How many input bytes were consumed (complete lines).
    pub consumed: usize,
    /// `limitBytes` is reached: nothing more is to be sent.
    pub exhausted: bool,
}

impl LogRenderer {
    pub fn new(options: &LogOptions, now: Timestamp) -> Self {
        Self {
            timestamps: options.timestamps,
            since: options.since_time(now),
            tail_lines: options.tail_lines,
            bytes_left: options.limit_bytes,
        }
    }

    pub fn render(&mut self, content: &[u8]) -> Rendered {
        let consumed = content
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |last| last + 1);
        let mut lines: Vec<LogLine<'_>> = content[..consumed]
            .split(|&b| b == b'\n')
            .filter_map(parse_line)
            .filter(|line| self.since.is_none_or(|since| line.time >= since))
            .collect();
        if let Some(tail) = self.tail_lines.take() {
            lines = last_lines(lines, tail);
        }
        let mut output = Vec::new();
        for line in &lines {
            if self.timestamps {
                output.extend_from_slice(format!("{} ", line.time).as_bytes());
            }
            output.extend_from_slice(line.text);
            if !line.partial {
                output.push(b'\n');
            }
        }
        let exhausted = self.spend(&mut output);
        Rendered {
            output,
            consumed,
            exhausted,
        }
    }

    /// Cuts `output` to what `limitBytes` still allows; true once the limit is reached.
    fn spend(&mut self, output: &mut Vec<u8>) -> bool {
        let Some(left) = self.bytes_left.as_mut() else {
            return false;
        };
        let allowed = usize::try_from(*left).unwrap_or(usize::MAX);
        output.truncate(allowed);
        *left -= output.len() as u64;
        *left == 0
    }
}

/// The last `count` lines, a line being a run of partial pieces ended by a complete one.
fn last_lines(lines: Vec<LogLine<'_>>, count: u64) -> Vec<LogLine<'_>> {
    if count == 0 {
        return Vec::new();
    }
    let mut complete_seen = 0;
    let mut start = lines.len();
    for (index, line) in lines.iter().enumerate().rev() {
        if !line.partial {
            if complete_seen == count {
                break;
            }
            complete_seen += 1;
        }
        start = index;
    }
    lines.into_iter().skip(start).collect()
}

/// A log request that cannot be answered, with the HTTP status the kubelet gives it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogLookupError {
    #[error("pod {pod:?} does not exist")]
    NoPod { pod: String },
    #[error("container {container:?} in pod {pod:?} is waiting to start: ContainerCreating")]
    NotStarted { pod: String, container: String },
    #[error("previous terminated container {container:?} in pod {pod:?} not found")]
    NoPrevious { pod: String, container: String },
    #[error(transparent)]
    BadOption(#[from] BadOption),
}

impl LogLookupError {
    pub fn http_status(&self) -> u16 {
        match self {
            Self::NoPod { .. } => 404,
            Self::NotStarted { .. } | Self::NoPrevious { .. } | Self::BadOption(_) => 400,
        }
    }
}

/// Which run of the container to read: the current one (the highest attempt), or with
/// `previous` the one before it. `attempts` are the runs that have a log, in any order.
pub fn choose_attempt(
    attempts: &[u32],
    previous: bool,
    pod: &str,
    container: &str,
) -> Result<u32, LogLookupError> {
    let mut sorted = attempts.to_vec();
    sorted.sort_unstable();
    let chosen = if previous {
        sorted.iter().rev().nth(1)
    } else {
        sorted.last()
    };
    chosen.copied().ok_or_else(|| {
        let (pod, container) = (pod.to_owned(), container.to_owned());
        if previous {
            LogLookupError::NoPrevious { pod, container }
        } else {
            LogLookupError::NotStarted { pod, container }
        }
    })
}

/// The pod's directory among the node's log directories (`<namespace>_<pod>_<uid>`, with their
/// modification times): the newest, since a pod deleted and created again under the same name
/// leaves the old one behind.
pub fn pod_log_dir<'a, T: Ord + Copy>(
    entries: &'a [(String, T)],
    namespace: &str,
    pod: &str,
) -> Option<&'a str> {
    let prefix = format!("{namespace}_{pod}_");
    entries
        .iter()
        .filter(|(name, _)| {
            name.strip_prefix(&prefix)
                .is_some_and(|uid| !uid.is_empty() && !uid.contains('_'))
        })
        .max_by_key(|(_, modified)| *modified)
        .map(|(name, _)| name.as_str())
}

/// The attempt number of a log file name (`3.log`).
pub fn attempt_of_log_file(name: &str) -> Option<u32> {
    name.strip_suffix(".log")?.parse().ok()
}

/// The marker written next to a run's log (`<attempt>.log`) once that run of the container has
/// ended, so a followed log ends with it.
pub fn exited_marker(log: &std::path::Path) -> std::path::PathBuf {
    log.with_extension("exited")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn file(lines: &[(&str, Stream, bool, &str)]) -> Vec<u8> {
        lines
            .iter()
            .flat_map(|(time, stream, partial, text)| {
                encode_line(at(time), *stream, *partial, text.as_bytes())
            })
            .collect()
    }

    #[test]
    fn lines_are_encoded_in_the_cri_format_and_parse_back() {
        let encoded = encode_line(
            at("2026-11-24T22:50:13.123456789Z"),
            Stream::Stderr,
            false,
            b"hello world",
        );
        assert_eq!(
            String::from_utf8_lossy(&encoded),
            "2026-11-24T22:50:13.123456789Z stderr F hello world\n"
        );
        let parsed = parse_line(&encoded[..encoded.len() - 1]).unwrap();
        assert_eq!(parsed.stream, Stream::Stderr);
        assert!(!parsed.partial);
        assert_eq!(parsed.text, b"hello world");
        let cases: [&[u8]; 4] = [
            b"",
            b"not-a-time stdout F x",
            b"2026-11-24T22:50:13Z stdin F x",
            b"2026-11-24T22:50:13Z stdout X x",
        ];
        for case in cases {
            assert_eq!(parse_line(case), None, "{}", String::from_utf8_lossy(case));
        }
        assert_eq!(
            parse_line(b"2026-11-24T22:50:13Z stdout F").map(|l| l.text),
            Some(&b""[..])
        );
    }

    #[test]
    fn output_is_split_into_lines_and_long_lines_into_partial_pieces() {
        let long = vec![b'x'; MAX_LINE + 10];
        /// Chunks pushed, the lines they make (text, partial), what `finish` leaves.
        type Case<'a> = (Vec<&'a [u8]>, Vec<(Vec<u8>, bool)>, Option<Vec<u8>>);
        let cases: Vec<Case<'_>> = vec![
            (
                vec![b"a\nb"],
                vec![(b"a".to_vec(), false)],
                Some(b"b".to_vec()),
            ),
            (
                vec![b"a", b"b\n", b"\nc\n"],
                vec![
                    (b"ab".to_vec(), false),
                    (b"".to_vec(), false),
                    (b"c".to_vec(), false),
                ],
                None,
            ),
            (
                vec![&long, b"\n"],
                vec![(vec![b'x'; MAX_LINE], true), (vec![b'x'; 10], false)],
                None,
            ),
        ];
        for (chunks, want_lines, want_rest) in cases {
            let mut splitter = LineSplitter::default();
            let lines: Vec<_> = chunks.iter().flat_map(|c| splitter.push(c)).collect();
            assert_eq!(lines, want_lines);
            assert_eq!(splitter.finish(), want_rest);
        }
    }

    #[test]
    fn options_come_from_the_query() {
        let cases = [
            ("", Ok(LogOptions::default())),
            (
                "follow=true&previous=true&timestamps=true&tailLines=5&limitBytes=100&container=x",
                Ok(LogOptions {
                    follow: true,
                    previous: true,
                    timestamps: true,
                    tail_lines: Some(5),
                    limit_bytes: Some(100),
                    since: None,
                }),
            ),
            (
                "sinceSeconds=30",
                Ok(LogOptions {
                    since: Some(Since::Seconds(30)),
                    ..LogOptions::default()
                }),
            ),
            (
                "sinceTime=2026-11-24T22%3A50%3A13Z",
                Ok(LogOptions {
                    since: Some(Since::Time(at("2026-11-24T22:50:13Z"))),
                    ..LogOptions::default()
                }),
            ),
            (
                "tailLines=-1",
                Err(BadOption {
                    name: "tailLines".into(),
                    value: "-1".into(),
                    reason: "expected a number",
                }),
            ),
            (
                "follow=yes",
                Err(BadOption {
                    name: "follow".into(),
                    value: "yes".into(),
                    reason: "expected true or false",
                }),
            ),
        ];
        for (query, want) in cases {
            assert_eq!(LogOptions::from_query(query), want, "{query}");
        }
    }

    #[test]
    fn rendering_applies_tail_since_timestamps_and_limit() {
        let content = file(&[
            ("2026-11-24T22:00:00Z", Stream::Stdout, false, "one"),
            ("2026-11-24T22:00:01Z", Stream::Stderr, false, "two"),
            ("2026-11-24T22:00:02Z", Stream::Stdout, true, "thr"),
            ("2026-11-24T22:00:02Z", Stream::Stdout, false, "ee"),
            ("2026-11-24T22:00:03Z", Stream::Stdout, false, "four"),
        ]);
        let now = at("2026-11-24T22:00:04Z");
        let cases = [
            (LogOptions::default(), "one\ntwo\nthree\nfour\n"),
            (
                LogOptions {
                    tail_lines: Some(2),
                    ..LogOptions::default()
                },
                "three\nfour\n",
            ),
            (
                LogOptions {
                    tail_lines: Some(0),
                    ..LogOptions::default()
                },
                "",
            ),
            (
                LogOptions {
                    tail_lines: Some(10),
                    ..LogOptions::default()
                },
                "one\ntwo\nthree\nfour\n",
            ),
            (
                LogOptions {
                    since: Some(Since::Seconds(3)),
                    ..LogOptions::default()
                },
                "two\nthree\nfour\n",
            ),
            (
                LogOptions {
                    since: Some(Since::Time(at("2026-11-24T22:00:03Z"))),
                    ..LogOptions::default()
                },
                "four\n",
            ),
            (
                LogOptions {
                    timestamps: true,
                    tail_lines: Some(1),
                    ..LogOptions::default()
                },
                "2026-11-24T22:00:03Z four\n",
            ),
            (
                LogOptions {
                    limit_bytes: Some(6),
                    ..LogOptions::default()
                },
                "one\ntw",
            ),
        ];
        for (options, want) in cases {
            let rendered = LogRenderer::new(&options, now).render(&content);
            assert_eq!(
                String::from_utf8_lossy(&rendered.output),
                want,
                "{options:?}"
            );
            assert_eq!(rendered.consumed, content.len());
        }
    }

    #[test]
    fn following_consumes_complete_lines_only_and_stops_at_the_limit() {
        let options = LogOptions {
            tail_lines: Some(1),
            limit_bytes: Some(8),
            ..LogOptions::default()
        };
        let mut renderer = LogRenderer::new(&options, at("2026-11-24T22:00:04Z"));
        let mut content = file(&[
            ("2026-11-24T22:00:00Z", Stream::Stdout, false, "a"),
            ("2026-11-24T22:00:01Z", Stream::Stdout, false, "b"),
        ]);
        content.extend_from_slice(b"2026-11-24T22:00:02Z stdout F hal");
        let first = renderer.render(&content);
        assert_eq!(first.output, b"b\n");
        assert!(!first.exhausted);
        assert_eq!(first.consumed, content.len() - 33);
        // The tail applied to the first read only; the limit counts across reads.
        let appended = file(&[
            ("2026-11-24T22:00:02Z", Stream::Stdout, false, "half"),
            ("2026-11-24T22:00:03Z", Stream::Stdout, false, "more"),
        ]);
        let second = renderer.render(&appended);
        assert_eq!(second.output, b"half\nm");
        assert!(second.exhausted);
    }

    #[test]
    fn the_attempt_read_is_the_current_or_the_previous_run() {
        let cases = [
            (vec![0], false, Ok(0)),
            (vec![2, 0, 1], false, Ok(2)),
            (vec![2, 0, 1], true, Ok(1)),
            (
                vec![0],
                true,
                Err(LogLookupError::NoPrevious {
                    pod: "p".into(),
                    container: "c".into(),
                }),
            ),
            (
                vec![],
                false,
                Err(LogLookupError::NotStarted {
                    pod: "p".into(),
                    container: "c".into(),
                }),
            ),
        ];
        for (attempts, previous, want) in cases {
            assert_eq!(
                choose_attempt(&attempts, previous, "p", "c"),
                want,
                "{attempts:?} previous={previous}"
            );
        }
    }

    #[test]
    fn the_newest_directory_of_the_pod_is_read() {
        let entries = vec![
            ("ns_pod_uid-old".to_owned(), 1),
            ("ns_pod_uid-new".to_owned(), 5),
            ("ns_pod-2_uid-other".to_owned(), 9),
            ("other_pod_uid-x".to_owned(), 9),
        ];
        let cases = [
            ("ns", "pod", Some("ns_pod_uid-new")),
            ("ns", "pod-2", Some("ns_pod-2_uid-other")),
            ("ns", "missing", None),
            ("ns", "po", None),
        ];
        for (namespace, pod, want) in cases {
            assert_eq!(pod_log_dir(&entries, namespace, pod), want, "{pod}");
        }
    }
}
