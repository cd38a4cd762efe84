//! Custom autograd Functions whose forward and backward are Rust closures: a C++
//! `torch::autograd::Function` calls back into Rust through `extern "C"` trampolines.
use super::{check, owned, ptrs, CTensor};
use anyhow::{anyhow, Result};
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use tch::Tensor;
use torch_sys::C_tensor;

type ForwardFn =
    unsafe extern "C" fn(*mut c_void, *const CTensor, usize, *mut c_void, *mut c_void) -> c_int;
type BackwardFn = unsafe extern "C" fn(
    *mut c_void,
    *const CTensor,
    usize,
    *const CTensor,
    usize,
    *mut c_void,
    *mut c_void,
) -> c_int;
type DropFn = unsafe extern "C" fn(*mut c_void);

extern "C" {
    fn tshim_custom_function(
        inputs: *const CTensor,
        n: usize,
        user: *mut c_void,
        forward: ForwardFn,
        backward: BackwardFn,
        drop: DropFn,
        out: *mut *mut C_tensor,
    ) -> c_int;
    fn tshim_list_push(list: *mut c_void, t: *mut C_tensor);
    fn tshim_message_set(err: *mut c_void, msg: *const u8, len: usize);
}

/// Applies a custom autograd Function to `inputs`.
///
/// * `forward(inputs)` runs now, without grad tracking, and returns the output plus the tensors
///   to save for backward (inputs among them are version-checked like torch's `save_for_backward`).
/// * `backward(grad_outputs, saved)` gets the output's gradient (one tensor) and the saved
///   tensors; it returns one gradient per input, `Tensor::new()` (undefined) for none.
///
/// Backward may run on an autograd engine thread (one per CUDA device), hence `Send + Sync`;
/// read the current CUDA stream inside the callbacks rather than capturing it. The closures live
/// as long as the graph that can still call them.
pub fn custom_function<F, B>(inputs: &[Tensor], forward: F, backward: B) -> Result<Tensor>
where
    F: Fn(&[Tensor]) -> Result<(Tensor, Vec<Tensor>)> + Send + Sync + 'static,
    B: Fn(&[Tensor], &[Tensor]) -> Result<Vec<Tensor>> + Send + Sync + 'static,
{
    let user = Box::into_raw(Box::new(Callbacks { forward, backward })).cast::<c_void>();
    let handles = ptrs(inputs);
    let mut out = std::ptr::null_mut();
    // SAFETY: `user` passes to the shim, which frees it through `drop_callbacks::<F, B>`; the
    // trampolines are instantiated for exactly this `Callbacks<F, B>`.
    let rc = unsafe {
        tshim_custom_function(
            handles.as_ptr(),
            handles.len(),
            user,
            run_forward::<F, B>,
            run_backward::<F, B>,
            drop_callbacks::<F, B>,
            &mut out,
        )
    };
    check(rc, "custom_function")?;
    owned(out, "custom_function")
}

struct Callbacks<F, B> {
    forward: F,
    backward: B,
}

/// Owned shallow copies of n borrowed handles (same storage and autograd identity).
///
/// # Safety
/// `ptrs` must point at n valid tensor handles.
unsafe fn borrow(ptrs: *const CTensor, n: usize) -> Vec<Tensor> {
    (0..n).map(|i| Tensor::clone_from_ptr(*ptrs.add(i) as *mut C_tensor)).collect()
}

/// Moves `t` into the C++ list `list`.
///
/// # Safety
/// `list` must be the out-list the shim passed to the callback.
unsafe fn push(list: *mut c_void, mut t: Tensor) {
    tshim_list_push(list, t.as_mut_ptr());
    std::mem::forget(t); // the list owns the handle now
}

/// Runs a callback body, turning errors and panics into return code 1 plus a message in `err`.
///
/// # Safety
/// `err` must be the message slot the shim passed to the callback.
unsafe fn guarded(err: *mut c_void, body: impl FnOnce() -> Result<()>) -> c_int {
    let result = catch_unwind(AssertUnwindSafe(body))
        .unwrap_or_else(|_| Err(anyhow!("the Rust callback panicked")));
    match result {
        Ok(()) => 0,
        Err(e) => {
            let msg = format!("{e:#}");
            tshim_message_set(err, msg.as_ptr(), msg.len());
            1
        }
    }
}

unsafe extern "C" fn run_forward<F, B>(
    user: *mut c_void,
    inputs: *const CTensor,
    n: usize,
    out_list: *mut c_void,
    err: *mut c_void,
) -> c_int
where
    F: Fn(&[Tensor]) -> Result<(Tensor, Vec<Tensor>)>,
{
    let cb = &*user.cast::<Callbacks<F, B>>();
    guarded(err, || {
        let (output, saved) = (cb.forward)(&borrow(inputs, n))?;
        push(out_list, output);
        for t in saved {
            push(out_list, t);
        }
        Ok(())
    })
}

unsafe extern "C" fn run_backward<F, B>(
    user: *mut c_void,
    grads: *const CTensor,
    n_grads: usize,
    saved: *const CTensor,
    n_saved: usize,
    out_list: *mut c_void,
    err: *mut c_void,
) -> c_int
where
    B: Fn(&[Tensor], &[Tensor]) -> Result<Vec<Tensor>>,
{
    let cb = &*user.cast::<Callbacks<F, B>>();
    guarded(err, || {
        let grads_in = (cb.backward)(&borrow(grads, n_grads), &borrow(saved, n_saved))?;
        for g in grads_in {
            push(out_list, g);
        }
        Ok(())
    })
}

unsafe extern "C" fn drop_callbacks<F, B>(user: *mut c_void) {
    let callbacks = Box::from_raw(user.cast::<Callbacks<F, B>>());
    // A panicking closure destructor must not unwind into C++.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(callbacks)));
}
