//! Leader election with a `coordination.k8s.io/v1` Lease named `3c22c1ae.nvidia.com` (upstream's
//! lease ID) in the controller's namespace, so that two replicas never reconcile at once.
//!
//! Contract: [`decide`] is pure: from the Lease as read, this replica's identity and the time, it
//! says whether to create the Lease, write it (take it over or renew it) or wait. Writes replace
//! the Lease with the `resourceVersion` that was read, so two replicas racing for it cannot both
//! win: the loser gets a conflict and reads again. [`LeaderElector`] runs that loop against the
//! API server with client-go's default timings (15 s lease, 10 s renew deadline, 2 s retry).
//!
//! A replica that loses the Lease stops reconciling at once and exits (as controller-runtime
//! does), because another replica may already be acting on the cluster.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use tracing::{info, trace, warn};

/// The Lease upstream's operator holds; keeping its name means our controller and upstream's
/// never reconcile the same cluster at the same time during a migration.
pub const LEASE_NAME: &str = "3c22c1ae.nvidia.com";

/// Leader-election timings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTimings {
    /// How long a Lease stays valid after its last renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leadership.
    pub renew_deadline: Duration,
    /// Time between attempts.
    pub retry_period: Duration,
}

impl Default for LeaseTimings {
    fn default() -> Self {
        LeaseTimings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// What to do with the Lease.
#[derive(Debug, Clone, PartialEq)]
pub enum LeaseAction {
    /// No Lease exists: create it, held by us.
    Create(LeaseSpec),
    /// Write the Lease (ours to renew, or free to take).
    Write(LeaseSpec),
    /// Another replica holds a valid Lease.
    Wait {
        /// Who holds it.
        holder: String,
    },
}

/// Decides what `identity` does with the Lease `current` at `now`.
pub fn decide(
    current: Option<&LeaseSpec>,
    identity: &str,
    now: Timestamp,
    lease_duration: Duration,
) -> LeaseAction {
    let duration_seconds = i32::try_from(lease_duration.as_secs()).unwrap_or(i32::MAX);
    let held_by_us = |acquired: Option<MicroTime>, transitions: i32| LeaseSpec {
        holder_identity: Some(identity.to_owned()),
        lease_duration_seconds: Some(duration_seconds),
        acquire_time: Some(acquired.unwrap_or(MicroTime(now))),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    };
    let Some(current) = current else {
        return LeaseAction::Create(held_by_us(None, 0));
    };
    let transitions = current.lease_transitions.unwrap_or(0);
    let holder = current.holder_identity.as_deref().unwrap_or_default();
    if holder == identity {
        return LeaseAction::Write(held_by_us(current.acquire_time.clone(), transitions));
    }
    let expires = current.renew_time.as_ref().map(|renewed| {
        let seconds = current.lease_duration_seconds.unwrap_or(duration_seconds);
        renewed.0 + SignedDuration::from_secs(i64::from(seconds))
    });
    let free = holder.is_empty() || expires.is_none_or(|expires| expires <= now);
    if free {
        LeaseAction::Write(held_by_us(None, transitions + 1))
    } else {
        LeaseAction::Wait {
            holder: holder.to_owned(),
        }
    }
}

/// The Lease as this replica leaves it on shutdown: no holder and a 1-second duration, so the
/// next replica takes over at once instead of waiting for it to expire.
pub fn released(current: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        renew_time: Some(MicroTime(now)),
        ..current.clone()
    }
}

/// Leadership ended.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// Another replica holds the Lease now.
    #[error("lost the leader Lease {LEASE_NAME} to {holder:?}")]
    Taken {
        /// The new holder.
        holder: String,
    },
    /// The Lease could not be renewed within the renew deadline.
    #[error("failed to renew the leader Lease {LEASE_NAME} within {deadline:?}")]
    RenewFailed {
        /// The renew deadline.
        deadline: Duration,
        /// The last API error.
        #[source]
        source: kube::Error,
    },
}

/// Holds the Lease for this replica.
#[derive(Debug, Clone)]
pub struct LeaderElector {
    api: Api<Lease>,
    identity: String,
    timings: LeaseTimings,
}

/// Outcome of one attempt to hold the Lease.
enum Attempt {
    Held,
    HeldByOther(String),
}

impl LeaderElector {
    /// An elector for `identity` over the Lease in `api`'s namespace.
    pub fn new(api: Api<Lease>, identity: String, timings: LeaseTimings) -> Self {
        LeaderElector {
            api,
            identity,
            timings,
        }
    }

    /// This replica's identity in the Lease.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Waits until this replica holds the Lease.
    pub async fn acquire(&self) {
        let mut last_holder = String::new();
        loop {
            match self.attempt().await {
                Ok(Attempt::Held) => {
                    info!(lease = LEASE_NAME, identity = %self.identity, "became leader");
                    return;
                }
                Ok(Attempt::HeldByOther(holder)) => {
                    if holder != last_holder {
                        info!(lease = LEASE_NAME, %holder, "waiting for leadership");
                        last_holder = holder;
                    }
                }
                Err(error) => {
                    warn!(lease = LEASE_NAME, error = %error, "leader election attempt failed")
                }
            }
            tokio::time::sleep(self.timings.retry_period).await;
        }
    }

    /// Renews the Lease until leadership is lost, and returns why.
    pub async fn hold(&self) -> LeaderError {
        let mut last_renewal = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.timings.retry_period).await;
            match self.attempt().await {
                Ok(Attempt::Held) => {
                    trace!(lease = LEASE_NAME, "renewed leadership");
                    last_renewal = tokio::time::Instant::now();
                }
                Ok(Attempt::HeldByOther(holder)) => return LeaderError::Taken { holder },
                Err(source) => {
                    warn!(lease = LEASE_NAME, error = %source, "failed to renew leadership");
                    if last_renewal.elapsed() >= self.timings.renew_deadline {
                        return LeaderError::RenewFailed {
                            deadline: self.timings.renew_deadline,
                            source,
                        };
                    }
                }
            }
        }
    }

    /// Gives the Lease up so that another replica can take over at once.
    pub async fn release(&self) {
        let result = async {
            let mut lease = self.api.get(LEASE_NAME).await?;
            let spec = lease.spec.clone().unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
                return Ok(());
            }
            lease.spec = Some(released(&spec, Timestamp::now()));
            self.api
                .replace(LEASE_NAME, &PostParams::default(), &lease)
                .await
                .map(|_| ())
        }
        .await;
        match result {
            Ok(()) => info!(lease = LEASE_NAME, "released leadership"),
            Err(error) => warn!(lease = LEASE_NAME, error = %error, "failed to release leadership"),
        }
    }

    async fn attempt(&self) -> Result<Attempt, kube::Error> {
        let current = self.api.get_opt(LEASE_NAME).await?;
        let spec = current.as_ref().and_then(|lease| lease.spec.as_ref());
        match decide(
            spec,
            &self.identity,
            Timestamp::now(),
            self.timings.lease_duration,
        ) {
            LeaseAction::Wait { holder } => Ok(Attempt::HeldByOther(holder)),
            LeaseAction::Create(spec) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(LEASE_NAME.to_owned()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec),
                };
                self.api.create(&PostParams::default(), &lease).await?;
                Ok(Attempt::Held)
            }
            LeaseAction::Write(spec) => {
                let Some(mut lease) = current else {
                    return Ok(Attempt::HeldByOther(String::new()));
                };
                // The resourceVersion read above makes this write fail if anyone wrote since.
                lease.spec = Some(spec);
                self.api
                    .replace(LEASE_NAME, &PostParams::default(), &lease)
                    .await?;
                Ok(Attempt::Held)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-05-01T12:00:00Z";

    fn at(offset_secs: i64) -> Timestamp {
        NOW.parse::<Timestamp>().unwrap() + SignedDuration::from_secs(offset_secs)
    }

    fn lease(holder: Option<&str>, renewed: i64, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(Into::into),
            lease_duration_seconds: Some(15),
            acquire_time: Some(MicroTime(at(-100))),
            renew_time: Some(MicroTime(at(renewed))),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn decisions() {
        let duration = Duration::from_secs(15);
        let mine = |acquired: i64, transitions: i32| LeaseSpec {
            holder_identity: Some("me".into()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(MicroTime(at(acquired))),
            renew_time: Some(MicroTime(at(0))),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        };
        let cases = [
            ("no lease", None, LeaseAction::Create(mine(0, 0))),
            (
                "renew ours",
                Some(lease(Some("me"), -3, 4)),
                LeaseAction::Write(mine(-100, 4)),
            ),
            (
                "other holder, valid",
                Some(lease(Some("other"), -14, 4)),
                LeaseAction::Wait {
                    holder: "other".into(),
                },
            ),
            (
                "other holder, expired",
                Some(lease(Some("other"), -15, 4)),
                LeaseAction::Write(mine(0, 5)),
            ),
            (
                "released",
                Some(lease(None, -1, 4)),
                LeaseAction::Write(mine(0, 5)),
            ),
            (
                "empty holder",
                Some(lease(Some(""), -1, 2)),
                LeaseAction::Write(mine(0, 3)),
            ),
        ];
        for (name, current, want) in cases {
            assert_eq!(
                decide(current.as_ref(), "me", at(0), duration),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn honours_the_holders_own_duration() {
        let mut long = lease(Some("other"), -20, 0);
        long.lease_duration_seconds = Some(60);
        assert!(matches!(
            decide(Some(&long), "me", at(0), Duration::from_secs(15)),
            LeaseAction::Wait { .. }
        ));
    }

    #[test]
    fn release_frees_the_lease_at_once() {
        let spec = released(&lease(Some("me"), -1, 3), at(0));
        assert_eq!(spec.holder_identity, None);
        assert_eq!(spec.lease_transitions, Some(3));
        assert!(matches!(
            decide(Some(&spec), "next", at(0), Duration::from_secs(15)),
            LeaseAction::Write(_)
        ));
    }
}
