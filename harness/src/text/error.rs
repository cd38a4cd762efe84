//! How an error reads: its context chain, each cause once.
use std::fmt::Write;

/// `outer: cause: root cause`, like anyhow's `{:#}`, but a cause whose text the message so far
/// already holds is left out: an error type that prints its source inside its own message
/// (`"{path}: {source}"`) would otherwise repeat it ("No such file: No such file").
pub fn chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.is_empty() {
            out = text;
        } else if !out.contains(&text) {
            let _ = write!(out, ": {text}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("reading x: {source}")]
    struct Doubled {
        source: std::io::Error,
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = anyhow::Error::new(Doubled { source: io }).context("opening the series");
        let text = chain(&e);
        assert_eq!(text.matches("entity not found").count(), 1, "{text}");
        assert!(text.starts_with("opening the series: reading x: "), "{text}");
    }
}
