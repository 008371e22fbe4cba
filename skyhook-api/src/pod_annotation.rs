//! The JSON the operator puts in the `skyhook.nvidia.com/package` annotation of every package
//! and interrupt pod, naming the package, Skyhook and stage the pod runs.

use serde::{Deserialize, Serialize};

use crate::node_state::go_json;
use crate::v1alpha1::Stage;

/// Value of the pod annotation [`crate::keys::Keys::package_annotation`]. Field order and omissions
/// follow upstream so the annotation reads the same whichever operator wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodPackageAnnotation {
    /// Package name.
    pub name: String,
    /// Package version.
    pub version: String,
    /// Name of the Skyhook the pod works for.
    pub skyhook: String,
    /// Stage the pod runs (`interrupt` for interrupt pods).
    pub stage: Stage,
    /// Package image without tag. Go's decoder reads a missing field as empty, and pods made by
    /// hand (upstream's pod-finalizer test) carry no image, so it may be absent.
    #[serde(default)]
    pub image: String,
    /// Digest the package image is pulled by, when pinned.
    #[serde(
        rename = "containerSHA",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub container_sha: String,
    /// Set when the pod no longer matches the spec or node state; the pod is then deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub invalid: bool,
}

impl PodPackageAnnotation {
    /// Reads an annotation value.
    pub fn parse(annotation: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(annotation)
    }

    /// The annotation value, as upstream's Go `encoding/json` writes it.
    pub fn to_annotation(&self) -> String {
        go_json(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_upstream_format() {
        let cases = [
            r#"{"name":"dexter","version":"1.2.3","skyhook":"demo","stage":"apply","image":"ghcr.io/x/dexter"}"#,
            r#"{"name":"dexter","version":"1.2.3","skyhook":"demo","stage":"interrupt","image":"ghcr.io/x/dexter","containerSHA":"sha256:abc","invalid":true}"#,
        ];
        for case in cases {
            let parsed = PodPackageAnnotation::parse(case).unwrap();
            assert_eq!(parsed.to_annotation(), case);
        }
    }

    #[test]
    fn a_hand_made_annotation_without_image_reads_as_empty_image() {
        let parsed = PodPackageAnnotation::parse(
            r#"{"name":"foobar","version":"1.2.3","stage":"apply","skyhook":"foobar"}"#,
        )
        .unwrap();
        assert_eq!(parsed.image, "");
        assert_eq!(parsed.stage, Stage::Apply);
        assert_eq!(parsed.skyhook, "foobar");
    }

    #[test]
    fn omits_empty_sha_and_false_invalid() {
        let annotation = PodPackageAnnotation {
            name: "a".into(),
            version: "1".into(),
            skyhook: "s".into(),
            stage: Stage::PostInterrupt,
            image: "i".into(),
            container_sha: String::new(),
            invalid: false,
        };
        assert_eq!(
            annotation.to_annotation(),
            r#"{"name":"a","version":"1","skyhook":"s","stage":"post-interrupt","image":"i"}"#
        );
    }
}
