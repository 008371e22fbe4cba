//! Skyhook API: the `skyhook.nvidia.com/v1alpha1` types and every pure rule shared by the
//! controller, the webhook, the agent and the kubectl plugin. Nothing in this crate performs I/O.
pub mod budget;
pub mod conditions;
pub mod crd;
pub mod deletion;
pub mod drain;
pub mod duration;
pub mod glob;
pub mod graph;
pub mod health;
pub mod image;
pub mod interrupt;
pub mod interrupt_payload;
pub mod keys;
pub mod names;
pub mod node_mirror;
pub mod node_state;
pub mod ordering;
pub mod pod_annotation;
pub mod pod_owner;
pub mod resources;
pub mod rollout;
pub mod runtime_required;
pub mod selector;
pub mod stage;
pub mod stage_timeout;
pub mod status;
pub mod string_map;
#[cfg(test)]
mod test_support;
pub mod toleration;
pub mod transition;
pub mod uninstall;
pub mod uninstall_rules;
pub mod v1alpha1;
pub mod validate;
pub mod version;
pub mod window;
