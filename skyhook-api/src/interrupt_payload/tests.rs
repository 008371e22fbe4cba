use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};

use super::*;
use AgentInterruptType::*;

fn payload(type_: AgentInterruptType, services: &[&str]) -> InterruptPayload {
    InterruptPayload {
        type_,
        services: services.iter().map(|s| (*s).to_owned()).collect(),
    }
}

fn interrupt(type_: InterruptType, services: &[&str]) -> Interrupt {
    Interrupt {
        type_,
        services: services.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// The arguments upstream's operator writes (the literal strings of its pods), for the Skyhook
/// interrupts that produce them.
#[test]
fn encodes_as_upstream_operator() {
    let cases = [
        (
            interrupt(InterruptType::Reboot, &[]),
            // {"type":"node_restart"}
            "eyJ0eXBlIjoibm9kZV9yZXN0YXJ0In0=",
        ),
        (
            interrupt(InterruptType::Service, &["containerd", "cron", "foobar"]),
            // {"type":"service_restart","services":["containerd","cron","foobar"]}
            "eyJ0eXBlIjoic2VydmljZV9yZXN0YXJ0Iiwic2VydmljZXMiOlsiY29udGFpbmVyZCIsImNyb24iLCJmb29iYXIiXX0=",
        ),
        (
            interrupt(InterruptType::Noop, &[]),
            // {"type":"no_op"}
            "eyJ0eXBlIjoibm9fb3AifQ==",
        ),
        (
            interrupt(InterruptType::RestartAllServices, &[]),
            // {"type":"restart_all_services"}
            "eyJ0eXBlIjoicmVzdGFydF9hbGxfc2VydmljZXMifQ==",
        ),
        (
            interrupt(InterruptType::Service, &[]),
            // {"type":"service_restart"}: Go omits an empty list.
            "eyJ0eXBlIjoic2VydmljZV9yZXN0YXJ0In0=",
        ),
        (
            interrupt(InterruptType::Reboot, &["kubelet"]),
            // {"type":"node_restart","services":["kubelet"]}: Go keeps services of any type.
            "eyJ0eXBlIjoibm9kZV9yZXN0YXJ0Iiwic2VydmljZXMiOlsia3ViZWxldCJdfQ==",
        ),
        (
            interrupt(InterruptType::Service, &["a&b"]),
            // {"type":"service_restart","services":["a\u0026b"]}: Go escapes HTML characters.
            "eyJ0eXBlIjoic2VydmljZV9yZXN0YXJ0Iiwic2VydmljZXMiOlsiYVx1MDAyNmIiXX0=",
        ),
    ];
    for (interrupt, argument) in cases {
        assert_eq!(
            InterruptPayload::from(&interrupt).encode(),
            argument,
            "{interrupt:?}"
        );
    }
}

/// Arguments as upstream's operator and agent write them, and as a person may type them.
#[test]
fn decodes_upstream_arguments() {
    let cases = [
        // The operator's, for the interrupt e2e test.
        (
            "eyJ0eXBlIjoibm9kZV9yZXN0YXJ0In0=",
            payload(NodeRestart, &[]),
        ),
        // The operator's, for the interrupt-grouping e2e test.
        (
            "eyJ0eXBlIjoic2VydmljZV9yZXN0YXJ0Iiwic2VydmljZXMiOlsiY29udGFpbmVyZCIsImNyb24iLCJmb29iYXIiXX0=",
            payload(ServiceRestart, &["containerd", "cron", "foobar"]),
        ),
        // Upstream agent's own example input (Python json.dumps, spaces after separators).
        (
            "eyJ0eXBlIjogInNlcnZpY2VfcmVzdGFydCIsICJzZXJ2aWNlcyI6IFsiY29udGFpbmVyZCJdfQ==",
            payload(ServiceRestart, &["containerd"]),
        ),
        (
            "eyJ0eXBlIjogInNjcmlwdF9pbnRlcnJ1cHQifQ==",
            payload(ScriptInterrupt, &[]),
        ),
        // Padding dropped, and surrounding whitespace.
        ("eyJ0eXBlIjoibm9fb3AifQ", payload(NoOp, &[])),
        (" eyJ0eXBlIjoibm9fb3AifQ==\n", payload(NoOp, &[])),
        // Services of a type that restarts none.
        (
            "eyJ0eXBlIjoibm9kZV9yZXN0YXJ0Iiwic2VydmljZXMiOlsia3ViZWxldCJdfQ==",
            payload(NodeRestart, &["kubelet"]),
        ),
        // Go's escapes.
        (
            "eyJ0eXBlIjoic2VydmljZV9yZXN0YXJ0Iiwic2VydmljZXMiOlsiYVx1MDAyNmIiXX0=",
            payload(ServiceRestart, &["a&b"]),
        ),
    ];
    for (argument, expected) in cases {
        assert_eq!(
            InterruptPayload::decode(argument),
            Ok(expected),
            "{argument:?}"
        );
    }
}

#[test]
fn round_trips_every_runnable_payload() {
    for &type_ in AgentInterruptType::ALL {
        for services in [&[][..], &["containerd"][..], &["containerd", "kubelet"][..]] {
            let original = payload(type_, services);
            let decoded = InterruptPayload::decode(&original.encode());
            if type_ == ServiceRestart && services.is_empty() {
                // The encoding omits the empty list, and the agent needs one to know what to
                // restart.
                assert_eq!(decoded, Err(InterruptPayloadError::Services));
            } else {
                assert_eq!(decoded, Ok(original), "{type_} {services:?}");
            }
        }
    }
}

#[test]
fn malformed_arguments_are_rejected() {
    let encode = |json: &str| STANDARD.encode(json);
    let cases = [
        ("%%%".to_owned(), InterruptPayloadError::Encoding),
        (String::new(), InterruptPayloadError::Encoding),
        // {"type":"no_op"} cut off mid-quantum.
        (
            "eyJ0eXBlIjoibm9fb3AifQ=x".to_owned(),
            InterruptPayloadError::Encoding,
        ),
        (encode("not json"), InterruptPayloadError::Encoding),
        (encode("[1]"), InterruptPayloadError::Encoding),
        (encode("{}"), InterruptPayloadError::Encoding),
        (encode(r#"{"type": 1}"#), InterruptPayloadError::Encoding),
        // The Skyhook spelling is not the agent's.
        (
            encode(r#"{"type": "reboot"}"#),
            InterruptPayloadError::UnknownType("reboot".into()),
        ),
        (
            encode(r#"{"type": "service_restart"}"#),
            InterruptPayloadError::Services,
        ),
        (
            encode(r#"{"type": "service_restart", "services": "cron"}"#),
            InterruptPayloadError::Services,
        ),
        (
            encode(r#"{"type": "service_restart", "services": ["cron", 1]}"#),
            InterruptPayloadError::Services,
        ),
        (
            STANDARD_NO_PAD.encode(r#"{"type": "service_restart", "services": null}"#),
            InterruptPayloadError::Services,
        ),
    ];
    for (argument, expected) in cases {
        assert_eq!(
            InterruptPayload::decode(&argument),
            Err(expected),
            "{argument:?}"
        );
    }
}

#[test]
fn malformed_services_of_other_types_are_ignored() {
    let argument = STANDARD.encode(r#"{"type": "node_restart", "services": 5}"#);
    assert_eq!(
        InterruptPayload::decode(&argument),
        Ok(payload(NodeRestart, &[]))
    );
}

#[test]
fn errors_say_what_to_pass() {
    let cases = [
        (
            InterruptPayloadError::Encoding,
            r#"pass base64 of e.g. {"type": "service_restart", "services": ["containerd"]}"#,
        ),
        (
            InterruptPayloadError::UnknownType("reboot".into()),
            r#"unknown interrupt type "reboot"; use one of node_restart, service_restart, restart_all_services, no_op, script_interrupt"#,
        ),
        (
            InterruptPayloadError::Services,
            r#"service_restart needs "services": a list of unit names"#,
        ),
    ];
    for (error, expected) in cases {
        let message = error.to_string();
        assert!(message.contains(expected), "{message}");
    }
}
