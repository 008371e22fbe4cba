//! skyhook-agent: runs package stages on the host.
