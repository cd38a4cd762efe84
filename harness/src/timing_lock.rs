//! The machine-wide timing lock: two timed runs at once on one machine make both their times
//! meaningless, so `replay` and `bench` hold an exclusive file lock while their trainers run.
//!
//! A second timed run waits for the holder (named by pid and command, which the holder writes
//! into the lock file), or with `--no-lock` runs at once. A run without the lock takes a shared
//! lock on `<lock>.unlocked` and appends itself to it for as long as it runs, so both sides can
//! tell: the intruder knows it ran beside a holder, and the holder sees at its end that someone
//! ran beside it. Either one's time is then marked as not comparable. A trainer build (cargo on
//! every core) registers there too, for as long as it builds, so a run timed beside another
//! checkout's or command's build says so. The locks are `flock`s, so a process that dies
//! releases them.
use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file: `RECORDS_TIMING_LOCK` if set (tests use their own), else
/// `/tmp/records-timing.lock`, one place for every user and checkout of the machine.
pub fn lock_path() -> PathBuf {
    std::env::var_os("RECORDS_TIMING_LOCK")
        .map_or_else(|| std::env::temp_dir().join("records-timing.lock"), PathBuf::from)
}

/// A timed run's claim on the machine; released when dropped.
pub struct TimingLock {
    path: PathBuf,
    state: State,
}

enum State {
    /// We hold the exclusive lock; `seen` is how long the intruders' file was when we took it.
    Held { _lock: File, seen: u64, disturbed_at_start: Option<String> },
    /// We run without the lock while `holder` holds it (or held it when we started).
    Intruding { _shared: File, holder: String },
}

impl TimingLock {
    /// Takes the lock, waiting (with a message naming the holder) while another run holds it.
    /// With `no_lock`, takes it only if it is free and otherwise runs anyway, marked.
    pub fn acquire(no_lock: bool) -> Result<TimingLock> {
        let path = lock_path();
        let lock = open_rw(&path)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = read_holder(&path);
                if no_lock {
                    tracing::info!(
                        "records: --no-lock: running beside {holder}, which holds {}; the times \
                         of both runs are not comparable",
                        path.display()
                    );
                    return TimingLock::intrude(path, holder);
                }
                tracing::info!(
                    "records: waiting for the timing lock {} held by {holder} (another timed run \
                     on this machine); Ctrl-C to stop, or pass --no-lock to run now with times \
                     that are not comparable",
                    path.display()
                );
                lock.lock().with_context(|| format!("locking {}", path.display()))?;
                tracing::info!("records: got the timing lock");
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", path.display()))
            }
        }
        let mut lock = lock;
        lock.set_len(0)?;
        lock.rewind()?;
        write!(lock, "{}", describe(std::process::id()))?;
        lock.flush()?;
        let (seen, disturbed_at_start) = intruders_now(&path, true)?;
        Ok(TimingLock { path, state: State::Held { _lock: lock, seen, disturbed_at_start } })
    }

    fn intrude(path: PathBuf, holder: String) -> Result<TimingLock> {
        let shared = register(&path, "ran with --no-lock")?;
        Ok(TimingLock { path, state: State::Intruding { _shared: shared, holder } })
    }

    /// Why this run's times are not comparable, if they are not: it ran without the lock beside
    /// a holder, or it held the lock while a `--no-lock` run ran beside it. Ask at the end of the
    /// timed part.
    pub fn not_comparable(&self) -> Result<Option<String>> {
        Ok(match &self.state {
            State::Intruding { holder, .. } => Some(format!(
                "ran with --no-lock while {holder} held the timing lock {}",
                self.path.display()
            )),
            State::Held { seen, disturbed_at_start, .. } => {
                let (len, running) = intruders_now(&self.path, false)?;
                let during = (len > *seen).then(|| {
                    let text = std::fs::read(intruders_path(&self.path)).unwrap_or_default();
                    let start = (*seen as usize).min(text.len());
                    let names = String::from_utf8_lossy(&text[start..]);
                    names.lines().collect::<Vec<_>>().join(", ")
                });
                disturbed_at_start
                    .clone()
                    .or(running)
                    .or(during)
                    .map(|who| format!("{who} beside this run, which held the timing lock"))
            }
        })
    }
}

/// A trainer build's mark beside whichever run holds the lock; removed when dropped.
pub struct BuildMark {
    _shared: File,
}

/// Marks this process as building a trainer until the mark is dropped, without waiting for the
/// lock: a run holding it then says its times are not comparable. Call it only where this
/// process does not hold the lock itself.
pub fn building() -> Result<BuildMark> {
    Ok(BuildMark { _shared: register(&lock_path(), "built a trainer")? })
}

/// Appends `pid N (command) <doing>` to the intruders' file under a shared lock held for as
/// long as the returned file lives.
fn register(lock: &Path, doing: &str) -> Result<File> {
    let file = intruders_path(lock);
    let mut shared = OpenOptions::new()
        .append(true)
        .create(true)
        .open(&file)
        .with_context(|| format!("opening {}", file.display()))?;
    shared.lock_shared().with_context(|| format!("locking {}", file.display()))?;
    writeln!(shared, "{} {doing}", describe(std::process::id()))?;
    Ok(shared)
}

/// Opens (creating) the lock file so that any user can lock it; one made by another user is
/// opened read-only, which `flock` allows.
fn open_rw(path: &Path) -> Result<File> {
    let rw = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path);
    match rw {
        Ok(f) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let _ = f.set_permissions(std::fs::Permissions::from_mode(0o666));
            }
            Ok(f)
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            File::open(path).with_context(|| format!("opening the timing lock {}", path.display()))
        }
        Err(e) => Err(e).with_context(|| format!("opening the timing lock {}", path.display())),
    }
}

fn intruders_path(lock: &Path) -> PathBuf {
    let mut name = lock.as_os_str().to_owned();
    name.push(".unlocked");
    PathBuf::from(name)
}

/// The intruders' file length now, and the newest run in it if one is running now (its shared
/// lock keeps our exclusive probe from succeeding). With `reset`, a file nobody runs under is
/// emptied first, so it does not grow forever.
fn intruders_now(lock: &Path, reset: bool) -> Result<(u64, Option<String>)> {
    let path = intruders_path(lock);
    let file =
        match OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path) {
            Ok(f) => f,
            // Made by another user: read-only still locks and reads.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => File::open(&path)?,
            Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
        };
    let running = match file.try_lock() {
        Ok(()) => {
            if reset {
                let _ = file.set_len(0);
            }
            file.unlock()?;
            None
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            (&file).read_to_string(&mut text)?;
            Some(text.lines().last().unwrap_or("a run").to_string())
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
    };
    Ok((file.metadata()?.len(), running))
}

/// `pid 1234 (records replay 29)`: the command with the program's directory left out.
fn describe(pid: u32) -> String {
    let mut args: Vec<String> = std::env::args().collect();
    if let Some(prog) = args.first_mut() {
        *prog = prog.rsplit('/').next().unwrap_or_default().to_string();
    }
    format!("pid {pid} ({})", args.join(" "))
}

/// What the lock file says about its holder.
fn read_holder(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let text = text.trim();
    if text.is_empty() {
        "another process".to_string()
    } else {
        text.to_string()
    }
}
