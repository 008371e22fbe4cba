//! Pod volumes: what each one holds (pure). The worker writes the files and bind-mounts them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    ConfigMap, DownwardAPIVolumeFile, KeyToPath, Pod, ProjectedVolumeSource, Secret, Volume,
};

use super::env::format_map;

/// A file of a ConfigMap, Secret, downward API or projected volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeFile {
    /// Relative to the volume's root; may contain `/`.
    pub path: String,
    pub data: Vec<u8>,
    pub mode: u32,
}

/// What a volume is on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeContent {
    /// Files written into a per-pod directory.
    Files(Vec<VolumeFile>),
    /// An empty per-pod directory.
    EmptyDir,
    /// A path in the node's root (`/` is the root itself), created if the type asks for it.
    HostPath { path: String, kind: HostPathKind },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostPathKind {
    /// `""`, `Directory`, `DirectoryOrCreate` and anything else directory-like: created if missing.
    Directory,
    /// `File`, `FileOrCreate`: an empty file is created if missing.
    File,
}

/// Why a volume cannot be set up (reported as the waiting reason `ContainerCreating`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VolumeError {
    #[error("MountVolume.SetUp failed for volume {volume:?}: configmap {name:?} not found")]
    ConfigMapNotFound { volume: String, name: String },
    #[error("MountVolume.SetUp failed for volume {volume:?}: secret {name:?} not found")]
    SecretNotFound { volume: String, name: String },
    #[error(
        "MountVolume.SetUp failed for volume {volume:?}: {kind} references non-existent key: {key}"
    )]
    KeyNotFound {
        volume: String,
        kind: &'static str,
        key: String,
    },
    #[error("MountVolume.SetUp failed for volume {volume:?}: unsupported field {path:?}")]
    UnsupportedField { volume: String, path: String },
    #[error(
        "volume {volume:?} has a type devcluster does not support (configMap, secret, emptyDir, hostPath, downwardAPI and projected are supported)"
    )]
    Unsupported { volume: String },
}

/// Inputs for volume contents, fetched beforehand by the I/O layer.
#[derive(Debug, Clone, Copy)]
pub struct VolumeSources<'a> {
    pub pod: &'a Pod,
    pub config_maps: &'a BTreeMap<String, ConfigMap>,
    pub secrets: &'a BTreeMap<String, Secret>,
    /// A service-account token for projected `serviceAccountToken` sources.
    pub token: Option<&'a str>,
}

/// ConfigMaps and Secrets the pod's volumes refer to, and whether a token is needed.
pub fn referenced_objects(volumes: &[Volume]) -> (BTreeSet<String>, BTreeSet<String>, bool) {
    let mut config_maps = BTreeSet::new();
    let mut secrets = BTreeSet::new();
    let mut token = false;
    for v in volumes {
        if let Some(cm) = &v.config_map {
            config_maps.insert(cm.name.clone());
        }
        if let Some(s) = &v.secret
            && let Some(name) = &s.secret_name
        {
            secrets.insert(name.clone());
        }
        for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(cm) = &source.config_map {
                config_maps.insert(cm.name.clone());
            }
            if let Some(s) = &source.secret {
                secrets.insert(s.name.clone());
            }
            token |= source.service_account_token.is_some();
        }
    }
    (config_maps, secrets, token)
}

pub fn content(volume: &Volume, sources: &VolumeSources<'_>) -> Result<VolumeContent, VolumeError> {
    let name = volume.name.as_str();
    if let Some(host) = &volume.host_path {
        let kind = match host.type_.as_deref() {
            Some("File" | "FileOrCreate") => HostPathKind::File,
            _ => HostPathKind::Directory,
        };
        return Ok(VolumeContent::HostPath {
            path: host.path.clone(),
            kind,
        });
    }
    if volume.empty_dir.is_some() {
        return Ok(VolumeContent::EmptyDir);
    }
    let keyed = if let Some(cm) = &volume.config_map {
        Some((
            cm.default_mode,
            Keyed::new(
                KeySource::ConfigMap(&cm.name),
                cm.items.as_deref(),
                cm.optional,
            ),
        ))
    } else {
        volume.secret.as_ref().map(|s| {
            let secret_name = s.secret_name.as_deref().unwrap_or_default();
            (
                s.default_mode,
                Keyed::new(
                    KeySource::Secret(secret_name),
                    s.items.as_deref(),
                    s.optional,
                ),
            )
        })
    };
    if let Some((default_mode, keyed)) = keyed {
        let files = keyed.files(name, mode_or(default_mode, 0o644), sources)?;
        return Ok(VolumeContent::Files(files));
    }
    if let Some(d) = &volume.downward_api {
        let mode = mode_or(d.default_mode, 0o644);
        let files = downward_files(name, d.items.as_deref().unwrap_or_default(), mode, sources)?;
        return Ok(VolumeContent::Files(files));
    }
    if let Some(p) = &volume.projected {
        return Ok(VolumeContent::Files(projected_files(name, p, sources)?));
    }
    Err(VolumeError::Unsupported {
        volume: name.to_owned(),
    })
}

/// The files of a projected volume: each source's in turn, all with the volume's mode.
fn projected_files(
    name: &str,
    projected: &ProjectedVolumeSource,
    sources: &VolumeSources<'_>,
) -> Result<Vec<VolumeFile>, VolumeError> {
    let mode = mode_or(projected.default_mode, 0o644);
    let mut files = Vec::new();
    for source in projected.sources.iter().flatten() {
        let config_map = (source.config_map.as_ref()).map(|cm| {
            Keyed::new(
                KeySource::ConfigMap(&cm.name),
                cm.items.as_deref(),
                cm.optional,
            )
        });
        let secret = (source.secret.as_ref())
            .map(|s| Keyed::new(KeySource::Secret(&s.name), s.items.as_deref(), s.optional));
        for keyed in config_map.into_iter().chain(secret) {
            files.extend(keyed.files(name, mode, sources)?);
        }
        if let Some(d) = &source.downward_api {
            files.extend(downward_files(
                name,
                d.items.as_deref().unwrap_or_default(),
                mode,
                sources,
            )?);
        }
        if let Some(token) = &source.service_account_token {
            files.push(VolumeFile {
                path: token.path.clone(),
                data: sources.token.unwrap_or_default().as_bytes().to_vec(),
                mode,
            });
        }
    }
    Ok(files)
}

fn mode_or(mode: Option<i32>, default: u32) -> u32 {
    mode.and_then(|m| u32::try_from(m).ok()).unwrap_or(default) & 0o7777
}

fn select_files(
    volume: &str,
    kind: &'static str,
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    optional: bool,
    mode: u32,
) -> Result<Vec<VolumeFile>, VolumeError> {
    let Some(items) = items.filter(|i| !i.is_empty()) else {
        return Ok(data
            .iter()
            .map(|(k, v)| VolumeFile {
                path: k.clone(),
                data: v.clone(),
                mode,
            })
            .collect());
    };
    let mut files = Vec::new();
    for item in items {
        match data.get(&item.key) {
            Some(v) => files.push(VolumeFile {
                path: item.path.clone(),
                data: v.clone(),
                mode: item.mode.map_or(mode, |m| mode_or(Some(m), mode)),
            }),
            None if optional => {}
            None => {
                return Err(VolumeError::KeyNotFound {
                    volume: volume.to_owned(),
                    kind,
                    key: item.key.clone(),
                });
            }
        }
    }
    Ok(files)
}

/// The object a configMap or secret volume (or projection) takes its keys from.
#[derive(Debug, Clone, Copy)]
enum KeySource<'a> {
    ConfigMap(&'a str),
    Secret(&'a str),
}

/// A configMap or secret with the keys to take from it, as a volume or a projection names them.
#[derive(Debug, Clone, Copy)]
struct Keyed<'a> {
    source: KeySource<'a>,
    items: Option<&'a [KeyToPath]>,
    optional: Option<bool>,
}

impl<'a> Keyed<'a> {
    fn new(source: KeySource<'a>, items: Option<&'a [KeyToPath]>, optional: Option<bool>) -> Self {
        Self {
            source,
            items,
            optional,
        }
    }

    /// The files: every key, or the selected `items`. A missing object is an error unless the
    /// volume is optional.
    fn files(
        self,
        volume: &str,
        mode: u32,
        sources: &VolumeSources<'_>,
    ) -> Result<Vec<VolumeFile>, VolumeError> {
        let Self {
            source,
            items,
            optional,
        } = self;
        let optional = optional == Some(true);
        let (kind, data) = match source {
            KeySource::ConfigMap(name) => (
                "configMap",
                sources.config_maps.get(name).map(|cm| {
                    let mut data: BTreeMap<String, Vec<u8>> = cm
                        .data
                        .iter()
                        .flatten()
                        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
                        .collect();
                    for (k, v) in cm.binary_data.iter().flatten() {
                        data.insert(k.clone(), v.0.clone());
                    }
                    data
                }),
            ),
            KeySource::Secret(name) => (
                "secret",
                sources.secrets.get(name).map(|secret| {
                    secret
                        .data
                        .iter()
                        .flatten()
                        .map(|(k, v)| (k.clone(), v.0.clone()))
                        .collect::<BTreeMap<String, Vec<u8>>>()
                }),
            ),
        };
        let Some(data) = data else {
            if optional {
                return Ok(Vec::new());
            }
            let volume = volume.to_owned();
            return Err(match source {
                KeySource::ConfigMap(name) => VolumeError::ConfigMapNotFound {
                    volume,
                    name: name.to_owned(),
                },
                KeySource::Secret(name) => VolumeError::SecretNotFound {
                    volume,
                    name: name.to_owned(),
                },
            });
        };
        select_files(volume, kind, &data, items, optional, mode)
    }
}

fn downward_files(
    volume: &str,
    items: &[DownwardAPIVolumeFile],
    mode: u32,
    sources: &VolumeSources<'_>,
) -> Result<Vec<VolumeFile>, VolumeError> {
    let meta = &sources.pod.metadata;
    items
        .iter()
        .filter_map(|item| {
            let field = item.field_ref.as_ref()?;
            let value = match field.field_path.as_str() {
                "metadata.name" => meta.name.clone().unwrap_or_default(),
                "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
                "metadata.uid" => meta.uid.clone().unwrap_or_default(),
                "metadata.labels" => format_map(meta.labels.as_ref()),
                "metadata.annotations" => format_map(meta.annotations.as_ref()),
                other => {
                    return Some(Err(VolumeError::UnsupportedField {
                        volume: volume.to_owned(),
                        path: other.to_owned(),
                    }));
                }
            };
            Some(Ok(VolumeFile {
                path: item.path.clone(),
                data: value.into_bytes(),
                mode: item.mode.map_or(mode, |m| mode_or(Some(m), mode)),
            }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn volume(v: serde_json::Value) -> Volume {
        serde_json::from_value(v).unwrap()
    }

    fn sources_content(v: serde_json::Value) -> Result<VolumeContent, VolumeError> {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"a": "1"}}
        }))
        .unwrap();
        let cms: BTreeMap<String, ConfigMap> = [(
            "cm".to_owned(),
            serde_json::from_value(
                json!({"data": {"k1": "v1", "k2": "v2"}, "binaryData": {"b": "AAE="}}),
            )
            .unwrap(),
        )]
        .into();
        let secrets: BTreeMap<String, Secret> = [(
            "s".to_owned(),
            serde_json::from_value(json!({"data": {"pw": "aHVudGVyMg=="}})).unwrap(),
        )]
        .into();
        let sources = VolumeSources {
            pod: &pod,
            config_maps: &cms,
            secrets: &secrets,
            token: Some("tok"),
        };
        content(&volume(v), &sources)
    }

    fn files(c: VolumeContent) -> Vec<(String, Vec<u8>, u32)> {
        match c {
            VolumeContent::Files(f) => f.into_iter().map(|f| (f.path, f.data, f.mode)).collect(),
            other => panic!("expected files, got {other:?}"),
        }
    }

    #[test]
    fn config_map_and_secret_volumes() {
        let all =
            files(sources_content(json!({"name": "v", "configMap": {"name": "cm"}})).unwrap());
        assert_eq!(
            all,
            vec![
                ("b".into(), vec![0, 1], 0o644),
                ("k1".into(), b"v1".to_vec(), 0o644),
                ("k2".into(), b"v2".to_vec(), 0o644)
            ]
        );
        let items = files(
            sources_content(json!({"name": "v", "configMap": {"name": "cm", "defaultMode": 0o755,
                "items": [{"key": "k2", "path": "sub/two"}, {"key": "k1", "path": "one", "mode": 0o600}]}}))
            .unwrap(),
        );
        assert_eq!(
            items,
            vec![
                ("sub/two".into(), b"v2".to_vec(), 0o755),
                ("one".into(), b"v1".to_vec(), 0o600)
            ]
        );
        let secret =
            files(sources_content(json!({"name": "v", "secret": {"secretName": "s"}})).unwrap());
        assert_eq!(secret, vec![("pw".into(), b"hunter2".to_vec(), 0o644)]);
    }

    #[test]
    fn missing_sources() {
        let cases = [
            (json!({"name": "v", "configMap": {"name": "gone"}}), false),
            (
                json!({"name": "v", "configMap": {"name": "gone", "optional": true}}),
                true,
            ),
            (
                json!({"name": "v", "configMap": {"name": "cm", "items": [{"key": "x", "path": "x"}]}}),
                false,
            ),
            (
                json!({"name": "v", "secret": {"secretName": "gone"}}),
                false,
            ),
            (
                json!({"name": "v", "persistentVolumeClaim": {"claimName": "c"}}),
                false,
            ),
        ];
        for (v, ok) in cases {
            assert_eq!(sources_content(v.clone()).is_ok(), ok, "{v}");
        }
    }

    #[test]
    fn projected_service_account_volume() {
        let v = json!({"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
            {"configMap": {"name": "cm", "items": [{"key": "k1", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}
        ]}});
        assert_eq!(
            files(sources_content(v).unwrap()),
            vec![
                ("token".into(), b"tok".to_vec(), 0o644),
                ("ca.crt".into(), b"v1".to_vec(), 0o644),
                ("namespace".into(), b"ns".to_vec(), 0o644)
            ]
        );
    }

    #[test]
    fn host_path_and_empty_dir() {
        assert_eq!(
            sources_content(json!({"name": "v", "hostPath": {"path": "/"}})).unwrap(),
            VolumeContent::HostPath {
                path: "/".into(),
                kind: HostPathKind::Directory
            }
        );
        assert_eq!(
            sources_content(
                json!({"name": "v", "hostPath": {"path": "/etc/x", "type": "FileOrCreate"}})
            )
            .unwrap(),
            VolumeContent::HostPath {
                path: "/etc/x".into(),
                kind: HostPathKind::File
            }
        );
        assert_eq!(
            sources_content(json!({"name": "v", "emptyDir": {}})).unwrap(),
            VolumeContent::EmptyDir
        );
    }
}
