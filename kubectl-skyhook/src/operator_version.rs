//! Which operator version runs in the namespace, from its Deployment (pure).

use k8s_openapi::api::apps::v1::Deployment;

/// The label the chart sets to the operator version.
const VERSION_LABEL: &str = "app.kubernetes.io/version";

/// The operator version from the first Deployment whose labels or images mention "skyhook":
/// its `app.kubernetes.io/version` label, otherwise the tag of its skyhook image (not
/// `latest`). The error says why no version could be found.
pub fn operator_version(deployments: &[Deployment]) -> Result<String, String> {
    let images = |d: &Deployment| -> Vec<String> {
        d.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .map(|s| {
                s.containers
                    .iter()
                    .filter_map(|c| c.image.clone())
                    .collect()
            })
            .unwrap_or_default()
    };
    let deployment = deployments
        .iter()
        .find(|d| is_operator(d))
        .ok_or_else(|| "no skyhook operator deployment in the namespace".to_owned())?;
    if let Some(version) = deployment
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(VERSION_LABEL))
        .filter(|v| !v.is_empty())
    {
        return Ok(version.clone());
    }
    images(deployment)
        .iter()
        .filter(|image| OPERATOR_WORDS.iter().any(|word| image.contains(word)))
        .find_map(|image| image_tag(image))
        .ok_or_else(|| {
            format!(
                "deployment {:?} has no {VERSION_LABEL} label and no versioned skyhook image",
                deployment.metadata.name.as_deref().unwrap_or_default()
            )
        })
}

/// The words an operator Deployment's labels or images mention: ours and upstream's before the
/// rename say `skyhook`, upstream's since say `nodewright`.
const OPERATOR_WORDS: [&str; 2] = ["skyhook", "nodewright"];

/// Whether `deployment` is an operator's: a label key or value, or a container image, mentions
/// [`OPERATOR_WORDS`].
pub fn is_operator(deployment: &Deployment) -> bool {
    let mentions = |text: &str| OPERATOR_WORDS.iter().any(|word| text.contains(word));
    let labelled =
        (deployment.metadata.labels.iter().flatten()).any(|(k, v)| mentions(k) || mentions(v));
    labelled
        || (deployment.spec.as_ref())
            .and_then(|s| s.template.spec.as_ref())
            .is_some_and(|s| {
                (s.containers.iter()).any(|c| c.image.as_deref().is_some_and(mentions))
            })
}

/// The tag of an image reference, without a digest; `None` for no tag or `latest`.
fn image_tag(image: &str) -> Option<String> {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last_segment = without_digest.rsplit('/').next().unwrap_or(without_digest);
    let (_, tag) = last_segment.split_once(':')?;
    (tag != "latest" && !tag.is_empty()).then(|| tag.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(labels: &[(&str, &str)], image: &str) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "op", "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<std::collections::BTreeMap<_,_>>()},
            "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "c", "image": image}]}}}
        }))
        .unwrap()
    }

    #[test]
    fn versions_from_labels_then_image_tags() {
        for (labels, image, expected) in [
            (
                vec![
                    ("app.kubernetes.io/version", "v0.13.0"),
                    ("app", "skyhook-operator"),
                ],
                "x/op:1",
                Ok("v0.13.0"),
            ),
            (
                vec![],
                "ghcr.io/nvidia/skyhook/operator:v0.9.1",
                Ok("v0.9.1"),
            ),
            (
                vec![],
                "localhost:5000/skyhook/operator:v1.2.3@sha256:abc",
                Ok("v1.2.3"),
            ),
            (vec![], "ghcr.io/nvidia/skyhook/operator:latest", Err(())),
            (vec![], "localhost:5000/skyhook/operator", Err(())),
            (vec![("app", "nginx")], "nginx:1.27", Err(())),
            (
                vec![],
                "ghcr.io/nvidia/nodewright/operator:v0.20.0",
                Ok("v0.20.0"),
            ),
        ] {
            let found = operator_version(&[deployment(&labels, image)]);
            assert_eq!(
                found.as_deref().map_err(|_| ()),
                expected,
                "{labels:?} {image}"
            );
        }
    }
}
