//! SIGINT, SIGTERM and SIGHUP: stop the children and remove the temporaries, then exit.
//!
//! Without this an interrupted replay leaves `results/NN/.tmp-*` behind and a SIGTERM during
//! the tree build orphans `cargo build`. Cargo runs in a process group of its own (see
//! `tree_build::run_cargo`) so that its rustc and build-script children stop with it; the
//! ranks stay in ours and also die with us (`PR_SET_PDEATHSIG`).
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Temp folders to remove if a signal ends the process.
static TEMP_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Set once a signal is being handled: the work the main thread was doing fails as its children
/// stop, and that failure is not the outcome to report.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// How long the children get to exit after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(3);

/// Starts the thread that waits for the signals.
pub fn install() -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            stop(sig);
        }
    });
    Ok(())
}

/// A temp folder that is removed if a signal ends the process; dropping the guard forgets it.
pub struct TempDirGuard(PathBuf);

pub fn remove_on_signal(dir: &Path) -> TempDirGuard {
    TEMP_DIRS.lock().unwrap_or_else(|e| e.into_inner()).push(dir.to_path_buf());
    TempDirGuard(dir.to_path_buf())
}

impl Drop for TempDirGuard {
    fn drop(&mut self) {
        TEMP_DIRS.lock().unwrap_or_else(|e| e.into_inner()).retain(|d| *d != self.0);
    }
}

/// Called by the main thread before it reports how the command went: while a signal is being
/// handled, it waits for the handler to end the process instead.
pub fn wait_if_stopping() {
    while STOPPING.load(Ordering::SeqCst) {
        std::thread::park();
    }
}

fn stop(sig: i32) -> ! {
    STOPPING.store(true, Ordering::SeqCst);
    // Taken now: the main thread may drop its guards (and remove the folders) as its children
    // stop.
    let dirs = TEMP_DIRS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let name = match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "SIGHUP",
    };
    let children = children();
    signal_children(&children, libc::SIGTERM);
    let deadline = Instant::now() + GRACE;
    while children.iter().any(|&c| alive(c)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    signal_children(&children, libc::SIGKILL);
    for d in &dirs {
        let _ = std::fs::remove_dir_all(d);
    }
    let removed: Vec<String> =
        dirs.iter().filter(|d| !d.exists()).map(|d| d.display().to_string()).collect();
    let removed = match removed.is_empty() {
        true => String::new(),
        false => format!("; removed {}", removed.join(", ")),
    };
    tracing::info!(
        "records: stopped by {name}: {} child process(es) stopped{removed}",
        children.len()
    );
    std::process::exit(128 + sig)
}

/// Sends `sig` to each child, to its whole process group when it leads one.
fn signal_children(children: &[i32], sig: i32) {
    for &pid in children {
        let leads_group = stat(pid).is_some_and(|s| s.pgrp == pid);
        // SAFETY: kill has no memory effects; the pids are our own children.
        unsafe {
            libc::kill(if leads_group { -pid } else { pid }, sig);
        }
    }
}

/// The fields of `/proc/PID/stat` used here.
struct Stat {
    state: char,
    ppid: i32,
    pgrp: i32,
}

fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
    let mut rest = text[text.rfind(')')? + 1..].split_whitespace();
    let state = rest.next()?.chars().next()?;
    Some(Stat { state, ppid: rest.next()?.parse().ok()?, pgrp: rest.next()?.parse().ok()? })
}

/// The live children of this process.
fn children() -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| stat(pid).is_some_and(|s| s.ppid == me && s.state != 'Z'))
        .collect()
}

/// Running (an exited child waiting to be reaped counts as gone).
fn alive(pid: i32) -> bool {
    stat(pid).is_some_and(|s| s.state != 'Z')
}

/// Whether process `pid` exists (for the owners of temporaries left by earlier runs).
pub fn process_exists(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}
