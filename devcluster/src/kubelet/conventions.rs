//! What every part of the simulated kubelet agrees on: the PATH of containers and node commands,
//! and the resolution of the times it reports.

use jiff::Timestamp;

/// PATH in containers and node commands.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Now, in whole seconds (the API's time resolution), so reported times are stable.
pub(crate) fn now() -> Timestamp {
    let now = Timestamp::now();
    Timestamp::from_second(now.as_second()).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_has_whole_seconds() {
        assert_eq!(now().subsec_nanosecond(), 0);
    }
}
