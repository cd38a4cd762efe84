//! The machine-wide timing lock: two timed runs at once on one machine make both their times
//! meaningless, so `replay` and `bench` hold an exclusive file lock while their trainers run.
//!
//! A second timed run waits for the holder (named by pid and command, which the holder writes
//! into the lock file), or with `--no-lock` runs at once. A run without the lock takes a shared
//! lock on `<lock>.unlocked` and writes its start and end there, so both sides can tell: the
//! intruder knows it ran beside a holder, and the holder sees at its end who ran beside it and
//! for how long of its run. Either one's time is then marked as not comparable. A trainer build (cargo on
//! every core) registers there too, for as long as it builds, so a run timed beside another
//! checkout's or command's build says so. The locks are `flock`s, so a process that dies
//! releases them.
use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{Seek, Write};
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
    /// We hold the exclusive lock, since `since` (ms since the epoch).
    Held { _lock: File, since: u64 },
    /// We run without the lock while `holder` holds it (or held it when we started).
    Intruding { _mark: Registration, holder: String },
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
        reset_if_idle(&path)?;
        Ok(TimingLock { path, state: State::Held { _lock: lock, since: now_ms() } })
    }

    fn intrude(path: PathBuf, holder: String) -> Result<TimingLock> {
        let mark = register(&path, "ran with --no-lock")?;
        Ok(TimingLock { path, state: State::Intruding { _mark: mark, holder } })
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
            State::Held { since, .. } => {
                let file = intruders_path(&self.path);
                let text = std::fs::read_to_string(&file).unwrap_or_default();
                let (from, to) = (*since, now_ms());
                let beside: Vec<String> = overlaps(&text, from, to)
                    .into_iter()
                    .map(|(who, ms)| {
                        let of = (to - from) as f64 / 1e3;
                        format!(
                            "{who} beside this run for {:.1} s of its {of:.1} s",
                            ms as f64 / 1e3
                        )
                    })
                    .collect();
                (!beside.is_empty())
                    .then(|| format!("{}, which held the timing lock", beside.join("; ")))
            }
        })
    }
}

/// A trainer build's mark beside whichever run holds the lock; removed when dropped.
pub struct BuildMark {
    _mark: Registration,
}

/// Marks this process as building a trainer until the mark is dropped, without waiting for the
/// lock: a run holding it then says its times are not comparable. Call it only where this
/// process does not hold the lock itself.
pub fn building() -> Result<BuildMark> {
    Ok(BuildMark { _mark: register(&lock_path(), "built a trainer")? })
}

/// One process's entry in the intruders' file: `start <ms> pid N (command) <doing>` when made,
/// `end <ms> pid N` when dropped, under a shared lock held in between.
struct Registration {
    file: File,
}

fn register(lock: &Path, doing: &str) -> Result<Registration> {
    let path = intruders_path(lock);
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    file.lock_shared().with_context(|| format!("locking {}", path.display()))?;
    writeln!(file, "start {} {} {doing}", now_ms(), describe(std::process::id()))?;
    Ok(Registration { file })
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = writeln!(self.file, "end {} pid {}", now_ms(), std::process::id());
    }
}

fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| d.as_millis() as u64)
}

/// Who ran beside `[from, to]` (ms) by the intruders' file `text`, and for how many ms: each
/// `start` line paired with the next `end` of its pid, an unended one running until `to`.
fn overlaps(text: &str, from: u64, to: u64) -> Vec<(String, u64)> {
    let mut open: Vec<(String, String, u64)> = Vec::new(); // (pid, who, start)
    let mut done: Vec<(String, u64, u64)> = Vec::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, ' ');
        let (Some(kind), Some(ms), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let Ok(ms) = ms.parse::<u64>() else { continue };
        let pid = rest.split(' ').take(2).collect::<Vec<_>>().join(" ");
        match kind {
            "start" => open.push((pid, rest.to_string(), ms)),
            "end" => {
                if let Some(i) = open.iter().rposition(|(p, _, _)| *p == pid) {
                    let (_, who, start) = open.remove(i);
                    done.push((who, start, ms));
                }
            }
            _ => {}
        }
    }
    done.extend(open.into_iter().map(|(_, who, start)| (who, start, to)));
    done.into_iter()
        .filter_map(|(who, s, e)| {
            let ms = e.min(to).saturating_sub(s.max(from));
            (ms > 0).then_some((who, ms))
        })
        .collect()
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

/// Empties the intruders' file when nobody runs under it, so it does not grow forever.
fn reset_if_idle(lock: &Path) -> Result<()> {
    let path = intruders_path(lock);
    let file =
        match OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path) {
            Ok(f) => f,
            // Made by another user: leave it as it is.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return Ok(()),
            Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
        };
    match file.try_lock() {
        Ok(()) => {
            let _ = file.set_len(0);
            file.unlock()?;
        }
        Err(std::fs::TryLockError::WouldBlock) => {}
        Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::overlaps;

    #[test]
    fn only_the_time_beside_the_holder_counts() {
        let text = "start 100 pid 7 (records replay 1 --no-lock) ran with --no-lock\n\
                    end 200 pid 7\n\
                    start 900 pid 8 (records replay 29) built a trainer\n\
                    end 1500 pid 8\n\
                    start 1800 pid 9 (records bench) ran with --no-lock\n";
        let got = overlaps(text, 1000, 2000);
        assert_eq!(
            got,
            [
                ("pid 8 (records replay 29) built a trainer".to_string(), 500),
                ("pid 9 (records bench) ran with --no-lock".to_string(), 200),
            ]
        );
    }
}
