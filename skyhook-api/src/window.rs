//! Maintenance windows of a DeploymentPolicy (issue #17 item 4): when a compartment may start a
//! new batch.
//!
//! A window opens at each time its cron `schedule` names, read in its `timeZone` (IANA name,
//! default UTC; daylight-saving gaps and folds as croner resolves them), and stays open for
//! its `duration`. Occurrences that overlap or touch make one longer window. A policy with
//! windows is open while any of them is; a policy without windows is always open. A window
//! that does not parse (the webhook rejects it; it can only come from a bypassed webhook)
//! never opens, so a typo holds a rollout rather than letting it run at any hour.
//!
//! [`window_state`] is a pure function of the windows and the time; the controller requeues at
//! the `opens_at` of a closed window instead of polling.

use std::time::Duration;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, Zoned};

use crate::duration;
use crate::v1alpha1::{MaintenanceWindow, PolicyBudget};

/// The time zone of a window without `timeZone`.
pub const DEFAULT_TIME_ZONE: &str = "UTC";

/// How many touching occurrences are joined into one window, at most: a schedule of every
/// minute with a duration of an hour would otherwise be followed for ever.
const MAX_JOINED: usize = 1_000;

/// Whether new batches may start now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowState {
    /// Yes. `closes_at` is when the window closes; `None` when the policy has no windows.
    Open {
        /// When the open window closes.
        closes_at: Option<Timestamp>,
    },
    /// No. `opens_at` is when the next window opens; `None` when no window ever opens again.
    Closed {
        /// When the next window opens.
        opens_at: Option<Timestamp>,
    },
}

/// Why one field of a window is wrong; the caller names the window.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// `schedule` is not a five-field cron expression.
    #[error("schedule {schedule:?} is not a cron expression of five fields ({reason})")]
    Schedule {
        /// The rejected text.
        schedule: String,
        /// What croner found wrong.
        reason: String,
    },
    /// `duration` is not a Go duration of more than zero.
    #[error("duration {0}")]
    Duration(String),
    /// `timeZone` is not in the IANA time zone database.
    #[error("timeZone {0:?} is not an IANA time zone name")]
    TimeZone(String),
}

impl WindowError {
    /// The field of the window that is wrong.
    pub fn field(&self) -> &'static str {
        match self {
            WindowError::Schedule { .. } => "schedule",
            WindowError::Duration(_) => "duration",
            WindowError::TimeZone(_) => "timeZone",
        }
    }

    /// How to fix it.
    pub fn hint(&self) -> &'static str {
        match self {
            WindowError::Schedule { .. } => {
                "write minute hour day-of-month month day-of-week, e.g. \"0 2 * * 6\" for Saturdays at 02:00"
            }
            WindowError::Duration(_) => "write a Go duration greater than zero, e.g. 30m or 4h",
            WindowError::TimeZone(_) => {
                "use a name such as UTC, Europe/Berlin or America/New_York, or leave timeZone out for UTC"
            }
        }
    }
}

/// A window ready to be evaluated.
#[derive(Debug, Clone)]
pub struct ParsedWindow {
    cron: Cron,
    duration: SignedDuration,
    zone: TimeZone,
}

/// Parses the cron schedule of a window: exactly five fields, minute granularity.
pub fn parse_schedule(schedule: &str) -> Result<Cron, WindowError> {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(schedule)
        .map_err(|error| WindowError::Schedule {
            schedule: schedule.to_owned(),
            reason: error.to_string(),
        })
}

/// Parses the duration of a window: a Go duration greater than zero.
pub fn parse_window_duration(text: &str) -> Result<SignedDuration, WindowError> {
    let parsed = duration::parse(text).map_err(|e| WindowError::Duration(e.to_string()))?;
    if parsed == Duration::ZERO {
        return Err(WindowError::Duration(format!(
            "{text:?} is zero; a window must stay open for some time"
        )));
    }
    SignedDuration::try_from(parsed)
        .map_err(|_| WindowError::Duration(format!("{text:?} is too large")))
}

/// Looks up a window's time zone; `None` reads as UTC.
pub fn parse_time_zone(name: Option<&str>) -> Result<TimeZone, WindowError> {
    let name = name.unwrap_or(DEFAULT_TIME_ZONE);
    TimeZone::get(name).map_err(|_| WindowError::TimeZone(name.to_owned()))
}

/// Parses every field of a window, reporting each field that is wrong.
pub fn parse_window(window: &MaintenanceWindow) -> Result<ParsedWindow, Vec<WindowError>> {
    let cron = parse_schedule(&window.schedule);
    let duration = parse_window_duration(&window.duration);
    let zone = parse_time_zone(window.time_zone.as_deref());
    match (cron, duration, zone) {
        (Ok(cron), Ok(duration), Ok(zone)) => Ok(ParsedWindow {
            cron,
            duration,
            zone,
        }),
        (cron, duration, zone) => Err([cron.err(), duration.err(), zone.err()]
            .into_iter()
            .flatten()
            .collect()),
    }
}

impl ParsedWindow {
    /// The latest opening at or before `now`, and the next opening after `now`.
    fn openings(&self, now: &Zoned) -> (Option<Zoned>, Option<Zoned>) {
        let previous = self.cron.find_previous_occurrence(now, true).ok();
        let next = self.cron.find_next_occurrence(now, false).ok();
        (previous, next)
    }

    /// When the window that opened at `start` closes, joining later openings that begin before
    /// it closes.
    fn closes(&self, start: &Zoned) -> Timestamp {
        let mut closes = start
            .timestamp()
            .saturating_add(self.duration)
            .unwrap_or(Timestamp::MAX);
        let mut at = start.clone();
        for _ in 0..MAX_JOINED {
            match self.cron.find_next_occurrence(&at, false) {
                Ok(next) if next.timestamp() <= closes => {
                    let next_closes = next
                        .timestamp()
                        .saturating_add(self.duration)
                        .unwrap_or(Timestamp::MAX);
                    closes = closes.max(next_closes);
                    at = next;
                }
                _ => break,
            }
        }
        closes
    }

    /// This window alone at `now`.
    fn state(&self, now: Timestamp) -> WindowState {
        let local = now.to_zoned(self.zone.clone());
        let (previous, next) = self.openings(&local);
        if let Some(start) = previous {
            let closes = self.closes(&start);
            if closes > now {
                return WindowState::Open {
                    closes_at: Some(closes),
                };
            }
        }
        WindowState::Closed {
            opens_at: next.map(|n| n.timestamp()),
        }
    }
}

/// Whether new batches may start at `now` under `windows` (see the module documentation): open
/// until the latest close of the windows open now, or closed until the earliest next opening.
pub fn window_state(windows: &[MaintenanceWindow], now: Timestamp) -> WindowState {
    windows_now(windows, now).0
}

/// [`window_state`], and the budgets of the windows open at `now`, one per open window: `None`
/// for an open window without a budget. The budgets are empty when no window is open, or the
/// policy has none (see [`crate::budget::window_ceiling`]). Each window is parsed and judged
/// once for both.
pub fn windows_now(
    windows: &[MaintenanceWindow],
    now: Timestamp,
) -> (WindowState, Vec<Option<PolicyBudget>>) {
    if windows.is_empty() {
        return (WindowState::Open { closes_at: None }, Vec::new());
    }
    let states: Vec<WindowState> = windows
        .iter()
        .map(|w| match parse_window(w) {
            Ok(parsed) => parsed.state(now),
            Err(_) => WindowState::Closed { opens_at: None },
        })
        .collect();
    let budgets = (states.iter().zip(windows))
        .filter(|(state, _)| matches!(state, WindowState::Open { .. }))
        .map(|(_, window)| window.budget.clone())
        .collect();
    (combined_state(&states), budgets)
}

/// The state of a policy from the states of its windows (at least one): open until the latest
/// close of those open, or closed until the earliest next opening.
fn combined_state(states: &[WindowState]) -> WindowState {
    let closes_at = states
        .iter()
        .filter_map(|s| match s {
            WindowState::Open { closes_at } => Some(*closes_at),
            WindowState::Closed { .. } => None,
        })
        .max();
    if let Some(closes_at) = closes_at {
        return WindowState::Open { closes_at };
    }
    let opens_at = states
        .iter()
        .filter_map(|s| match s {
            WindowState::Closed { opens_at } => *opens_at,
            WindowState::Open { .. } => None,
        })
        .min();
    WindowState::Closed { opens_at }
}

/// The message of a Skyhook's condition while the budget of an open maintenance window of the
/// DeploymentPolicy `policy` holds compartments to fewer nodes than their own budgets: each
/// compartment with its window ceiling.
pub fn window_budget_message(policy: &str, held: &[(String, usize)]) -> String {
    let compartments: Vec<String> = held
        .iter()
        .map(|(name, ceiling)| {
            let nodes = if *ceiling == 1 { "node" } else { "nodes" };
            format!("{name} ({ceiling} {nodes} at once)")
        })
        .collect();
    format!(
        "the budget of the open maintenance window of DeploymentPolicy [{policy}] holds compartments [{}]; their other nodes wait for a free slot or a window with a larger budget",
        compartments.join(", ")
    )
}

/// The message of a Skyhook's condition while compartments hold their next batch for a closed
/// window of the DeploymentPolicy `policy`.
pub fn window_wait_message(
    policy: &str,
    compartments: &[String],
    opens_at: Option<Timestamp>,
) -> String {
    let when = match opens_at {
        Some(at) => {
            format!("when the next maintenance window of DeploymentPolicy [{policy}] opens at {at}")
        }
        None => format!(
            "never: no maintenance window of DeploymentPolicy [{policy}] opens again; fix spec.maintenanceWindows"
        ),
    };
    format!(
        "outside the maintenance windows; compartments [{}] start their next batch {when}; nodes already started finish",
        compartments.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(schedule: &str, duration: &str, zone: Option<&str>) -> MaintenanceWindow {
        MaintenanceWindow {
            schedule: schedule.into(),
            duration: duration.into(),
            time_zone: zone.map(Into::into),
            budget: None,
        }
    }

    #[test]
    fn the_budgets_of_the_windows_open_now() {
        let count = |c| PolicyBudget {
            percent: None,
            count: Some(c),
            topology: None,
        };
        let with =
            |schedule: &str, duration: &str, budget: Option<PolicyBudget>| MaintenanceWindow {
                budget,
                ..window(schedule, duration, None)
            };
        let windows = [
            // Saturdays 02:00-06:00, one node at a time.
            with("0 2 * * 6", "4h", Some(count(1))),
            // Every day 01:00-05:00, the compartment's own budget.
            with("0 1 * * *", "4h", None),
            // Never parses: never open.
            with("not a schedule", "4h", Some(count(9))),
        ];
        // 2026-12-05 is a Saturday.
        let cases = [
            ("2026-12-05T03:00:00Z", vec![Some(count(1)), None]),
            ("2026-12-05T01:30:00Z", vec![None]),
            ("2026-12-04T03:00:00Z", vec![None]),
            ("2026-12-04T12:00:00Z", vec![]),
        ];
        for (now, want) in cases {
            assert_eq!(windows_now(&windows, at(now)).1, want, "{now}");
        }
        assert!(windows_now(&[], at("2026-12-05T03:00:00Z")).1.is_empty());
    }

    #[test]
    fn the_window_budget_message_names_each_compartments_ceiling() {
        assert_eq!(
            window_budget_message("weekend", &[("gpu".into(), 1), ("__default__".into(), 3)]),
            "the budget of the open maintenance window of DeploymentPolicy [weekend] holds compartments [gpu (1 node at once), __default__ (3 nodes at once)]; their other nodes wait for a free slot or a window with a larger budget"
        );
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn open_inside_a_window_closed_outside_with_the_next_opening() {
        let nightly = window("0 2 * * *", "2h", None);
        let berlin = window("0 2 * * *", "2h", Some("Europe/Berlin"));
        let saturday = window("30 22 * * 6", "90m", None);
        let minutely = window("* * * * *", "30s", None);
        let joined = window("0 12,13 * * *", "90m", None);
        let open = |closes: &str| WindowState::Open {
            closes_at: Some(at(closes)),
        };
        let closed = |opens: &str| WindowState::Closed {
            opens_at: Some(at(opens)),
        };
        #[rustfmt::skip]
        let cases: [(&str, Vec<MaintenanceWindow>, &str, WindowState); 13] = [
            ("no windows: always open", vec![], "2026-03-02T12:00:00Z", WindowState::Open { closes_at: None }),
            ("at the opening", vec![nightly.clone()], "2026-03-02T02:00:00Z", open("2026-03-02T04:00:00Z")),
            ("inside", vec![nightly.clone()], "2026-03-02T03:59:59Z", open("2026-03-02T04:00:00Z")),
            ("at the close", vec![nightly.clone()], "2026-03-02T04:00:00Z", closed("2026-03-03T02:00:00Z")),
            ("before", vec![nightly.clone()], "2026-03-02T01:59:00Z", closed("2026-03-02T02:00:00Z")),
            ("in Berlin (UTC+1 in winter)", vec![berlin.clone()], "2026-03-02T01:30:00Z", open("2026-03-02T03:00:00Z")),
            ("in Berlin (UTC+2 in summer)", vec![berlin.clone()], "2026-07-01T01:30:00Z", open("2026-07-01T02:00:00Z")),
            ("weekly, across midnight", vec![saturday.clone()], "2026-03-07T23:30:00Z", open("2026-03-08T00:00:00Z")),
            ("weekly, midweek", vec![saturday.clone()], "2026-03-04T12:00:00Z", closed("2026-03-07T22:30:00Z")),
            ("every minute, between", vec![minutely], "2026-03-02T12:00:45Z", closed("2026-03-02T12:01:00Z")),
            ("occurrences that overlap join", vec![joined], "2026-03-02T12:10:00Z", open("2026-03-02T14:30:00Z")),
            ("the earliest of two next openings", vec![nightly.clone(), saturday.clone()], "2026-03-07T12:00:00Z", closed("2026-03-07T22:30:00Z")),
            ("open if any is open", vec![saturday.clone(), nightly.clone()], "2026-03-07T02:30:00Z", open("2026-03-07T04:00:00Z")),
        ];
        for (case, windows, now, want) in cases {
            assert_eq!(window_state(&windows, at(now)), want, "{case}");
        }
    }

    #[test]
    fn overlapping_occurrences_join_up_to_a_limit() {
        // Every hour for 90 minutes never closes; the join stops after MAX_JOINED openings.
        let state = window_state(
            &[window("0 * * * *", "90m", None)],
            at("2026-03-02T12:10:00Z"),
        );
        let WindowState::Open {
            closes_at: Some(closes),
        } = state
        else {
            panic!("{state:?}");
        };
        assert!(closes > at("2026-03-02T13:30:00Z"), "{closes}");
    }

    #[test]
    fn the_wait_message_says_when_the_next_window_opens() {
        let compartments = ["__default__".to_owned(), "gpu".to_owned()];
        assert_eq!(
            window_wait_message("nightly", &compartments, Some(at("2026-03-03T02:00:00Z"))),
            "outside the maintenance windows; compartments [__default__, gpu] start their next batch when the next maintenance window of DeploymentPolicy [nightly] opens at 2026-03-03T02:00:00Z; nodes already started finish"
        );
        let never = window_wait_message("nightly", &compartments[..1], None);
        assert!(never.contains("never: no maintenance window"), "{never}");
    }

    #[test]
    fn a_window_that_does_not_parse_never_opens() {
        #[rustfmt::skip]
        let cases = [
            ("bad cron", window("0 2 * *", "2h", None)),
            ("zero duration", window("0 2 * * *", "0s", None)),
            ("unknown zone", window("0 2 * * *", "2h", Some("Mars/Olympus"))),
        ];
        for (case, bad) in cases {
            assert_eq!(
                window_state(&[bad], at("2026-03-02T02:30:00Z")),
                WindowState::Closed { opens_at: None },
                "{case}"
            );
        }
    }

    #[test]
    fn each_wrong_field_is_named() {
        #[rustfmt::skip]
        let cases: [(MaintenanceWindow, &[&str]); 7] = [
            (window("0 2 * * *", "2h", Some("America/New_York")), &[]),
            (window("0 2 * * * *", "2h", None), &["schedule"]),
            (window("61 2 * * *", "2h", None), &["schedule"]),
            (window("0 2 * * *", "-1h", None), &["duration"]),
            (window("0 2 * * *", "0", None), &["duration"]),
            (window("0 2 * * *", "2h", Some("Europe/Atlantis")), &["timeZone"]),
            (window("nightly", "soon", Some("")), &["schedule", "duration", "timeZone"]),
        ];
        for (bad, fields) in cases {
            let got: Vec<&str> = match parse_window(&bad) {
                Ok(_) => vec![],
                Err(errors) => errors.iter().map(WindowError::field).collect(),
            };
            assert_eq!(got, fields, "{bad:?}");
        }
        let negative = parse_window_duration("-1h").unwrap_err().to_string();
        assert!(negative.contains("negative"), "{negative}");
    }
}
