//! `device::upload`, the one way host tensors (a loader's tokens, document boundaries) reach the
//! training device: on the CPU it must stay what it was, the same tensor and no CUDA call.
use tch::{Device, Kind, Tensor};
use trainer::device::upload;

/// On the CPU the upload is the tensor itself: the same storage and strides (a pinned copy would
/// be new storage, and pinning needs CUDA), so views such as the row loader's stay views.
#[test]
fn upload_to_the_cpu_is_the_same_tensor_unpinned() {
    let all = Tensor::arange(24, (Kind::Int64, Device::Cpu)).view([4, 6]);
    let inputs = all.narrow(1, 0, 5);
    let up = upload(&inputs, Device::Cpu);
    assert_eq!(up.device(), Device::Cpu);
    assert_eq!(up.kind(), Kind::Int64);
    assert_eq!((up.size(), up.stride()), (inputs.size(), inputs.stride()));
    assert_eq!(up.data_ptr(), inputs.data_ptr(), "no copy on the CPU");
    assert!(up.equal(&inputs));
    let cu = Tensor::from_slice(&[0i32, 3, 7, 7]);
    assert_eq!(upload(&cu, Device::Cpu).data_ptr(), cu.data_ptr());
}
