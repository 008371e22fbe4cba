//! Skyhook API: the `skyhook.nvidia.com/v1alpha1` types and every pure rule shared by the
//! controller, the webhook, the agent and the kubectl plugin. Nothing in this crate performs I/O.
