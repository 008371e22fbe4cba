//! The Events a stage Job's end sends, as upstream's Job reconciler: one `State`/`JobComplete`
//! on the node when its stage is recorded complete (no `Apply`/`UpdateNodeState` beside it),
//! and `State`/`JobFailed` naming the stage and the reason when it fails for good.

use super::sim::{Sim, node, package, skyhook};
use crate::pod_outcome::{PodFailure, PodOutcome};
use crate::reconcile::plan::output::{EventTarget, Plan};
use crate::reconcile::snapshot::JobRun;

/// `ends`'s apply Job on node-a, finished with `outcome`.
fn finished_apply_job(outcome: PodOutcome) -> Sim {
    let mut sim = Sim::new(
        vec![node("node-a", 0)],
        vec![skyhook("ends", vec![package("driver", "1.0.0")])],
    );
    sim.step();
    let pod = sim.snapshot.pods.first_mut().expect("the apply Job");
    pod.job = Some(JobRun {
        finished: true,
        ..JobRun::default()
    });
    pod.outcome = outcome;
    sim
}

/// The node's Events of a plan: (reason, action, message).
fn node_events(planned: &Plan) -> Vec<(&'static str, &'static str, String)> {
    planned
        .events
        .iter()
        .filter(|event| event.target == EventTarget::Node("node-a".into()))
        .map(|event| (event.reason, event.action, event.message.clone()))
        .collect()
}

#[test]
fn a_completed_job_is_reported_once_as_job_complete() {
    let mut sim = finished_apply_job(PodOutcome::Succeeded {
        container: "driver-applycheck".into(),
        restarts: 0,
    });
    let planned = sim.step();
    let recorded: Vec<(&'static str, &'static str, String)> = node_events(&planned)
        .into_iter()
        .filter(|(reason, action, _)| {
            (*reason, *action) == ("State", "JobComplete")
                || (*reason, *action) == ("Apply", "UpdateNodeState")
        })
        .collect();
    assert_eq!(
        recorded,
        vec![(
            "State",
            "JobComplete",
            "Package [driver:1.0.0] state complete on [skyhook:ends]".to_owned()
        )]
    );
}

#[test]
fn a_job_failed_for_good_is_reported_as_job_failed_with_its_stage_and_reason() {
    let mut sim = finished_apply_job(PodOutcome::Failed(PodFailure {
        container: Some("driver-apply".into()),
        exit_code: Some(2),
        reason: "BackoffLimitExceeded".into(),
        message: None,
        restarts: 3,
        reboot_requested: None,
    }));
    let planned = sim.step();
    let failed: Vec<String> = node_events(&planned)
        .into_iter()
        .filter(|(reason, action, _)| (*reason, *action) == ("State", "JobFailed"))
        .map(|(_, _, message)| message)
        .collect();
    assert_eq!(
        failed,
        vec!["Package [driver:1.0.0] stage apply failed on [skyhook:ends]: BackoffLimitExceeded"]
    );
}
