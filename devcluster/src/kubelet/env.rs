//! A container's environment and command line, resolved as the kubelet does: image env, service
//! env, `envFrom`, then `env` (with `valueFrom` and `$(VAR)` expansion), then the command from the
//! pod's `command`/`args` or the image's entrypoint and cmd.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapKeySelector, Container, EnvFromSource, EnvVarSource, Pod, Secret,
    SecretKeySelector,
};

use super::quantity;

/// Everything the environment may refer to, fetched beforehand by the I/O layer.
#[derive(Debug, Clone, Copy)]
pub struct EnvSources<'a> {
    pub pod: &'a Pod,
    pub host_ip: &'a str,
    pub pod_ip: &'a str,
    /// ConfigMaps of the pod's namespace by name; a missing name means "not found".
    pub config_maps: &'a BTreeMap<String, ConfigMap>,
    pub secrets: &'a BTreeMap<String, Secret>,
    /// Variables every container gets first (image env, `KUBERNETES_SERVICE_*`, `HOSTNAME`).
    pub base: &'a BTreeMap<String, String>,
    /// Node allocatable CPU (millicores) and memory (bytes), the default for `resourceFieldRef`
    /// limits that are not set.
    pub allocatable_cpu_millis: i128,
    pub allocatable_memory: i128,
}

/// Why the environment cannot be built; the kubelet reports these as
/// `CreateContainerConfigError`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error("configmap {name:?} not found")]
    ConfigMapNotFound { name: String },
    #[error("couldn't find key {key} in ConfigMap {namespace}/{name}")]
    ConfigMapKeyNotFound {
        namespace: String,
        name: String,
        key: String,
    },
    #[error("secret {name:?} not found")]
    SecretNotFound { name: String },
    #[error("couldn't find key {key} in Secret {namespace}/{name}")]
    SecretKeyNotFound {
        namespace: String,
        name: String,
        key: String,
    },
    #[error("unsupported fieldRef {path:?} in env var {var}")]
    UnsupportedField { var: String, path: String },
    #[error("unsupported resourceFieldRef {resource:?} in env var {var}")]
    UnsupportedResource { var: String, resource: String },
    #[error("invalid quantity in env var {var}: {reason}")]
    InvalidQuantity { var: String, reason: String },
}

/// The ConfigMaps and Secrets a container's env refers to, to fetch before resolving.
pub fn referenced_objects(container: &Container) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut config_maps = BTreeSet::new();
    let mut secrets = BTreeSet::new();
    for source in container.env_from.iter().flatten() {
        if let Some(r) = &source.config_map_ref {
            config_maps.insert(r.name.clone());
        }
        if let Some(r) = &source.secret_ref {
            secrets.insert(r.name.clone());
        }
    }
    for var in container.env.iter().flatten() {
        let Some(from) = &var.value_from else {
            continue;
        };
        if let Some(r) = &from.config_map_key_ref {
            config_maps.insert(r.name.clone());
        }
        if let Some(r) = &from.secret_key_ref {
            secrets.insert(r.name.clone());
        }
    }
    (config_maps, secrets)
}

/// Resolves the environment of `container`, in the kubelet's order.
pub fn resolve_env(
    sources: &EnvSources<'_>,
    container: &Container,
) -> Result<BTreeMap<String, String>, EnvError> {
    let mut env = sources.base.clone();
    for source in container.env_from.iter().flatten() {
        add_env_from(sources, source, &mut env)?;
    }
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (_, Some(from)) => match value_from(sources, container, &var.name, from)? {
                Some(value) => value,
                None => continue,
            },
            (Some(value), None) => expand(value, &env),
            (None, None) => String::new(),
        };
        env.insert(var.name.clone(), value);
    }
    Ok(env)
}

/// Adds every key of one `envFrom` ConfigMap or Secret, with its prefix.
fn add_env_from(
    sources: &EnvSources<'_>,
    source: &EnvFromSource,
    env: &mut BTreeMap<String, String>,
) -> Result<(), EnvError> {
    let prefix = source.prefix.as_deref().unwrap_or("");
    if let Some(r) = &source.config_map_ref {
        match sources.config_maps.get(&r.name) {
            Some(cm) => {
                for (k, v) in cm.data.iter().flatten() {
                    insert_if_valid(env, format!("{prefix}{k}"), v.clone());
                }
            }
            None if r.optional == Some(true) => {}
            None => {
                return Err(EnvError::ConfigMapNotFound {
                    name: r.name.clone(),
                });
            }
        }
    }
    if let Some(r) = &source.secret_ref {
        match sources.secrets.get(&r.name) {
            Some(secret) => {
                for (k, v) in secret.data.iter().flatten() {
                    let value = String::from_utf8_lossy(&v.0).into_owned();
                    insert_if_valid(env, format!("{prefix}{k}"), value);
                }
            }
            None if r.optional == Some(true) => {}
            None => {
                return Err(EnvError::SecretNotFound {
                    name: r.name.clone(),
                });
            }
        }
    }
    Ok(())
}

/// The value of the variable `var` from its `valueFrom`; `None` when an optional ConfigMap,
/// Secret or key is missing (the variable is left out).
fn value_from(
    sources: &EnvSources<'_>,
    container: &Container,
    var: &str,
    from: &EnvVarSource,
) -> Result<Option<String>, EnvError> {
    if let Some(r) = &from.config_map_key_ref {
        config_map_key(sources, r)
    } else if let Some(r) = &from.secret_key_ref {
        secret_key(sources, r)
    } else if let Some(r) = &from.field_ref {
        field_value(sources, var, &r.field_path).map(Some)
    } else if let Some(r) = &from.resource_field_ref {
        resource_value(sources, container, var, r).map(Some)
    } else {
        Ok(Some(String::new()))
    }
}

fn config_map_key(
    sources: &EnvSources<'_>,
    r: &ConfigMapKeySelector,
) -> Result<Option<String>, EnvError> {
    let optional = r.optional == Some(true);
    let Some(cm) = sources.config_maps.get(&r.name) else {
        if optional {
            return Ok(None);
        }
        return Err(EnvError::ConfigMapNotFound {
            name: r.name.clone(),
        });
    };
    match cm.data.as_ref().and_then(|d| d.get(&r.key)) {
        Some(v) => Ok(Some(v.clone())),
        None if optional => Ok(None),
        None => Err(EnvError::ConfigMapKeyNotFound {
            namespace: sources.pod.metadata.namespace.clone().unwrap_or_default(),
            name: r.name.clone(),
            key: r.key.clone(),
        }),
    }
}

fn secret_key(sources: &EnvSources<'_>, r: &SecretKeySelector) -> Result<Option<String>, EnvError> {
    let optional = r.optional == Some(true);
    let Some(secret) = sources.secrets.get(&r.name) else {
        if optional {
            return Ok(None);
        }
        return Err(EnvError::SecretNotFound {
            name: r.name.clone(),
        });
    };
    match secret.data.as_ref().and_then(|d| d.get(&r.key)) {
        Some(v) => Ok(Some(String::from_utf8_lossy(&v.0).into_owned())),
        None if optional => Ok(None),
        None => Err(EnvError::SecretKeyNotFound {
            namespace: sources.pod.metadata.namespace.clone().unwrap_or_default(),
            name: r.name.clone(),
            key: r.key.clone(),
        }),
    }
}

/// Keys that are not valid variable names are skipped, as the kubelet does (with an event).
fn insert_if_valid(env: &mut BTreeMap<String, String>, key: String, value: String) {
    let valid = !key.is_empty()
        && !key.starts_with(|c: char| c.is_ascii_digit())
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if valid {
        env.insert(key, value);
    }
}

fn field_value(sources: &EnvSources<'_>, var: &str, path: &str) -> Result<String, EnvError> {
    let meta = &sources.pod.metadata;
    let spec = sources.pod.spec.as_ref();
    let map_entry = |map: Option<&BTreeMap<String, String>>, prefix: &str| {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(map.and_then(|m| m.get(key)).cloned().unwrap_or_default())
    };
    let value = match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "metadata.labels" => format_map(meta.labels.as_ref()),
        "metadata.annotations" => format_map(meta.annotations.as_ref()),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.hostIP" | "status.hostIPs" => sources.host_ip.to_owned(),
        "status.podIP" | "status.podIPs" => sources.pod_ip.to_owned(),
        _ => map_entry(meta.labels.as_ref(), "metadata.labels['")
            .or_else(|| map_entry(meta.annotations.as_ref(), "metadata.annotations['"))
            .ok_or_else(|| EnvError::UnsupportedField {
                var: var.to_owned(),
                path: path.to_owned(),
            })?,
    };
    Ok(value)
}

/// `key="value"` lines, sorted, as the downward API formats whole maps.
pub fn format_map(map: Option<&BTreeMap<String, String>>) -> String {
    map.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn resource_value(
    sources: &EnvSources<'_>,
    container: &Container,
    var: &str,
    selector: &k8s_openapi::api::core::v1::ResourceFieldSelector,
) -> Result<String, EnvError> {
    let target = match &selector.container_name {
        Some(name) if !name.is_empty() && *name != container.name => sources
            .pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .find(|c| c.name == *name)
            .unwrap_or(container),
        _ => container,
    };
    let resources = target.resources.as_ref();
    let invalid = |reason: quantity::InvalidQuantity| EnvError::InvalidQuantity {
        var: var.to_owned(),
        reason: reason.to_string(),
    };
    let lookup = |limits: bool, name: &str| {
        let map = resources.and_then(|r| if limits { &r.limits } else { &r.requests }.as_ref());
        map.and_then(|m| m.get(name)).map(|q| q.0.clone())
    };
    let (is_cpu, raw) = match selector.resource.as_str() {
        "limits.cpu" => (true, lookup(true, "cpu")),
        "requests.cpu" => (true, lookup(false, "cpu").or_else(|| lookup(true, "cpu"))),
        "limits.memory" => (false, lookup(true, "memory")),
        "requests.memory" => (
            false,
            lookup(false, "memory").or_else(|| lookup(true, "memory")),
        ),
        other => {
            return Err(EnvError::UnsupportedResource {
                var: var.to_owned(),
                resource: other.to_owned(),
            });
        }
    };
    let divisor_text = selector.divisor.as_ref().map_or("1", |q| q.0.as_str());
    if is_cpu {
        let value = match raw {
            Some(q) => quantity::cpu_millis(&q).map_err(invalid)?,
            None => sources.allocatable_cpu_millis,
        };
        let divisor = quantity::cpu_millis(divisor_text).map_err(invalid)?.max(1);
        Ok(((value + divisor - 1) / divisor).to_string())
    } else {
        let value = match raw {
            Some(q) => quantity::units(&q).map_err(invalid)?,
            None => sources.allocatable_memory,
        };
        let divisor = quantity::units(divisor_text).map_err(invalid)?.max(1);
        Ok(((value + divisor - 1) / divisor).to_string())
    }
}

/// Kubernetes `$(VAR)` expansion: a defined variable is replaced, an undefined reference is kept
/// as written, `$$` is a literal `$`.
pub fn expand(input: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
        {
            let name = &inner[..end];
            match env.get(name) {
                Some(value) => out.push_str(value),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The command line: the pod's `command` replaces the image entrypoint and cmd; `args` replace
/// the image cmd; both are expanded against the final environment.
pub fn resolve_command(
    container: &Container,
    image_entrypoint: &[String],
    image_cmd: &[String],
    env: &BTreeMap<String, String>,
) -> Vec<String> {
    let command = container.command.as_deref().unwrap_or_default();
    let args = container.args.as_deref().unwrap_or_default();
    let argv: Vec<&String> = match (command.is_empty(), args.is_empty()) {
        (false, _) => command.iter().chain(args).collect(),
        (true, false) => image_entrypoint.iter().chain(args).collect(),
        (true, true) => image_entrypoint.iter().chain(image_cmd).collect(),
    };
    argv.into_iter().map(|a| expand(a, env)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1",
                          "labels": {"app": "x", "tier": "db"}, "annotations": {"note": "hi"}},
            "spec": {"nodeName": "node-1", "serviceAccountName": "sa",
                     "containers": [{"name": "c", "image": "i",
                                     "resources": {"limits": {"cpu": "1500m", "memory": "64Mi"}}}]}
        }))
        .unwrap()
    }

    fn container(value: serde_json::Value) -> Container {
        serde_json::from_value(value).unwrap()
    }

    fn resolve(c: &Container) -> Result<BTreeMap<String, String>, EnvError> {
        let pod = pod();
        let mut cms = BTreeMap::new();
        cms.insert(
            "cm".to_owned(),
            serde_json::from_value::<ConfigMap>(
                json!({"data": {"A": "from-cm", "B": "b", "bad key": "x"}}),
            )
            .unwrap(),
        );
        let mut secrets = BTreeMap::new();
        let mut data = BTreeMap::new();
        data.insert("S".to_owned(), ByteString(b"sekret".to_vec()));
        secrets.insert(
            "sec".to_owned(),
            Secret {
                data: Some(data),
                ..Secret::default()
            },
        );
        let mut base = BTreeMap::new();
        base.insert("PATH".to_owned(), "/bin".to_owned());
        let sources = EnvSources {
            pod: &pod,
            host_ip: "127.1.0.1",
            pod_ip: "127.2.0.5",
            config_maps: &cms,
            secrets: &secrets,
            base: &base,
            allocatable_cpu_millis: 8000,
            allocatable_memory: 1 << 34,
        };
        resolve_env(&sources, c)
    }

    #[test]
    fn resolves_values_in_order() {
        let c = container(json!({
            "name": "c",
            "resources": {"limits": {"cpu": "1500m", "memory": "64Mi"}},
            "envFrom": [{"configMapRef": {"name": "cm"}}, {"prefix": "X_", "secretRef": {"name": "sec"}}],
            "env": [
                {"name": "A", "value": "override $(B) $(NOPE) $$(B)"},
                {"name": "K", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "B"}}},
                {"name": "S", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "S"}}},
                {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "NOTE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['note']"}}},
                {"name": "LABELS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels"}}},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "SA", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
                {"name": "HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                {"name": "CPU_M", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}},
                {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
                {"name": "REQ_MEM", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory"}}},
                {"name": "P", "value": "$(PATH):/x"},
                {"name": "EMPTY"}
            ]
        }));
        let env = resolve(&c).unwrap();
        let expected: &[(&str, &str)] = &[
            ("A", "override b $(NOPE) $(B)"),
            ("B", "b"),
            ("X_S", "sekret"),
            ("K", "b"),
            ("S", "sekret"),
            ("NAME", "p"),
            ("NS", "ns"),
            ("UID", "u-1"),
            ("APP", "x"),
            ("NOTE", "hi"),
            ("LABELS", "app=\"x\"\ntier=\"db\""),
            ("NODE", "node-1"),
            ("SA", "sa"),
            ("HOST", "127.1.0.1"),
            ("IP", "127.2.0.5"),
            ("CPU", "2"),
            ("CPU_M", "1500"),
            ("MEM_MI", "64"),
            ("REQ_MEM", "67108864"),
            ("P", "/bin:/x"),
            ("EMPTY", ""),
        ];
        for (k, v) in expected {
            assert_eq!(env.get(*k).map(String::as_str), Some(*v), "{k}");
        }
        assert!(!env.contains_key("bad key"));
    }

    #[test]
    fn reports_missing_references() {
        let cases = [
            (
                json!({"name": "c", "env": [{"name": "V", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "k"}}}]}),
                Some(EnvError::ConfigMapNotFound {
                    name: "gone".into(),
                }),
            ),
            (
                json!({"name": "c", "env": [{"name": "V", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}]}),
                Some(EnvError::ConfigMapKeyNotFound {
                    namespace: "ns".into(),
                    name: "cm".into(),
                    key: "k".into(),
                }),
            ),
            (
                json!({"name": "c", "env": [{"name": "V", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k"}}}]}),
                Some(EnvError::SecretNotFound {
                    name: "gone".into(),
                }),
            ),
            (
                json!({"name": "c", "env": [{"name": "V", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "k"}}}]}),
                Some(EnvError::SecretKeyNotFound {
                    namespace: "ns".into(),
                    name: "sec".into(),
                    key: "k".into(),
                }),
            ),
            (
                json!({"name": "c", "env": [{"name": "V", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "k", "optional": true}}}]}),
                None,
            ),
            (
                json!({"name": "c", "envFrom": [{"configMapRef": {"name": "gone"}}]}),
                Some(EnvError::ConfigMapNotFound {
                    name: "gone".into(),
                }),
            ),
            (
                json!({"name": "c", "envFrom": [{"secretRef": {"name": "gone", "optional": true}}]}),
                None,
            ),
            (
                json!({"name": "c", "env": [{"name": "V", "valueFrom": {"fieldRef": {"fieldPath": "spec.bogus"}}}]}),
                Some(EnvError::UnsupportedField {
                    var: "V".into(),
                    path: "spec.bogus".into(),
                }),
            ),
        ];
        for (c, expected) in cases {
            let result = resolve(&container(c.clone()));
            assert_eq!(result.err(), expected, "{c}");
        }
    }

    #[test]
    fn expands_like_kubernetes() {
        let env: BTreeMap<String, String> = [
            ("A".to_owned(), "1".to_owned()),
            ("B".to_owned(), "".to_owned()),
        ]
        .into();
        let cases = [
            ("$(A)", "1"),
            ("x$(A)y$(B)z", "x1yz"),
            ("$(C)", "$(C)"),
            ("$$(A)", "$(A)"),
            ("$$", "$"),
            ("$A", "$A"),
            ("$(A", "$(A"),
            ("end$", "end$"),
            ("", ""),
        ];
        for (input, expected) in cases {
            assert_eq!(expand(input, &env), expected, "{input}");
        }
    }

    #[test]
    fn resolves_commands() {
        let env: BTreeMap<String, String> = [("X".to_owned(), "x".to_owned())].into();
        let entry = vec!["/entry".to_owned()];
        let cmd = vec!["default".to_owned()];
        let cases = [
            (json!({"name": "c"}), vec!["/entry", "default"]),
            (
                json!({"name": "c", "args": ["a", "$(X)"]}),
                vec!["/entry", "a", "x"],
            ),
            (
                json!({"name": "c", "command": ["sh", "-c"]}),
                vec!["sh", "-c"],
            ),
            (
                json!({"name": "c", "command": ["sh"], "args": ["$(X)"]}),
                vec!["sh", "x"],
            ),
        ];
        for (c, expected) in cases {
            assert_eq!(
                resolve_command(&container(c.clone()), &entry, &cmd, &env),
                expected,
                "{c}"
            );
        }
    }
}
