//! A package's `stageTimeout` and how it bounds the Job of a stage (upstream v0.18, delta §2.4).
//!
//! Contract, as upstream:
//! * `stageTimeout` is a Go duration string (`30m`, `1h30m`). Absent means the operator's
//!   `JOB_STAGE_TIMEOUT` (default 1h). Zero (`"0"`, `"0s"`) means *no* time bound: a hanging
//!   attempt then never fails. Negative values are refused with upstream's message
//!   `package "<p>": stageTimeout must be greater than or equal to 0`.
//! * [`effective`] resolves the package's value against the operator default; `None` means
//!   unbounded (either side may be zero).
//! * [`deadline_seconds`] turns a bound into `activeDeadlineSeconds`: whole seconds rounded up,
//!   clamped to `i32::MAX` as upstream does, `None` (field omitted) when unbounded.
//! * [`placement`] says where that number goes, per kind of stage. For package stages
//!   (apply, config, upgrade, uninstall, post-interrupt) the bound is **per attempt**: it goes on the pod
//!   template (`template.spec.activeDeadlineSeconds`), so the total is roughly timeout ×
//!   (retries + 1) and an expired attempt is a genuine failure that spends one retry. For
//!   interrupt stages it bounds the **whole stage**: it goes on the Job
//!   (`spec.activeDeadlineSeconds`); for a reboot it is the only bound.
//!
//! The value is fixed when the Job is created; editing `stageTimeout` does not change a running
//! Job and is not a spec change that replaces it.

use std::time::Duration;

use crate::duration::{self, DurationError};
use crate::v1alpha1::{Package, Stage};

/// The package's `stageTimeout` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StageTimeoutError {
    /// A negative duration; upstream's exact message.
    #[error("package \"{package}\": stageTimeout must be greater than or equal to 0")]
    Negative {
        /// The package.
        package: String,
    },
    /// Not a Go duration.
    #[error("package \"{package}\": stageTimeout {source}")]
    Invalid {
        /// The package.
        package: String,
        /// Why the text was rejected.
        #[source]
        source: DurationError,
    },
}

/// Parses the text of a `stageTimeout` of `package`: `Ok(None)` when absent, `Ok(Some(ZERO))`
/// for an explicit zero.
pub fn parse(package: &str, text: Option<&str>) -> Result<Option<Duration>, StageTimeoutError> {
    text.map(|text| {
        duration::parse(text).map_err(|source| match source {
            DurationError::Negative { .. } => StageTimeoutError::Negative {
                package: package.to_owned(),
            },
            source => StageTimeoutError::Invalid {
                package: package.to_owned(),
                source,
            },
        })
    })
    .transpose()
}

/// The bound of one stage: the package's own `stageTimeout` when set, else `default`
/// (`JOB_STAGE_TIMEOUT`); `None` when the result is zero, which removes the bound.
pub fn effective(package_timeout: Option<Duration>, default: Duration) -> Option<Duration> {
    Some(package_timeout.unwrap_or(default)).filter(|timeout| !timeout.is_zero())
}

/// `activeDeadlineSeconds` for a bound: the seconds rounded up (a 1.5s bound is 2s, never 1s,
/// and never 0, which the API server refuses), at most `i32::MAX`; `None` when unbounded.
pub fn deadline_seconds(timeout: Option<Duration>) -> Option<i64> {
    let timeout = timeout.filter(|timeout| !timeout.is_zero())?;
    let whole = timeout.as_secs();
    let seconds = if timeout.subsec_nanos() > 0 {
        whole.saturating_add(1)
    } else {
        whole
    };
    Some(i64::try_from(seconds).map_or(i64::from(i32::MAX), |s| s.min(i64::from(i32::MAX))))
}

/// Where a stage's `activeDeadlineSeconds` goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadlinePlacement {
    /// `spec.template.spec.activeDeadlineSeconds`: bounds each attempt (package stages).
    PodTemplate,
    /// `spec.activeDeadlineSeconds` of the Job: bounds the whole stage (interrupt stages).
    Job,
}

/// Where the deadline of `stage` goes: on the Job for the two interrupt stages, on the pod
/// template for every package stage.
pub fn placement(stage: Stage) -> DeadlinePlacement {
    match stage {
        Stage::Interrupt | Stage::UninstallInterrupt => DeadlinePlacement::Job,
        _ => DeadlinePlacement::PodTemplate,
    }
}

/// The two `activeDeadlineSeconds` fields of a stage's Job, at most one of them set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deadlines {
    /// `spec.template.spec.activeDeadlineSeconds`.
    pub pod: Option<i64>,
    /// `spec.activeDeadlineSeconds`.
    pub job: Option<i64>,
}

/// The deadlines of the Job running `stage` with the bound `timeout` (from [`effective`]).
pub fn deadlines(stage: Stage, timeout: Option<Duration>) -> Deadlines {
    let seconds = deadline_seconds(timeout);
    match placement(stage) {
        DeadlinePlacement::PodTemplate => Deadlines {
            pod: seconds,
            job: None,
        },
        DeadlinePlacement::Job => Deadlines {
            pod: None,
            job: seconds,
        },
    }
}

impl Package {
    /// This package's stage bound given the operator's `JOB_STAGE_TIMEOUT` (`default`): `None`
    /// when unbounded. See the module documentation.
    pub fn stage_timeout(&self, default: Duration) -> Result<Option<Duration>, StageTimeoutError> {
        parse(&self.name, self.stage_timeout.as_deref()).map(|own| effective(own, default))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn effective_bound() {
        let cases: &[(Option<Duration>, Duration, Option<Duration>)] = &[
            // absent: the operator default
            (None, HOUR, Some(HOUR)),
            // absent with JOB_STAGE_TIMEOUT=0: unbounded
            (None, Duration::ZERO, None),
            // the package's own value wins, larger or smaller
            (
                Some(Duration::from_secs(90)),
                HOUR,
                Some(Duration::from_secs(90)),
            ),
            (Some(2 * HOUR), HOUR, Some(2 * HOUR)),
            (
                Some(Duration::from_secs(90)),
                Duration::ZERO,
                Some(Duration::from_secs(90)),
            ),
            // an explicit zero removes the bound even with a default
            (Some(Duration::ZERO), HOUR, None),
        ];
        for (own, default, want) in cases {
            assert_eq!(effective(*own, *default), *want, "{own:?} / {default:?}");
        }
    }

    #[test]
    fn deadline_in_whole_seconds_rounded_up_and_clamped() {
        let cases: &[(Option<Duration>, Option<i64>)] = &[
            (None, None),
            (Some(Duration::ZERO), None),
            (Some(Duration::from_nanos(1)), Some(1)),
            (Some(Duration::from_millis(1500)), Some(2)),
            (Some(Duration::from_secs(90)), Some(90)),
            (Some(HOUR), Some(3600)),
            (
                Some(Duration::from_secs(u64::from(u32::MAX))),
                Some(2_147_483_647),
            ),
            (Some(Duration::MAX), Some(2_147_483_647)),
        ];
        for (timeout, want) in cases {
            assert_eq!(deadline_seconds(*timeout), *want, "{timeout:?}");
        }
    }

    #[test]
    fn deadline_placement_per_stage() {
        let cases = [
            (Stage::Apply, DeadlinePlacement::PodTemplate),
            (Stage::Config, DeadlinePlacement::PodTemplate),
            (Stage::Upgrade, DeadlinePlacement::PodTemplate),
            (Stage::PostInterrupt, DeadlinePlacement::PodTemplate),
            (Stage::Uninstall, DeadlinePlacement::PodTemplate),
            (Stage::Interrupt, DeadlinePlacement::Job),
            (Stage::UninstallInterrupt, DeadlinePlacement::Job),
        ];
        for (stage, want) in cases {
            assert_eq!(placement(stage), want, "{stage:?}");
        }
        let ten = Some(Duration::from_secs(10));
        assert_eq!(
            deadlines(Stage::Apply, ten),
            Deadlines {
                pod: Some(10),
                job: None
            }
        );
        assert_eq!(
            deadlines(Stage::Interrupt, ten),
            Deadlines {
                pod: None,
                job: Some(10)
            }
        );
        assert_eq!(deadlines(Stage::Interrupt, None), Deadlines::default());
    }

    #[test]
    fn package_stage_timeout() {
        let package = |timeout: Option<&str>| Package {
            name: "dexter".into(),
            stage_timeout: timeout.map(str::to_owned),
            ..Package::default()
        };
        // (stageTimeout, the bound or the start of the error)
        type Case = (Option<&'static str>, Result<Option<Duration>, &'static str>);
        let cases: &[Case] = &[
            (None, Ok(Some(HOUR))),
            (Some("0"), Ok(None)),
            (Some("0s"), Ok(None)),
            (Some("-0s"), Ok(None)),
            (Some("90s"), Ok(Some(Duration::from_secs(90)))),
            (Some("1h30m"), Ok(Some(Duration::from_secs(5400)))),
            (
                Some("-5m"),
                Err("package \"dexter\": stageTimeout must be greater than or equal to 0"),
            ),
            (
                Some("10"),
                Err("package \"dexter\": stageTimeout \"10\" is not a duration"),
            ),
        ];
        for (text, want) in cases {
            let got = package(*text)
                .stage_timeout(HOUR)
                .map_err(|error| error.to_string());
            match (got, want) {
                (Ok(got), Ok(want)) => assert_eq!(got, *want, "{text:?}"),
                (Err(got), Err(want)) => assert!(got.starts_with(want), "{text:?}: {got}"),
                (got, want) => panic!("{text:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
