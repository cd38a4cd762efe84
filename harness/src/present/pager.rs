//! Output for a reader: a closed pipe ends the program quietly, and long output on a terminal
//! goes through a pager, as git does.
use std::io::{IsTerminal, Write};
use std::process::{Child, Command, Stdio};

/// `records diff 1 29 | head`: the default action of SIGPIPE ends the process silently (the
/// shell sees 141) instead of `println!` panicking on EPIPE. Rust ignores SIGPIPE by default;
/// sockets (reqwest) are written with MSG_NOSIGNAL, so only pipes are affected.
pub fn die_quietly_on_closed_pipe() {
    // SAFETY: installing the default disposition of a signal touches no memory of ours.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// A running pager that this process's stdout is redirected into; dropping it closes stdout
/// and waits for the reader to quit.
pub struct Pager {
    child: Child,
}

/// The pager command: `$PAGER`, else `less`. None when paging is off (`PAGER=` or `cat`).
fn command() -> Option<String> {
    let pager = std::env::var("PAGER").unwrap_or_else(|_| "less".into());
    let pager = pager.trim();
    (!pager.is_empty() && pager != "cat").then(|| pager.to_string())
}

/// Starts the pager when stdout is a terminal and `enabled`; otherwise output goes straight on.
pub fn start(enabled: bool) -> Option<Pager> {
    if !enabled || !std::io::stdout().is_terminal() {
        return None;
    }
    let pager = command()?;
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &pager]).stdin(Stdio::piped());
    // git's defaults: quit if one screen (-F), keep colours (-R), do not clear the screen (-X).
    if std::env::var_os("LESS").is_none() {
        cmd.env("LESS", "FRX");
    }
    let mut child = cmd.spawn().ok()?;
    let stdin = child.stdin.take()?;
    use std::os::fd::AsRawFd;
    // SAFETY: dup2 onto fd 1 of a pipe we own; stdout's Rust buffer is empty (nothing printed).
    let ok = unsafe { libc::dup2(stdin.as_raw_fd(), libc::STDOUT_FILENO) } >= 0;
    drop(stdin);
    if !ok {
        let _ = child.kill();
        let _ = child.wait();
        return None;
    }
    Some(Pager { child })
}

impl Drop for Pager {
    fn drop(&mut self) {
        let _ = std::io::stdout().flush();
        // SAFETY: closing fd 1 gives the pager its end of input; nothing writes to stdout after.
        unsafe {
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
            libc::dup2(null, libc::STDOUT_FILENO);
            libc::close(null);
        }
        let _ = self.child.wait();
    }
}
