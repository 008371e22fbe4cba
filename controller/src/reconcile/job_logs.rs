//! Reads the logs of the stuck containers whose `last-logs` snapshot a plan asks for
//! ([`crate::last_logs`]), and gives each Job the annotation's text.
//!
//! Contract: best effort, never in the way of the reconcile. A read is bounded server-side by
//! [`TAIL_LINES`] (`limitBytes` would keep the head of the log, not its end), client-side by
//! [`last_logs::MAX_BYTES`], and in time by [`READ_TIMEOUT`] (a kubelet on an unreachable node
//! never answers). A read that fails is logged and gives the annotation its reason, so that
//! every Job is read once.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{AsyncReadExt, StreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::api::LogParams;
use kube::{Api, Client};
use tracing::warn;

use crate::last_logs::{self, LastLogs};

/// The most log lines asked of the kubelet.
pub const TAIL_LINES: i64 = 1000;
/// How long one read may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How many reads are in flight at once.
const READS_IN_FLIGHT: usize = 8;

/// The `last-logs` text of each Job of `requests`, by Job name, reading the pods of `namespace`.
pub async fn snapshot(
    client: &Client,
    namespace: &str,
    requests: BTreeMap<String, LastLogs>,
) -> BTreeMap<String, String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    stream::iter(requests)
        .map(|(job, request)| {
            let pods = &pods;
            async move {
                let read = match &request {
                    LastLogs::Tail { pod, container, .. } => read_tail(pods, pod, container).await,
                    LastLogs::Record(_) => Ok(Vec::new()),
                };
                if let (Err(error), LastLogs::Tail { pod, container, .. }) = (&read, &request) {
                    warn!(
                        job,
                        pod,
                        container,
                        error,
                        "could not read the logs of a stage stuck at FailureTarget; recording why"
                    );
                }
                let text = last_logs::annotation(&request, read.as_deref().map_err(Clone::clone));
                (job, text)
            }
        })
        .buffer_unordered(READS_IN_FLIGHT)
        .collect()
        .await
}

/// The end of the log of `container` of `pod`: at most [`last_logs::MAX_BYTES`].
async fn read_tail(pods: &Api<Pod>, pod: &str, container: &str) -> Result<Vec<u8>, String> {
    let params = LogParams {
        container: Some(container.to_owned()),
        tail_lines: Some(TAIL_LINES),
        ..LogParams::default()
    };
    let read = async {
        let mut log = (pods.log_stream(pod, &params).await).map_err(|error| error.to_string())?;
        let mut kept = Vec::new();
        let mut chunk = vec![0; 32 * 1024];
        loop {
            let read = (log.read(&mut chunk).await).map_err(|error| error.to_string())?;
            if read == 0 {
                return Ok(kept);
            }
            kept.extend_from_slice(chunk.get(..read).unwrap_or_default());
            let over = kept.len().saturating_sub(last_logs::MAX_BYTES);
            kept.drain(..over);
        }
    };
    tokio::time::timeout(READ_TIMEOUT, read)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {}s", READ_TIMEOUT.as_secs())))
}
