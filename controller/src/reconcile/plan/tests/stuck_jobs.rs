//! A stage Job the Job controller has decided to fail (`FailureTarget`) but cannot finish,
//! because its attempt never terminates: its `last-logs` are written once, the plan looks again
//! when the five minutes of grace are over, and then the failure is recorded on the node without
//! marking the Job recorded (that waits for `Failed`).

use jiff::SignedDuration;
use skyhook_api::v1alpha1::{Stage, State};

use super::sim::{Sim, node, package, skyhook};
use crate::last_logs::LastLogs;
use crate::pod_outcome::{PodFailure, PodOutcome};
use crate::reconcile::snapshot::JobRun;

/// `stuck`'s apply Job on node-a, at `FailureTarget` since `waited` ago, its last logs still
/// to write.
fn stuck_at_failure_target(waited: SignedDuration) -> (Sim, String) {
    let mut sim = Sim::new(
        vec![node("node-a", 0)],
        vec![skyhook("stuck", vec![package("driver", "1.0.0")])],
    );
    sim.step();
    let now = sim.now;
    let pod = sim.snapshot.pods.first_mut().expect("the apply Job");
    pod.job = Some(JobRun {
        failure_target_since: Some(now - waited),
        last_logs: Some(LastLogs::Tail {
            pod: format!("{}-x7k2p", pod.name),
            container: "driver-apply".into(),
            instead: None,
        }),
        ..JobRun::default()
    });
    let name = pod.name.clone();
    (sim, name)
}

/// The state of `driver`'s apply entry (it must be the only one) and the node's status.
fn reads(sim: &Sim) -> (State, Option<String>) {
    let state = sim.state("stuck", "node-a");
    let [(key, Stage::Apply, state)] = state.as_slice() else {
        panic!("one apply entry: {state:?}");
    };
    assert_eq!(key, "driver|1.0.0");
    (*state, sim.node_status("stuck", "node-a"))
}

#[test]
fn a_job_stuck_at_failure_target_gets_its_last_logs_and_a_look_when_its_grace_ends() {
    let (mut sim, job) = stuck_at_failure_target(SignedDuration::from_secs(4 * 60 + 59));
    let planned = sim.step();
    assert_eq!(
        planned.last_logs.get(&job),
        Some(&LastLogs::Tail {
            pod: format!("{job}-x7k2p"),
            container: "driver-apply".into(),
            instead: None,
        })
    );
    let wait = planned
        .requeue_after
        .expect("a look at the end of the grace");
    assert!(wait <= std::time::Duration::from_secs(2), "{wait:?}");
    // Nothing is recorded yet: the node and the package stay in progress.
    assert_eq!(reads(&sim), (State::InProgress, Some("in_progress".into())));
}

#[test]
fn a_job_stuck_at_failure_target_past_its_grace_reads_as_failed_but_is_not_marked_recorded() {
    let (mut sim, job) = stuck_at_failure_target(SignedDuration::from_secs(5 * 60 + 1));
    let pod = sim.snapshot.pods.first_mut().expect("the apply Job");
    if let Some(run) = pod.job.as_mut() {
        // Already snapshotted: the cache shows the annotation.
        run.last_logs = None;
    }
    // What `job_outcome::outcome` says of it (tested there).
    pod.outcome = PodOutcome::Failed(PodFailure {
        container: Some("driver-apply".into()),
        exit_code: None,
        reason: "DeadlineExceeded".into(),
        message: Some("Job was active longer than specified deadline".into()),
        restarts: 0,
        reboot_requested: None,
    });
    let planned = sim.step();
    assert!(planned.last_logs.is_empty());
    assert!(planned.record_jobs.is_empty(), "{:?}", planned.record_jobs);
    assert!(!planned.delete_jobs.contains_key(&job));
    assert_eq!(reads(&sim), (State::Erroring, Some("erroring".into())));
}
