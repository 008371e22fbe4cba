//! Admission latency and throughput through the real API server: server-side dry-run creates of
//! a valid Skyhook (allowed) and of a dependency cycle (denied by the webhook, which the CRD
//! schema cannot catch), each at several concurrencies.

use std::time::Instant;

use anyhow::{Context, bail};
use futures::StreamExt as _;
use kube::api::{DynamicObject, PostParams};

use super::manifests;
use super::report::{AdmissionReport, quantile};
use crate::skyhook_api;

/// Requests before each measurement, to warm connections and the webhook's TLS sessions.
const WARM_UP: usize = 20;

/// Whether the object is expected to pass admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Object {
    Valid,
    Invalid,
}

impl Object {
    pub fn name(self) -> &'static str {
        match self {
            Self::Valid => "valid",
            Self::Invalid => "invalid",
        }
    }

    fn manifest(self) -> serde_json::Value {
        match self {
            Self::Valid => manifests::single_package("bench-admission", 50),
            Self::Invalid => manifests::dependency_cycle("bench-admission"),
        }
    }
}

/// One dry-run create; fails when the outcome is not the expected one (so a webhook that is not
/// called, or a schema that rejects first, cannot pass for a fast webhook).
async fn create_once(
    api: &kube::Api<DynamicObject>,
    object: Object,
    body: &DynamicObject,
) -> anyhow::Result<f64> {
    let params = PostParams {
        dry_run: true,
        field_manager: Some("bench".to_owned()),
    };
    let started = Instant::now();
    let outcome = api.create(&params, body).await;
    let seconds = started.elapsed().as_secs_f64();
    match (object, outcome) {
        (Object::Valid, Ok(_)) => Ok(seconds),
        (Object::Invalid, Err(kube::Error::Api(status)))
            if status.message.contains("admission webhook") =>
        {
            Ok(seconds)
        }
        (Object::Valid, Err(error)) => Err(error).context("a valid Skyhook was refused"),
        (Object::Invalid, Ok(_)) => bail!("the dependency cycle was admitted"),
        (Object::Invalid, Err(error)) => {
            bail!("the dependency cycle was refused, but not by the webhook: {error}")
        }
    }
}

/// `requests` dry-run creates of `object`, `concurrency` at a time.
pub async fn measure(
    client: &kube::Client,
    object: Object,
    concurrency: usize,
    requests: usize,
) -> anyhow::Result<AdmissionReport> {
    let api = skyhook_api(client);
    let body: DynamicObject = serde_json::from_value(object.manifest())?;
    for _ in 0..WARM_UP {
        create_once(&api, object, &body).await?;
    }
    let started = Instant::now();
    let latencies: Vec<f64> = futures::stream::iter(0..requests)
        .map(|_| create_once(&api, object, &body))
        .buffer_unordered(concurrency.max(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<_>>()?;
    let wall = started.elapsed().as_secs_f64();
    let ms = |q| quantile(&latencies, q).unwrap_or(f64::NAN) * 1000.0;
    Ok(AdmissionReport {
        case: "admission",
        object: object.name(),
        concurrency,
        requests,
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
        per_second: requests as f64 / wall,
    })
}
