//! What the controller reads of the API server's answer to its writes: the object's name and
//! `resourceVersion`, which tell the caches' wait for its own writes ([`super::own_writes`])
//! what to wait for, and nothing else.
//!
//! The answer to a create, patch or delete is the whole object with its `managedFields`.
//! Decoded as the object's type, a 1,000-node Skyhook's status patch (450 KB of JSON, 185 KB of
//! it managed fields listing every node's entries) allocated several MiB in thousands of small
//! maps and strings; a created pod, its spec, status and managed fields; an applied
//! node-metadata ConfigMap, its node's labels and annotations. All of it was dropped at once,
//! leaving the allocator's pages scattered with whatever long-lived objects were allocated
//! between them. [`Answer`] reads the two fields and serde skips the rest without allocating.

use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::{Client, Resource};
use serde::{Deserialize, Deserializer, Serialize};

/// The answer to a write of a `K`: its name and `resourceVersion` (see the module
/// documentation). An `Api<Answer<K>>` patches and deletes `K`s as an `Api<K>` does.
#[derive(Debug, Clone)]
pub struct Answer<K> {
    metadata: ObjectMeta,
    kind: PhantomData<fn() -> K>,
}

impl<K> Answer<K> {
    fn new(name: Option<String>, resource_version: Option<String>) -> Self {
        Answer {
            metadata: ObjectMeta {
                name,
                resource_version,
                ..ObjectMeta::default()
            },
            kind: PhantomData,
        }
    }
}

resource_of!(impl[K: Resource<DynamicType = ()>] Answer<K> as K {
    meta: |answer| answer.metadata,
    meta_mut: |answer| answer.metadata,
});

impl<'de, K> Deserialize<'de> for Answer<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            #[serde(default)]
            metadata: WireMeta,
        }
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase")]
        struct WireMeta {
            name: Option<String>,
            resource_version: Option<String>,
        }
        let Wire { metadata } = Wire::deserialize(deserializer)?;
        Ok(Answer::new(metadata.name, metadata.resource_version))
    }
}

/// Creates `object` in `namespace` (`None` for a cluster-scoped kind) as `Api::<K>::create`
/// does, reading only its [`Answer`]: `Api::create` decodes the answer as the type it sends.
pub async fn create<K>(
    client: &Client,
    namespace: Option<&str>,
    object: &K,
) -> Result<Answer<K>, kube::Error>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let body = serde_json::to_vec(object).map_err(kube::Error::SerdeError)?;
    create_json::<K>(client, namespace, body).await
}

/// [`create`] with the object already serialized as `json`.
pub async fn create_json<K>(
    client: &Client,
    namespace: Option<&str>,
    json: Vec<u8>,
) -> Result<Answer<K>, kube::Error>
where
    K: Resource<DynamicType = ()>,
{
    let mut request = kube::core::Request::new(K::url_path(&(), namespace))
        .create(&PostParams::default(), json)
        .map_err(kube::Error::BuildRequest)?;
    // What `Api::create` marks its request with, for the client's tracing.
    request.extensions_mut().insert("create");
    client.request::<Answer<K>>(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kube::ResourceExt;
    use skyhook_api::v1alpha1::Skyhook;

    #[test]
    fn an_answer_keeps_the_name_and_version_and_skips_the_rest() {
        let answer: Answer<Skyhook> = serde_json::from_value(serde_json::json!({
            "apiVersion": "skyhook.nvidia.com/v1alpha1", "kind": "Skyhook",
            "metadata": {
                "name": "gpu", "resourceVersion": "42", "uid": "u", "generation": 3,
                "labels": {"a": "b"},
                "managedFields": [{"manager": "skyhook-controller", "operation": "Apply",
                                   "fieldsType": "FieldsV1",
                                   "fieldsV1": {"f:status": {"f:nodeState": {"f:node-1": {}}}}}]
            },
            "spec": {"packages": {"p": {"version": "1.0.0", "image": "i"}}},
            "status": {"nodeState": {"node-1": {}}, "status": "complete"}
        }))
        .unwrap();
        assert_eq!(
            answer.meta(),
            Answer::<Skyhook>::new(Some("gpu".into()), Some("42".into())).meta()
        );
        assert_eq!(answer.name_any(), "gpu");
        assert_eq!(answer.resource_version().as_deref(), Some("42"));
    }

    #[test]
    fn an_answer_without_metadata_decodes_empty() {
        let answer: Answer<Pod> =
            serde_json::from_value(serde_json::json!({"kind": "Pod"})).unwrap();
        assert_eq!(answer.meta(), &ObjectMeta::default());
    }

    #[test]
    fn an_answer_addresses_the_kind_it_answers_for() {
        assert_eq!(
            Answer::<Pod>::url_path(&(), Some("skyhook")),
            "/api/v1/namespaces/skyhook/pods"
        );
        assert_eq!(
            Answer::<Skyhook>::url_path(&(), None),
            Skyhook::url_path(&(), None)
        );
        assert_eq!(Answer::<Skyhook>::kind(&()), "Skyhook");
    }
}
