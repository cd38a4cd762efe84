//! Starts one trainer process per rank with torchrun's environment and watches them: the first
//! rank that fails ends the whole job, and its id and last stderr lines become the error.
//!
//! Each rank gets `RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `LOCAL_WORLD_SIZE`, `GROUP_RANK`,
//! `GROUP_WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT` and (unless already set) `OMP_NUM_THREADS`,
//! as `torchrun --nproc-per-node N --no-python` would give it. No process outlives the job: on a
//! failure the others get SIGTERM, then SIGKILL after a grace period, and on Linux each rank
//! also gets SIGKILL if the launcher itself dies (`PR_SET_PDEATHSIG`). Ranks stay in the
//! launcher's process group, so Ctrl-C in a terminal reaches all of them.
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io::{self, BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};
use thiserror::Error;

/// How many of a rank's last stderr lines are kept.
const TAIL_LINES: usize = 20;
/// How many of them the error message shows.
const SHOWN_LINES: usize = 10;
/// After the last rank exits, how long to wait for its output pipes to drain (a grandchild may
/// hold them open).
const DRAIN: Duration = Duration::from_secs(2);

/// Where this node sits in the job and how ranks find rank 0.
#[derive(Debug, Clone)]
pub struct LaunchOpts {
    /// Number of nodes (`--nnodes`), each running `nproc` ranks.
    pub nnodes: usize,
    /// This node's index (`--node-rank`); its ranks are `node_rank * nproc ..`.
    pub node_rank: usize,
    /// Rank 0's host (`--master-addr`); 127.0.0.1 on one node. Required for several nodes.
    pub master_addr: Option<String>,
    /// Rank 0's port (`--master-port`); on one node a free port is picked when absent.
    pub master_port: Option<u16>,
    /// Extra variables for every rank.
    pub env: Vec<(OsString, OsString)>,
    /// Working directory of the ranks; the launcher's when absent.
    pub cwd: Option<PathBuf>,
    /// Time between SIGTERM and SIGKILL when the job is torn down.
    pub grace: Duration,
}

impl Default for LaunchOpts {
    fn default() -> Self {
        LaunchOpts {
            nnodes: 1,
            node_rank: 0,
            master_addr: None,
            master_port: None,
            env: Vec::new(),
            cwd: None,
            grace: Duration::from_secs(3),
        }
    }
}

/// Which pipe a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One line of a rank's output, as the callback of [`launch`] sees it. Only this node's local
/// rank 0 has its stdout forwarded (the others' stdout is discarded); every rank's stderr is.
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    /// Global rank.
    pub rank: usize,
    pub stream: Stream,
    /// Without the trailing newline; invalid UTF-8 is replaced.
    pub text: &'a str,
}

/// How one rank ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitInfo {
    pub rank: usize,
    pub local_rank: usize,
    /// Exit code, when it exited normally.
    pub code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
    /// Its last stderr lines (up to 20).
    pub stderr_tail: Vec<String>,
}

#[derive(Debug, Error)]
pub enum LaunchError {
    #[error("{0}")]
    Options(String),
    #[error(
        "--master-port {port}: {addr} is already in use (another job or a leftover rank); pick \
         another port or stop the process holding it"
    )]
    PortInUse { addr: String, port: u16 },
    #[error("--master-addr {addr}: {why}")]
    BadAddr { addr: String, why: String },
    #[error("cannot pick a free port on 127.0.0.1: {0}")]
    NoPort(io::Error),
    #[error("cannot start rank {rank} ({bin}): {source}")]
    Spawn { rank: usize, bin: String, source: io::Error },
    /// The first rank that failed; the others were stopped.
    #[error("rank {rank} {how}: {}", shown(.stderr_tail))]
    RankFailed {
        rank: usize,
        /// "exited with code 1" or "exited with signal 9 (SIGKILL)".
        how: String,
        stderr_tail: Vec<String>,
    },
}

fn shown(tail: &[String]) -> String {
    if tail.is_empty() {
        return "(no stderr output)".to_string();
    }
    tail[tail.len().saturating_sub(SHOWN_LINES)..].join("\n  ")
}

/// Runs `bin args...` as `nproc` ranks on this node and waits for all of them. Lines of output
/// go to `on_line` as they arrive. Returns every rank's exit when all exit 0, else the first
/// failure, after the other ranks have been stopped. Call it from a thread that lives until it
/// returns (Linux ties the ranks' lives to the spawning thread).
pub fn launch(
    bin: &Path,
    args: &[OsString],
    nproc: usize,
    opts: &LaunchOpts,
    mut on_line: impl FnMut(Line<'_>),
) -> Result<Vec<ExitInfo>, LaunchError> {
    let layout = Layout::new(nproc, opts)?;
    let (tx, rx) = mpsc::channel();
    let mut ranks = Vec::with_capacity(nproc);
    for local in 0..nproc {
        match spawn(bin, args, &layout, local, opts, &tx) {
            Ok(rank) => ranks.push(rank),
            Err(e) => {
                stop(&mut ranks, opts.grace);
                return Err(e);
            }
        }
    }
    drop(tx);
    watch(&mut ranks, &rx, opts.grace, &mut on_line)
}

/// The resolved job shape for this node.
struct Layout {
    nproc: usize,
    nnodes: usize,
    node_rank: usize,
    addr: String,
    port: u16,
}

impl Layout {
    fn new(nproc: usize, opts: &LaunchOpts) -> Result<Layout, LaunchError> {
        let bad = |m: String| Err(LaunchError::Options(m));
        if nproc == 0 || opts.nnodes == 0 {
            return bad("the number of ranks per node and of nodes must be at least 1".into());
        }
        if opts.node_rank >= opts.nnodes {
            return bad(format!(
                "--node-rank {} must be less than --nnodes {}",
                opts.node_rank, opts.nnodes
            ));
        }
        let (addr, port) = match (&opts.master_addr, opts.master_port) {
            (Some(a), Some(p)) => (a.clone(), p),
            _ if opts.nnodes > 1 => {
                return bad(format!(
                    "--nnodes {} needs --master-addr and --master-port: every node must name the \
                     same host and port for rank 0",
                    opts.nnodes
                ))
            }
            (a, p) => {
                let addr = a.clone().unwrap_or_else(|| "127.0.0.1".to_string());
                let port = match p {
                    Some(p) => p,
                    None => free_port()?,
                };
                (addr, port)
            }
        };
        if port == 0 {
            return bad("--master-port must be in 1..=65535".into());
        }
        if opts.node_rank == 0 && opts.master_port.is_some() {
            check_port(&addr, port)?;
        }
        Ok(Layout { nproc, nnodes: opts.nnodes, node_rank: opts.node_rank, addr, port })
    }

    fn global(&self, local: usize) -> usize {
        self.node_rank * self.nproc + local
    }
}

fn free_port() -> Result<u16, LaunchError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(LaunchError::NoPort)
}

/// Fails when rank 0 could not listen on `addr:port`; binds the way the trainer does
/// (loopback stays loopback, anything else means all interfaces).
fn check_port(addr: &str, port: u16) -> Result<(), LaunchError> {
    let resolved: Vec<SocketAddr> = (addr, port)
        .to_socket_addrs()
        .map_err(|e| LaunchError::BadAddr {
            addr: addr.to_string(),
            why: format!("does not resolve: {e}"),
        })?
        .collect();
    let Some(target) = resolved.iter().find(|a| a.is_ipv4()).or(resolved.first()) else {
        return Err(LaunchError::BadAddr {
            addr: addr.to_string(),
            why: "has no address".to_string(),
        });
    };
    let bind: SocketAddr = if target.ip().is_loopback() {
        *target
    } else if target.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], port))
    } else {
        SocketAddr::from(([0u16; 8], port))
    };
    match TcpListener::bind(bind) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
            Err(LaunchError::PortInUse { addr: bind.to_string(), port })
        }
        // Not ours to judge (say, a remote address): the trainer reports it precisely.
        Err(_) => Ok(()),
    }
}

/// What the reader and waiter threads tell the watcher.
enum Event {
    Line {
        local: usize,
        stream: Stream,
        text: String,
    },
    /// A pipe reached end of file.
    Closed,
    /// The process ended (not yet reaped).
    Exited {
        local: usize,
    },
}

struct Rank {
    local: usize,
    global: usize,
    child: Child,
    status: Option<ExitStatus>,
    tail: VecDeque<String>,
}

fn spawn(
    bin: &Path,
    args: &[OsString],
    layout: &Layout,
    local: usize,
    opts: &LaunchOpts,
    tx: &Sender<Event>,
) -> Result<Rank, LaunchError> {
    let global = layout.global(local);
    let mut cmd = Command::new(bin);
    cmd.args(args)
        // We host no TCPStore agent; an inherited value would send ranks looking for one.
        .env_remove("TORCHELASTIC_USE_AGENT_STORE")
        .env("RANK", global.to_string())
        .env("LOCAL_RANK", local.to_string())
        .env("WORLD_SIZE", (layout.nnodes * layout.nproc).to_string())
        .env("LOCAL_WORLD_SIZE", layout.nproc.to_string())
        .env("GROUP_RANK", layout.node_rank.to_string())
        .env("GROUP_WORLD_SIZE", layout.nnodes.to_string())
        .env("MASTER_ADDR", &layout.addr)
        .env("MASTER_PORT", layout.port.to_string())
        .envs(opts.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(if local == 0 { Stdio::piped() } else { Stdio::null() })
        .stderr(Stdio::piped());
    let omp_set = std::env::var_os("OMP_NUM_THREADS").is_some()
        || opts.env.iter().any(|(k, _)| k == OsStr::new("OMP_NUM_THREADS"));
    if !omp_set {
        // torchrun's rule shares the cores instead of oversubscribing them N times.
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        cmd.env("OMP_NUM_THREADS", (cores / layout.nproc).max(1).to_string());
    }
    if let Some(dir) = &opts.cwd {
        cmd.current_dir(dir);
    }
    die_with_parent(&mut cmd);
    let mut child = cmd.spawn().map_err(|source| LaunchError::Spawn {
        rank: global,
        bin: bin.display().to_string(),
        source,
    })?;
    if let Some(out) = child.stdout.take() {
        read_lines(out, local, Stream::Stdout, tx.clone());
    }
    if let Some(err) = child.stderr.take() {
        read_lines(err, local, Stream::Stderr, tx.clone());
    }
    let pid = child.id();
    let tx = tx.clone();
    thread::spawn(move || {
        wait_exit(pid);
        let _ = tx.send(Event::Exited { local });
    });
    Ok(Rank { local, global, child, status: None, tail: VecDeque::new() })
}

/// Linux: the rank gets SIGKILL when the launcher dies, even by SIGKILL; no orphans.
#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    let parent = std::process::id();
    // SAFETY: prctl and getppid are async-signal-safe, and the closure allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The launcher died between fork and prctl: do not start an orphan.
            if libc::getppid() as u32 != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

/// Blocks until process `pid` has ended, without reaping it (`WNOWAIT`), so its pid stays
/// valid for `kill` until the watcher reaps it with `try_wait`.
fn wait_exit(pid: u32) {
    loop {
        // SAFETY: waitid writes only into `info`, which lives on this stack frame.
        let rc = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT)
        };
        if rc == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return;
        }
    }
}

fn read_lines(pipe: impl Read + Send + 'static, local: usize, stream: Stream, tx: Sender<Event>) {
    thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text =
                        String::from_utf8_lossy(&buf).trim_end_matches(['\n', '\r']).to_string();
                    if tx.send(Event::Line { local, stream, text }).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = tx.send(Event::Closed);
    });
}

/// Forwards output and reaps ranks until all have ended; the first failure stops the rest.
fn watch(
    ranks: &mut [Rank],
    rx: &mpsc::Receiver<Event>,
    grace: Duration,
    on_line: &mut impl FnMut(Line<'_>),
) -> Result<Vec<ExitInfo>, LaunchError> {
    let mut failed: Option<usize> = None;
    let mut kill_at: Option<Instant> = None;
    let mut drained_by: Option<Instant> = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Event::Line { local, stream, text }) => {
                let rank = &mut ranks[local];
                if stream == Stream::Stderr {
                    if rank.tail.len() == TAIL_LINES {
                        rank.tail.pop_front();
                    }
                    rank.tail.push_back(text.clone());
                }
                on_line(Line { rank: rank.global, stream, text: &text });
            }
            Ok(Event::Closed) | Err(RecvTimeoutError::Timeout) => {}
            Ok(Event::Exited { local }) => {
                let status = reap(&mut ranks[local].child);
                ranks[local].status = Some(status);
                if failed.is_none() && !status.success() {
                    failed = Some(local);
                    signal_all(ranks, libc::SIGTERM);
                    kill_at = Some(Instant::now() + grace);
                }
                if ranks.iter().all(|r| r.status.is_some()) {
                    drained_by = Some(Instant::now() + DRAIN);
                }
            }
            // Every reader and waiter is done.
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let now = Instant::now();
        if kill_at.is_some_and(|t| now >= t) {
            signal_all(ranks, libc::SIGKILL);
            kill_at = None;
        }
        if drained_by.is_some_and(|t| now >= t) {
            break;
        }
    }
    if let Some(local) = failed {
        let rank = &ranks[local];
        let status = rank.status.expect("a failed rank has a status");
        return Err(LaunchError::RankFailed {
            rank: rank.global,
            how: describe(status),
            stderr_tail: rank.tail.iter().cloned().collect(),
        });
    }
    Ok(ranks
        .iter()
        .map(|r| {
            let status = r.status.expect("every rank was reaped");
            ExitInfo {
                rank: r.global,
                local_rank: r.local,
                code: status.code(),
                signal: status.signal(),
                stderr_tail: r.tail.iter().cloned().collect(),
            }
        })
        .collect())
}

/// Reaps a child whose exit `wait_exit` saw.
fn reap(child: &mut Child) -> ExitStatus {
    match child.try_wait() {
        Ok(Some(status)) => status,
        _ => child.wait().unwrap_or_else(|_| ExitStatus::from_raw(libc::SIGKILL)),
    }
}

/// Sends `sig` to every rank not yet reaped (an unreaped pid cannot have been reused).
fn signal_all(ranks: &[Rank], sig: libc::c_int) {
    for r in ranks.iter().filter(|r| r.status.is_none()) {
        // SAFETY: kill has no memory effects; the pid is our unreaped child.
        unsafe {
            libc::kill(r.child.id() as libc::pid_t, sig);
        }
    }
}

/// Stops ranks already started when a later one fails to start.
fn stop(ranks: &mut [Rank], grace: Duration) {
    signal_all(ranks, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    for r in ranks.iter_mut() {
        while r.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        let _ = r.child.kill();
        let _ = r.child.wait();
    }
}

/// "exited with code 1" or "exited with signal 9 (SIGKILL)".
fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(sig)) => format!("exited with signal {sig} ({})", signal_name(sig)),
        (None, None) => format!("ended abnormally ({status})"),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}
