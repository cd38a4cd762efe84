//! c10d's TCPStore: the key-value store torchrun rendezvouses through, and that
//! ProcessGroupNCCL exchanges its NCCL ids over. Works without a GPU.
use super::check;
use anyhow::{bail, Context, Result};
use std::ffi::{c_char, c_int, c_void, CString};
use std::time::Duration;

type Sink = unsafe extern "C" fn(*mut c_void, *const u8, usize);

extern "C" {
    fn tshim_store_tcp(
        host: *const c_char,
        port: c_int,
        world: i64,
        is_server: c_int,
        multi_tenant: c_int,
        timeout_ms: i64,
        out: *mut *mut c_void,
    ) -> c_int;
    fn tshim_store_prefix(
        store: *mut c_void,
        prefix: *const c_char,
        out: *mut *mut c_void,
    ) -> c_int;
    fn tshim_store_free(store: *mut c_void);
    fn tshim_store_port(store: *mut c_void, port: *mut c_int) -> c_int;
    fn tshim_store_set(
        store: *mut c_void,
        key: *const c_char,
        data: *const u8,
        len: usize,
    ) -> c_int;
    fn tshim_store_get(
        store: *mut c_void,
        key: *const c_char,
        sink: Sink,
        ctx: *mut c_void,
    ) -> c_int;
    fn tshim_store_add(store: *mut c_void, key: *const c_char, delta: i64, out: *mut i64) -> c_int;
    fn tshim_store_wait(
        store: *mut c_void,
        keys: *const *const c_char,
        n: usize,
        timeout_ms: i64,
    ) -> c_int;
    fn tshim_store_check(
        store: *mut c_void,
        keys: *const *const c_char,
        n: usize,
        out: *mut c_int,
    ) -> c_int;
}

/// Key prefix of everything the trainer stores, apart from the keys torchrun's agent uses
/// (PrefixStore joins it as `records/<key>`).
const PREFIX: &str = "records";

/// A c10d store: a TCPStore, possibly seen through a key prefix. Operations block up to the
/// store's timeout; the server lives as long as any handle to it in its process.
pub struct TcpStore {
    raw: *mut c_void,
}

// SAFETY: c10d::TCPStore serialises its client socket with a mutex; PrefixStore only forwards.
unsafe impl Send for TcpStore {}
unsafe impl Sync for TcpStore {}

fn c_string(s: &str, what: &str) -> Result<CString> {
    CString::new(s).with_context(|| format!("{what} {s:?} contains a NUL byte"))
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl TcpStore {
    /// The server on `port` (0 picks a free one, see [`TcpStore::port`]) for `world_size`
    /// workers, reached at `host`; or, with `is_server` false, a client of `host:port`, retrying
    /// until `timeout`. Servers are multi-tenant, as torch's: several stores on one port in one
    /// process share it.
    pub fn new(
        host: &str,
        port: u16,
        world_size: usize,
        is_server: bool,
        timeout: Duration,
    ) -> Result<TcpStore> {
        let c_host = c_string(host, "host")?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: c_host outlives the call; raw receives a new handle.
        let rc = unsafe {
            tshim_store_tcp(
                c_host.as_ptr(),
                port.into(),
                world_size as i64,
                is_server.into(),
                1,
                millis(timeout),
                &mut raw,
            )
        };
        let role = if is_server { "hosting" } else { "connecting to" };
        check(rc, &format!("TCPStore {role} {host}:{port}"))?;
        Ok(TcpStore { raw })
    }

    /// The store all ranks of a torchrun job share, with keys under `records/`. Under torchrun's
    /// agent store (`TORCHELASTIC_USE_AGENT_STORE=True`) the agent hosts it on
    /// `master_addr:master_port` and every rank is a client; otherwise rank 0 hosts it.
    pub fn rendezvous(
        master_addr: &str,
        master_port: u16,
        rank: usize,
        world_size: usize,
        agent_store: bool,
        timeout: Duration,
    ) -> Result<TcpStore> {
        let host = !agent_store && rank == 0;
        TcpStore::new(master_addr, master_port, world_size, host, timeout)
            .with_context(|| format!("rank {rank} of {world_size}: rendezvous"))?
            .with_prefix(PREFIX)
    }

    /// A view of this store that puts `prefix` before every key (c10d::PrefixStore).
    pub fn with_prefix(&self, prefix: &str) -> Result<TcpStore> {
        let c_prefix = c_string(prefix, "store prefix")?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: self.raw is a live handle; raw receives a new one.
        let rc = unsafe { tshim_store_prefix(self.raw, c_prefix.as_ptr(), &mut raw) };
        check(rc, "PrefixStore")?;
        Ok(TcpStore { raw })
    }

    /// The port of the underlying TCPStore (the one picked when created with port 0).
    pub fn port(&self) -> Result<u16> {
        let mut port = 0;
        // SAFETY: live handle, one out slot.
        check(unsafe { tshim_store_port(self.raw, &mut port) }, "TCPStore port")?;
        Ok(u16::try_from(port)?)
    }

    pub fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        let c_key = c_string(key, "store key")?;
        // SAFETY: live handle; key and value outlive the call.
        let rc = unsafe { tshim_store_set(self.raw, c_key.as_ptr(), value.as_ptr(), value.len()) };
        check(rc, &format!("store set {key:?}"))
    }

    /// The value of `key`, waiting until some rank sets it (up to the store's timeout).
    pub fn get(&self, key: &str) -> Result<Vec<u8>> {
        unsafe extern "C" fn sink(ctx: *mut c_void, data: *const u8, len: usize) {
            let out = &mut *ctx.cast::<Vec<u8>>();
            if len > 0 {
                out.extend_from_slice(std::slice::from_raw_parts(data, len));
            }
        }
        let c_key = c_string(key, "store key")?;
        let mut value = Vec::new();
        // SAFETY: live handle; the sink writes into `value` during the call only.
        let rc = unsafe {
            tshim_store_get(self.raw, c_key.as_ptr(), sink, (&mut value as *mut Vec<u8>).cast())
        };
        check(rc, &format!("store get {key:?}"))?;
        Ok(value)
    }

    /// Atomically adds `delta` to the counter at `key` (0 if new) and returns the new value.
    pub fn add(&self, key: &str, delta: i64) -> Result<i64> {
        let c_key = c_string(key, "store key")?;
        let mut out = 0;
        // SAFETY: live handle, one out slot.
        let rc = unsafe { tshim_store_add(self.raw, c_key.as_ptr(), delta, &mut out) };
        check(rc, &format!("store add {key:?}"))?;
        Ok(out)
    }

    /// Blocks until every key exists, up to `timeout` (`None`: the store's own timeout).
    pub fn wait(&self, keys: &[&str], timeout: Option<Duration>) -> Result<()> {
        let c_keys = keys.iter().map(|k| c_string(k, "store key")).collect::<Result<Vec<_>>>()?;
        let key_ptrs: Vec<*const c_char> = c_keys.iter().map(|k| k.as_ptr()).collect();
        let ms = timeout.map_or(0, |t| millis(t).max(1));
        // SAFETY: live handle; the key strings outlive the call.
        let rc = unsafe { tshim_store_wait(self.raw, key_ptrs.as_ptr(), key_ptrs.len(), ms) };
        check(rc, &format!("store wait for {keys:?}"))
    }

    /// Whether every key exists now (no waiting).
    pub fn check(&self, keys: &[&str]) -> Result<bool> {
        let c_keys = keys.iter().map(|k| c_string(k, "store key")).collect::<Result<Vec<_>>>()?;
        let key_ptrs: Vec<*const c_char> = c_keys.iter().map(|k| k.as_ptr()).collect();
        let mut out = 0;
        // SAFETY: live handle; the key strings outlive the call.
        let rc =
            unsafe { tshim_store_check(self.raw, key_ptrs.as_ptr(), key_ptrs.len(), &mut out) };
        check(rc, &format!("store check {keys:?}"))?;
        Ok(out != 0)
    }

    /// Meets the other `world_size - 1` ranks at `name`: returns once all have arrived. Each
    /// rank calls it with the same names in the same order; a name may be used once per job.
    pub fn barrier(&self, name: &str, world_size: usize) -> Result<()> {
        if world_size == 0 {
            bail!("barrier {name:?}: world size 0");
        }
        let arrived = self.add(&format!("barrier/{name}/arrived"), 1)?;
        let done = format!("barrier/{name}/done");
        if arrived == world_size as i64 {
            self.set(&done, b"1")?;
        }
        self.wait(&[&done], None)
    }

    /// The raw `c10::intrusive_ptr<c10d::Store>*` handle, for the NCCL process group.
    #[cfg(feature = "cuda")]
    pub(crate) fn raw(&self) -> *mut c_void {
        self.raw
    }
}

impl Drop for TcpStore {
    fn drop(&mut self) {
        // SAFETY: raw came from the shim and is freed once.
        unsafe { tshim_store_free(self.raw) }
    }
}
