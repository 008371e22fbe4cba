//! Upstream's `agentless` e2e test image, played by the simulated kubelet: it sleeps `SLEEP_LEN`
//! seconds and exits `EXIT_CODE`. A container with a `command` (the package copy step) runs that
//! command as a process on full nodes.

use std::collections::BTreeMap;
use std::time::Duration;

use devcluster::images::{Played, PlayedProgram};
use k8s_openapi::api::core::v1::Container;

/// The `agentless` program of Skyhook's image map.
#[derive(Debug, Clone, Copy, Default)]
pub struct Agentless;

impl PlayedProgram for Agentless {
    fn runs_process(&self, container: &Container) -> bool {
        has_command(container)
    }

    fn play(
        &self,
        argv: &[String],
        container: &Container,
        env: &BTreeMap<String, String>,
        light: bool,
    ) -> Played {
        play(argv, container, env, light, default_sleep())
    }
}

fn has_command(container: &Container) -> bool {
    container.command.as_ref().is_some_and(|c| !c.is_empty())
}

/// How long upstream's agentless image sleeps when `SLEEP_LEN` is unset or empty: a random
/// whole number of seconds from 5 to 9 (`$((RANDOM % 5 + 5))`), so that the intermediate
/// states of a rollout can be observed.
fn default_sleep() -> Duration {
    use std::hash::BuildHasher as _;
    // RandomState is seeded randomly: enough randomness for a test image, without a new crate.
    let pick = std::hash::RandomState::new().hash_one(std::time::SystemTime::now()) % 5;
    Duration::from_secs(5 + pick)
}

/// `default_sleep` is how long agentless sleeps when `SLEEP_LEN` is unset or empty, as the
/// image's script does; a command that replaces the script (the package copy step, skipped on
/// light nodes) is no script and sleeps only for an explicit `SLEEP_LEN`.
fn play(
    argv: &[String],
    container: &Container,
    env: &BTreeMap<String, String>,
    light: bool,
    default_sleep: Duration,
) -> Played {
    let skipped = light && has_command(container);
    let default_sleep = if skipped {
        Duration::ZERO
    } else {
        default_sleep
    };
    let default_sleep = default_sleep.as_secs().to_string();
    let sleep_len = env
        .get("SLEEP_LEN")
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(&default_sleep);
    let exit_code = env.get("EXIT_CODE").map_or("0", String::as_str);
    let banner = if skipped {
        format!(
            "agentless on a light node: command {argv:?} not run; sleep for {sleep_len} and exit with {exit_code}"
        )
    } else {
        format!(
            "agentless [{}] sleep for {sleep_len} and exit with {exit_code}",
            argv.join(" ")
        )
    };
    Played {
        banner,
        sleep: sleep_len
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map_or(Duration::ZERO, Duration::from_secs_f64),
        // `exit N` in a shell: modulo 256; not a number is the shell's error, 2.
        exit_code: exit_code
            .trim()
            .parse::<i64>()
            .map_or(2, |c| i32::try_from(c.rem_euclid(256)).unwrap_or(2)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sleep_and_exit_code() {
        let script: Container = serde_json::from_value(serde_json::json!({"name": "c"})).unwrap();
        let copy: Container =
            serde_json::from_value(serde_json::json!({"name": "c", "command": ["/bin/sh"]}))
                .unwrap();
        let default = Duration::from_secs(7);
        // (container, light node, SLEEP_LEN, EXIT_CODE) → (sleep, exit code)
        type Case<'a> = (
            &'a Container,
            bool,
            Option<&'a str>,
            Option<&'a str>,
            Duration,
            i32,
        );
        let cases: &[Case<'_>] = &[
            // Unset or empty: upstream's script sleeps its random default.
            (&script, false, None, None, default, 0),
            (&script, true, None, None, default, 0),
            (&script, false, Some(""), None, default, 0),
            (&script, false, Some("0"), None, Duration::ZERO, 0),
            (
                &script,
                false,
                Some("2"),
                Some("3"),
                Duration::from_secs(2),
                3,
            ),
            (
                &script,
                false,
                Some("0.5"),
                Some("256"),
                Duration::from_millis(500),
                0,
            ),
            (&script, false, Some("x"), Some("-1"), Duration::ZERO, 255),
            (
                &script,
                false,
                Some("1"),
                Some("oops"),
                Duration::from_secs(1),
                2,
            ),
            // A command replaces the script: on a light node it is skipped and only an explicit
            // SLEEP_LEN makes it wait.
            (&copy, true, None, None, Duration::ZERO, 0),
            (&copy, true, Some("2"), None, Duration::from_secs(2), 0),
        ];
        for (container, light, sleep, code, expected_sleep, expected_code) in cases {
            let mut env = BTreeMap::new();
            if let Some(s) = sleep {
                env.insert("SLEEP_LEN".to_owned(), (*s).to_owned());
            }
            if let Some(c) = code {
                env.insert("EXIT_CODE".to_owned(), (*c).to_owned());
            }
            let played = play(
                &["apply".into(), "/root".into()],
                container,
                &env,
                *light,
                default,
            );
            assert_eq!(
                (played.sleep, played.exit_code),
                (*expected_sleep, *expected_code),
                "light {light}, SLEEP_LEN {sleep:?}, EXIT_CODE {code:?}"
            );
            assert!(played.banner.contains("sleep for "), "{}", played.banner);
        }
    }

    #[test]
    fn default_sleep_is_five_to_nine_seconds() {
        for _ in 0..50 {
            let sleep = default_sleep();
            assert!(
                (Duration::from_secs(5)..=Duration::from_secs(9)).contains(&sleep),
                "{sleep:?}"
            );
        }
    }

    #[test]
    fn only_the_copy_step_runs_as_a_process() {
        let container = |command: serde_json::Value| -> Container {
            serde_json::from_value(serde_json::json!({"name": "c", "command": command})).unwrap()
        };
        assert!(Agentless.runs_process(&container(serde_json::json!(["cp", "-r"]))));
        assert!(!Agentless.runs_process(&container(serde_json::Value::Null)));
        assert!(!Agentless.runs_process(&container(serde_json::json!([]))));
    }
}
