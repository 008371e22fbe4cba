//! How every binary writes an error for a log line or a report: the error and its causes.

/// `error` and its sources on one line (`outer: cause: root cause`), so that a log or a report
/// says where something broke, not only that it did.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        line.push_str(": ");
        line.push_str(&cause.to_string());
        source = cause.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("failed to read the policy")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn the_chain_names_every_cause_in_order() {
        let error = Outer(std::io::Error::other("disk gone"));
        assert_eq!(error_chain(&error), "failed to read the policy: disk gone");
        assert_eq!(error_chain(&std::io::Error::other("alone")), "alone");
    }
}
