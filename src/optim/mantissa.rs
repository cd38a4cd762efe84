//! bf16 weights with fp32 updates (upstream #57): a bf16 weight is the top 16 bits of an fp32
//! number; Muon keeps the bottom 16 bits (the rest of the mantissa) in an int16 buffer, so it
//! updates the exact fp32 value and stores it back split. The forward reads the bf16 half, which
//! is the fp32 value truncated towards zero (not rounded), and nothing of an update is lost.
//! ```text
//! p32 = bits(hi)·2¹⁶ | bits(lo)        update p32 in fp32        hi, lo = p32's top, bottom 16 bits
//! ```
use tch::{Kind, Tensor};

/// x (fp32) -> (hi: bf16 of x's top 16 bits, lo: int16 of its bottom 16 bits).
pub fn split(x: &Tensor) -> (Tensor, Tensor) {
    let bits = x.view_dtype(Kind::Int); // int32, the same bits
    let hi = bits.bitwise_right_shift_tensor_scalar(16).to_kind(Kind::Int16);
    // Shifting up then (arithmetically) down keeps the low half, sign-extended into int16 range.
    let lo = bits.bitwise_left_shift_tensor_scalar(16).bitwise_right_shift_tensor_scalar(16);
    (hi.view_dtype(Kind::BFloat16), lo.to_kind(Kind::Int16))
}

/// (hi: bf16, lo: int16) -> the fp32 whose bits they are.
pub fn join(hi: &Tensor, lo: &Tensor) -> Tensor {
    let top = hi.view_dtype(Kind::Int16).to_kind(Kind::Int).bitwise_left_shift_tensor_scalar(16);
    let bottom = lo.to_kind(Kind::Int).bitwise_and(0xFFFF);
    top.bitwise_or_tensor(&bottom).view_dtype(Kind::Float)
}
