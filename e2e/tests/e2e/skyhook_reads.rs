//! Reading a Skyhook's status in the tests that watch a rollout being held (maintenance
//! windows, the health gate).

use skyhook_api::v1alpha1::Skyhook;

/// The message of the Skyhook's condition `type_` while it is `True`.
pub(crate) fn true_condition_message(skyhook: &Skyhook, type_: &str) -> Option<String> {
    skyhook
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .find(|c| c.type_ == type_ && c.status == "True")
        .map(|c| c.message.clone())
}

/// The Skyhook's `status.nodeStatus` of `node`.
pub(crate) fn status_of_node<'a>(skyhook: &'a Skyhook, node: &str) -> Option<&'a str> {
    skyhook
        .status
        .as_ref()?
        .node_status
        .get(node)
        .map(|s| s.as_str())
}
