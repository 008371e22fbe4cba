//! The runtime-required taint as configured by `RUNTIME_REQUIRED_TAINT`, in `kubectl taint`
//! syntax: `key=value:Effect` or `key:Effect`.
//!
//! Contract: [`TaintSpec::parse`] accepts what `kubectl taint` accepts for *adding* a taint
//! (a qualified-name key, an optional label-value value, one of the three effects) and rejects
//! removals (`key-`, `key:Effect-`) and taints without an effect, because the controller must be
//! able to add the taint to new nodes (auto-taint) and remove exactly that taint later. Package and
//! interrupt pods always carry [`TaintSpec::toleration`]; [`TaintSpec::matches`] is the exact
//! key/value/effect comparison used when removing it.

use std::fmt;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use skyhook_api::selector::{validate_label_key, validate_label_value};

/// Why a taint string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaintError {
    /// `key-` or `key:Effect-`: the syntax kubectl uses to remove a taint.
    #[error(
        "{0:?} is a taint removal (it ends with '-'); give the taint to add, e.g. key=value:NoSchedule"
    )]
    Removal(String),
    /// No `:Effect` part.
    #[error(
        "{0:?} has no effect; write key=value:Effect with Effect NoSchedule, PreferNoSchedule or NoExecute"
    )]
    MissingEffect(String),
    /// An effect other than the three Kubernetes knows.
    #[error(
        "{input:?} has the unknown effect {effect:?}; use NoSchedule, PreferNoSchedule or NoExecute"
    )]
    UnknownEffect {
        /// The whole taint string.
        input: String,
        /// The rejected effect.
        effect: String,
    },
    /// More than one `:` or `=`.
    #[error("{0:?} is not of the form key=value:Effect or key:Effect")]
    Malformed(String),
    /// A key that is not a Kubernetes qualified name.
    #[error(
        "{input:?} has the invalid key {key:?}; a key is an optional DNS-subdomain prefix and '/', then 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
    )]
    InvalidKey {
        /// The whole taint string.
        input: String,
        /// The rejected key.
        key: String,
    },
    /// A value that is not a Kubernetes label value.
    #[error(
        "{input:?} has the invalid value {value:?}; a value is at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
    )]
    InvalidValue {
        /// The whole taint string.
        input: String,
        /// The rejected value.
        value: String,
    },
}

/// The effect of a taint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaintEffect {
    /// New pods that do not tolerate the taint are not scheduled.
    NoSchedule,
    /// The scheduler avoids the node for pods that do not tolerate the taint.
    PreferNoSchedule,
    /// Running pods that do not tolerate the taint are evicted.
    NoExecute,
}

impl TaintEffect {
    /// The spelling in the Kubernetes API.
    pub const fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// A taint to add to nodes and tolerate in the controller's pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaintSpec {
    /// The taint key, e.g. `skyhook.nvidia.com`.
    pub key: String,
    /// The taint value; empty for `key:Effect`.
    pub value: String,
    /// The taint effect.
    pub effect: TaintEffect,
}

impl TaintSpec {
    /// Parses `key=value:Effect` or `key:Effect`. See the module documentation.
    pub fn parse(input: &str) -> Result<Self, TaintError> {
        if input.ends_with('-') {
            return Err(TaintError::Removal(input.to_owned()));
        }
        let (key_value, effect) = match input.split(':').collect::<Vec<_>>().as_slice() {
            [_] => return Err(TaintError::MissingEffect(input.to_owned())),
            [key_value, effect] => (*key_value, *effect),
            _ => return Err(TaintError::Malformed(input.to_owned())),
        };
        let effect = match effect {
            "NoSchedule" => TaintEffect::NoSchedule,
            "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
            "NoExecute" => TaintEffect::NoExecute,
            "" => return Err(TaintError::MissingEffect(input.to_owned())),
            other => {
                return Err(TaintError::UnknownEffect {
                    input: input.to_owned(),
                    effect: other.to_owned(),
                });
            }
        };
        let (key, value) = match key_value.split('=').collect::<Vec<_>>().as_slice() {
            [key] => (*key, ""),
            [key, value] => (*key, *value),
            _ => return Err(TaintError::Malformed(input.to_owned())),
        };
        if validate_label_key(key).is_err() {
            return Err(TaintError::InvalidKey {
                input: input.to_owned(),
                key: key.to_owned(),
            });
        }
        if validate_label_value(value).is_err() {
            return Err(TaintError::InvalidValue {
                input: input.to_owned(),
                value: value.to_owned(),
            });
        }
        Ok(TaintSpec {
            key: key.to_owned(),
            value: value.to_owned(),
            effect,
        })
    }

    /// The taint, to add to a node.
    pub fn to_taint(&self) -> Taint {
        Taint {
            key: self.key.clone(),
            value: Some(self.value.clone()).filter(|value| !value.is_empty()),
            effect: self.effect.as_str().to_owned(),
            time_added: None,
        }
    }

    /// The toleration every package and interrupt pod carries: `Equal` on key, value and effect.
    pub fn toleration(&self) -> Toleration {
        Toleration {
            key: Some(self.key.clone()),
            operator: Some("Equal".to_owned()),
            value: Some(self.value.clone()),
            effect: Some(self.effect.as_str().to_owned()),
            toleration_seconds: None,
        }
    }

    /// Whether `taint` is exactly this taint (key, value and effect).
    pub fn matches(&self, taint: &Taint) -> bool {
        taint.key == self.key
            && taint.value.as_deref().unwrap_or_default() == self.value
            && taint.effect == self.effect.as_str()
    }
}

impl fmt::Display for TaintSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect.as_str())
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect.as_str())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_taints() {
        let cases = [
            (
                "skyhook.nvidia.com=runtime-required:NoSchedule",
                "skyhook.nvidia.com",
                "runtime-required",
                TaintEffect::NoSchedule,
            ),
            (
                "dedicated:NoExecute",
                "dedicated",
                "",
                TaintEffect::NoExecute,
            ),
            (
                "example.com/gpu=true:PreferNoSchedule",
                "example.com/gpu",
                "true",
                TaintEffect::PreferNoSchedule,
            ),
            ("k=:NoSchedule", "k", "", TaintEffect::NoSchedule),
        ];
        for (input, key, value, effect) in cases {
            let spec = TaintSpec::parse(input).unwrap();
            assert_eq!(
                spec,
                TaintSpec {
                    key: key.into(),
                    value: value.into(),
                    effect
                },
                "{input}"
            );
            if !input.contains("=:") {
                assert_eq!(spec.to_string(), input, "display round trip");
            }
        }
    }

    #[test]
    fn rejects_bad_taints() {
        let cases = [
            (
                "skyhook.nvidia.com-",
                TaintError::Removal("skyhook.nvidia.com-".into()),
            ),
            (
                "k=v:NoSchedule-",
                TaintError::Removal("k=v:NoSchedule-".into()),
            ),
            ("k=v", TaintError::MissingEffect("k=v".into())),
            ("k=v:", TaintError::MissingEffect("k=v:".into())),
            (
                "k=v:Sometimes",
                TaintError::UnknownEffect {
                    input: "k=v:Sometimes".into(),
                    effect: "Sometimes".into(),
                },
            ),
            (
                "a:b:NoSchedule",
                TaintError::Malformed("a:b:NoSchedule".into()),
            ),
            (
                "a=b=c:NoSchedule",
                TaintError::Malformed("a=b=c:NoSchedule".into()),
            ),
            (
                "=v:NoSchedule",
                TaintError::InvalidKey {
                    input: "=v:NoSchedule".into(),
                    key: String::new(),
                },
            ),
            (
                "Bad_Prefix/k=v:NoSchedule",
                TaintError::InvalidKey {
                    input: "Bad_Prefix/k=v:NoSchedule".into(),
                    key: "Bad_Prefix/k".into(),
                },
            ),
            (
                "k=v w:NoSchedule",
                TaintError::InvalidValue {
                    input: "k=v w:NoSchedule".into(),
                    value: "v w".into(),
                },
            ),
        ];
        for (input, want) in cases {
            assert_eq!(TaintSpec::parse(input), Err(want), "{input}");
        }
    }

    #[test]
    fn toleration_and_matching() {
        let spec = TaintSpec::parse("skyhook.nvidia.com=runtime-required:NoSchedule").unwrap();
        let toleration = spec.toleration();
        assert_eq!(toleration.operator.as_deref(), Some("Equal"));
        assert_eq!(toleration.key.as_deref(), Some("skyhook.nvidia.com"));
        assert_eq!(toleration.value.as_deref(), Some("runtime-required"));
        assert_eq!(toleration.effect.as_deref(), Some("NoSchedule"));

        let taint = spec.to_taint();
        assert!(spec.matches(&taint));
        let other_effect = Taint {
            effect: "NoExecute".into(),
            ..taint.clone()
        };
        let other_value = Taint {
            value: Some("other".into()),
            ..taint.clone()
        };
        assert!(!spec.matches(&other_effect));
        assert!(!spec.matches(&other_value));

        let no_value = TaintSpec::parse("dedicated:NoSchedule").unwrap();
        assert_eq!(no_value.to_taint().value, None);
        assert!(no_value.matches(&Taint {
            key: "dedicated".into(),
            value: Some(String::new()),
            effect: "NoSchedule".into(),
            time_added: None,
        }));
    }
}
