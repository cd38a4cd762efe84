//! The CLI's diagnostics go through `tracing` to stderr; reports go to stdout. `-v` (or
//! `RECORDS_LOG=debug`) adds the harness's steps (materialize, build, launch, parse), each with
//! its time when it ends.
use std::time::Instant;
use tracing_subscriber::EnvFilter;

/// Installs the stderr subscriber: messages as written (they name their source), filtered by
/// `RECORDS_LOG`, else `debug` with `verbose` and `info` without.
pub fn init(verbose: bool) {
    let filter = EnvFilter::try_from_env("RECORDS_LOG")
        .unwrap_or_else(|_| EnvFilter::new(if verbose { "debug" } else { "info" }));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .with_target(false)
        .with_level(false)
        .try_init();
}

/// Runs `f`, one step of the harness for `record`; at debug level, says how long it took.
pub fn step<T>(what: &str, record: impl std::fmt::Display, f: impl FnOnce() -> T) -> T {
    let t0 = Instant::now();
    let out = f();
    tracing::debug!("records: {what} {record}: {:.2} s", t0.elapsed().as_secs_f64());
    out
}
