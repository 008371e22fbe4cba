//! The interrupt payload: how the controller tells the agent which interrupt to run.
//!
//! The fourth argument of an interrupt pod's `interrupt` container is standard base64 of compact
//! JSON `{"type": <agent type>, "services": [...]}`, written as upstream's operator writes it (Go
//! `encoding/json`, `services` omitted when empty) and read as upstream's agent reads it.
//! [`InterruptPayload`] is the one codec both binaries use.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde::Serialize;
use serde_json::Value;

use crate::node_state::go_json;
use crate::v1alpha1::{Interrupt, InterruptType, wire_enum};

/// The interrupt types the agent knows, by the names the payload carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AgentInterruptType {
    /// Reboot the node (`reboot` in a Skyhook).
    NodeRestart,
    /// Restart the listed systemd units (`service` in a Skyhook).
    ServiceRestart,
    /// Reload sysctl settings, despite the name (`restartAllServices` in a Skyhook).
    RestartAllServices,
    /// Record that the interrupt ran (`noop` in a Skyhook).
    NoOp,
    /// Nothing: the package's own scripts interrupt. No Skyhook type maps to it; upstream's agent
    /// accepts it, so ours does too.
    ScriptInterrupt,
}

wire_enum!(AgentInterruptType, "agent interrupt type", {
    NodeRestart => "node_restart",
    ServiceRestart => "service_restart",
    RestartAllServices => "restart_all_services",
    NoOp => "no_op",
    ScriptInterrupt => "script_interrupt",
});

impl From<InterruptType> for AgentInterruptType {
    fn from(type_: InterruptType) -> Self {
        match type_ {
            InterruptType::Reboot => AgentInterruptType::NodeRestart,
            InterruptType::Service => AgentInterruptType::ServiceRestart,
            InterruptType::Noop => AgentInterruptType::NoOp,
            InterruptType::RestartAllServices => AgentInterruptType::RestartAllServices,
        }
    }
}

/// The interrupt an interrupt pod hands to the agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterruptPayload {
    /// What to do.
    pub type_: AgentInterruptType,
    /// The systemd units to restart. Only `service_restart` uses them, but upstream's operator
    /// writes them for any type whose Skyhook interrupt lists some, so they travel with any type.
    pub services: Vec<String>,
}

/// A payload the agent cannot act on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InterruptPayloadError {
    /// Not base64, not JSON, or no string `type`.
    #[error(
        "interrupt data is not base64 of a JSON object with a \"type\"; pass base64 of e.g. {{\"type\": \"service_restart\", \"services\": [\"containerd\"]}}"
    )]
    Encoding,
    /// A `type` the agent does not know.
    #[error("unknown interrupt type {0:?}; use one of {list}", list = type_list())]
    UnknownType(String),
    /// `service_restart` without a list of unit names.
    #[error(
        "service_restart needs \"services\": a list of unit names, e.g. {{\"type\": \"service_restart\", \"services\": [\"containerd\"]}}"
    )]
    Services,
}

fn type_list() -> String {
    AgentInterruptType::ALL
        .iter()
        .map(|type_| type_.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The JSON inside the base64, fields in upstream's order.
#[derive(Serialize)]
struct Wire<'a> {
    #[serde(rename = "type")]
    type_: &'static str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    services: &'a [String],
}

impl From<AgentInterruptType> for InterruptPayload {
    fn from(type_: AgentInterruptType) -> Self {
        InterruptPayload {
            type_,
            services: Vec::new(),
        }
    }
}

impl From<&Interrupt> for InterruptPayload {
    /// The payload of a Skyhook interrupt: its type renamed for the agent, its services kept.
    fn from(interrupt: &Interrupt) -> Self {
        InterruptPayload {
            type_: interrupt.type_.into(),
            services: interrupt.services.clone(),
        }
    }
}

impl InterruptPayload {
    /// The pod argument, byte for byte as upstream's operator writes it.
    ///
    /// A `service_restart` without services encodes with no `services` key, which [`decode`]
    /// rejects, as upstream's agent does: such a Skyhook interrupt cannot run.
    ///
    /// [`decode`]: InterruptPayload::decode
    pub fn encode(&self) -> String {
        let wire = Wire {
            type_: self.type_.as_str(),
            services: &self.services,
        };
        STANDARD.encode(go_json(&wire))
    }

    /// Reads a pod argument. Surrounding whitespace is ignored and the base64 padding may be
    /// present or not: the argument may be typed by hand, and accepting more than the operator
    /// writes costs nothing. `services` must be a list of unit names for `service_restart`; other
    /// types keep such a list and ignore anything else there, as they restart no service.
    pub fn decode(argument: &str) -> Result<Self, InterruptPayloadError> {
        let lenient = GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
        );
        let json = lenient
            .decode(argument.trim())
            .map_err(|_| InterruptPayloadError::Encoding)?;
        let value: Value =
            serde_json::from_slice(&json).map_err(|_| InterruptPayloadError::Encoding)?;
        let name = value
            .get("type")
            .and_then(Value::as_str)
            .ok_or(InterruptPayloadError::Encoding)?;
        let type_: AgentInterruptType = name
            .parse()
            .map_err(|_| InterruptPayloadError::UnknownType(name.to_owned()))?;
        let services = value.get("services").and_then(unit_names);
        match (type_, services) {
            (AgentInterruptType::ServiceRestart, None) => Err(InterruptPayloadError::Services),
            (type_, services) => Ok(InterruptPayload {
                type_,
                services: services.unwrap_or_default(),
            }),
        }
    }
}

/// `value` as a list of strings, if it is one.
fn unit_names(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|name| name.as_str().map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests;
