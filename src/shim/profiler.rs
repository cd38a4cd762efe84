//! The Kineto profiler (what `torch.profiler` drives): a Chrome trace JSON of CPU ops, CUDA
//! kernels and named user ranges, which ui.perfetto.dev opens.
use super::check;
use anyhow::{Context, Result};
use std::ffi::{c_char, c_int, c_void, CString};
use std::path::Path;

extern "C" {
    fn tshim_profiler_start(cuda: c_int, record_shapes: c_int) -> c_int;
    fn tshim_profiler_stop(path: *const c_char) -> c_int;
    fn tshim_range_push(name: *const c_char) -> *mut c_void;
    fn tshim_range_pop(range: *mut c_void);
}

/// Starts profiling this thread's ops (and the autograd threads its backward passes use), plus
/// the CUDA kernels when `cuda`. `record_shapes` adds input shapes (costly; for debugging).
pub fn profiler_start(cuda: bool, record_shapes: bool) -> Result<()> {
    // SAFETY: no pointers.
    let rc = unsafe { tshim_profiler_start(cuda.into(), record_shapes.into()) };
    check(rc, "profiler_start")
}

/// Stops the profiler started by [`profiler_start`] and writes the Chrome trace to `path`.
pub fn profiler_stop(path: &Path) -> Result<()> {
    let c_path = CString::new(path.as_os_str().as_encoded_bytes())
        .with_context(|| format!("profiler_stop: {} contains a NUL byte", path.display()))?;
    // SAFETY: c_path is a NUL-terminated string alive for the call.
    let rc = unsafe { tshim_profiler_stop(c_path.as_ptr()) };
    check(rc, "profiler_stop").with_context(|| format!("writing the trace {}", path.display()))
}

/// A named range (`torch.profiler.record_function`): a `user_annotation` slice from `new` to
/// drop, and a `gpu_user_annotation` over the kernels it launched. Nearly free when no profiler
/// runs. Not `Send`: it must end on the thread that opened it.
pub struct Range(*mut c_void);

impl Range {
    pub fn new(name: &str) -> Range {
        let name = CString::new(name.replace('\0', "")).expect("NUL bytes were removed");
        // SAFETY: the shim copies the name.
        Range(unsafe { tshim_range_push(name.as_ptr()) })
    }
}

impl Drop for Range {
    fn drop(&mut self) {
        // SAFETY: self.0 came from tshim_range_push and is popped once.
        unsafe { tshim_range_pop(self.0) }
    }
}
