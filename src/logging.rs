//! Diagnostics go through `tracing` to stderr (`RECORDS_LOG=debug` shows more); the log lines
//! of a run are the trainer's product and stay on stdout.
use tracing_subscriber::EnvFilter;

/// Installs the stderr subscriber: messages as written (they name their source), filtered by
/// `RECORDS_LOG` (default `info`).
pub fn init() {
    let filter = EnvFilter::try_from_env("RECORDS_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .with_target(false)
        .with_level(false)
        .try_init();
}
