//! Attention with one API for every record's pattern: causal or not, a sliding window, document
//! boundaries over the flattened batch.
//!
//! Layout: q, k, v are `[B, H, T, D]` (the same shape; self-attention) and so is the result.
//! Two kernels compute the same function:
//! - [`Kernel::Flash`]: FlashAttention-2 through the shim (`_flash_attention_forward`), CUDA and
//!   bf16/fp16 only; varlen when documents are given. It wants `[B, T, H, D]` (dense) or
//!   `[B*T, H, D]` (varlen), so the inputs are transposed/flattened here and the result back.
//! - [`Kernel::Sdpa`]: `scaled_dot_product_attention` with an explicit boolean mask (causal ∧
//!   window ∧ same document), on any device and dtype. Plain dense attention (no window, no
//!   documents) takes SDPA's own `is_causal` path instead of a mask.
//!
//! [`Kernel::Auto`] takes Flash for CUDA half-precision inputs with a window or documents, and
//! SDPA otherwise. Plain dense causal stays on SDPA even on CUDA: there SDPA picks cuDNN, which
//! the H200 probe measured faster than the shim's flash kernel (0.59 vs 0.92 ms fwd+bwd at
//! B8 H6 T2048 D128), and record #1's numbers stay those of its original SDPA call.
use crate::shim::{self, FlashOptions, Varlen};
use anyhow::{bail, ensure, Context, Result};
use std::sync::{Arc, Mutex, OnceLock};
use tch::{Device, Kind, Tensor};

/// Documents packed into the flattened batch: document `i` spans tokens
/// `cu_seqlens[i]..cu_seqlens[i + 1]` of the `B*T` tokens taken row after row, so a document may
/// run on from the end of one row into the next. Tokens attend only within their document.
/// Cloning is cheap: the tensor is shared.
#[derive(Debug)]
pub struct Docs {
    cu_seqlens: Tensor,
    bounds: Vec<i64>,
    max_len: i64,
    /// The SDPA path's query blocks with their masks, built once per (causal, window, device)
    /// and shared by every layer and clone that attends over these documents.
    blocks: BlockCache,
    /// These documents with every length doubled (paired-head attention), built once.
    doubled: Arc<OnceLock<Docs>>,
}

type BlockKey = (bool, Option<i64>, Device);
type BlockCache = Arc<Mutex<Vec<(BlockKey, Arc<[Block]>)>>>;

/// Queries `qs..qe` against keys `lo..hi`, and which of those pairs may attend.
#[derive(Debug)]
struct Block {
    qs: i64,
    qe: i64,
    lo: i64,
    hi: i64,
    /// `[qe - qs, hi - lo]` bool.
    mask: Tensor,
}

impl Docs {
    /// Checks `cu_seqlens` (int32, 1-D, starts at 0, non-decreasing, at least one document) and
    /// measures its longest document, which flash needs; this reads the tensor to the host once.
    pub fn new(cu_seqlens: &Tensor) -> Result<Docs> {
        ensure!(
            cu_seqlens.kind() == Kind::Int && cu_seqlens.dim() == 1,
            "document boundaries must be a 1-D int32 tensor of n_docs + 1 offsets, got {:?} {:?}",
            cu_seqlens.kind(),
            cu_seqlens.size()
        );
        let offsets = Vec::<i32>::try_from(&cu_seqlens.to(Device::Cpu))
            .context("reading document boundaries")?;
        Docs::checked(&offsets, cu_seqlens.shallow_clone())
    }

    /// The same checks on host offsets, which are then copied to `device` once (a loader's
    /// path: nothing is read back from the device).
    pub fn from_offsets(offsets: &[i32], device: Device) -> Result<Docs> {
        Docs::checked(offsets, crate::device::upload(&Tensor::from_slice(offsets), device))
    }

    fn checked(offsets: &[i32], cu_seqlens: Tensor) -> Result<Docs> {
        let bounds: Vec<i64> = offsets.iter().map(|&b| i64::from(b)).collect();
        ensure!(
            bounds.len() >= 2,
            "document boundaries need n_docs + 1 >= 2 offsets, got {}",
            bounds.len()
        );
        ensure!(bounds[0] == 0, "document boundaries must start at 0, got {bounds:?}");
        if let Some(w) = bounds.windows(2).find(|w| w[1] < w[0]) {
            bail!("document boundaries must not decrease, got {} after {}", w[1], w[0]);
        }
        let max_len = bounds.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        Ok(Docs { cu_seqlens, bounds, max_len, blocks: Arc::default(), doubled: Arc::default() })
    }

    /// Boundaries from document lengths, as an int32 tensor on `device`.
    pub fn from_lengths(lengths: &[i64], device: Device) -> Result<Docs> {
        let mut cu = vec![0i32];
        for &len in lengths {
            let end = i64::from(*cu.last().unwrap_or(&0)) + len;
            cu.push(i32::try_from(end).context("document boundaries overflow int32")?);
        }
        Docs::from_offsets(&cu, device)
    }

    /// Tokens covered: the last boundary (must equal `B*T` of the attention's inputs).
    pub fn total(&self) -> i64 {
        *self.bounds.last().unwrap_or(&0)
    }

    pub fn max_len(&self) -> i64 {
        self.max_len
    }

    /// The same documents over a sequence twice as long, each token two rows (upstream #58's
    /// paired heads): every boundary doubled.
    pub fn doubled(&self) -> Result<Docs> {
        if let Some(d) = self.doubled.get() {
            return Ok(d.clone());
        }
        let offsets: Vec<i32> = (self.bounds.iter().map(|&b| i32::try_from(2 * b)))
            .collect::<Result<_, _>>()
            .context("doubled document boundaries overflow int32")?;
        let d = Docs::from_offsets(&offsets, self.cu_seqlens.device())?;
        Ok(self.doubled.get_or_init(|| d).clone())
    }

    /// The document holding token `i`: its (start, end).
    fn span_of(&self, i: i64) -> (i64, i64) {
        let d = self.bounds.partition_point(|&b| b <= i).saturating_sub(1);
        (self.bounds[d], self.bounds.get(d + 1).copied().unwrap_or(self.total()))
    }

    /// The query blocks of `pattern` on `device`, built on the first call (on the host: one
    /// copy per block instead of a handful of small tensor ops per block, layer and step).
    fn blocks(&self, pattern: &Pattern, device: Device) -> Arc<[Block]> {
        let key = (pattern.causal, pattern.window, device);
        let mut cache = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, blocks)) = cache.iter().find(|(k, _)| *k == key) {
            return blocks.clone();
        }
        let doc: Vec<usize> = (0..self.total())
            .map(|i| self.bounds.partition_point(|&b| b <= i).saturating_sub(1))
            .collect();
        let n = self.total();
        let blocks: Arc<[Block]> = (0..n)
            .step_by(QUERY_BLOCK as usize)
            .map(|qs| {
                let qe = (qs + QUERY_BLOCK).min(n);
                let (first_doc, _) = self.span_of(qs);
                let lo = pattern.window.map_or(first_doc, |w| first_doc.max(qs - w));
                let hi = if pattern.causal { qe } else { self.span_of(qe - 1).1 };
                let allowed: Vec<bool> = (qs..qe)
                    .flat_map(|i| (lo..hi).map(move |j| (i, j)))
                    .map(|(i, j)| {
                        doc[i as usize] == doc[j as usize]
                            && (!pattern.causal || j <= i)
                            && pattern.window.is_none_or(|w| i - j <= w)
                    })
                    .collect();
                let mask = Tensor::from_slice(&allowed).view([qe - qs, hi - lo]).to(device);
                Block { qs, qe, lo, hi, mask }
            })
            .collect();
        cache.push((key, blocks.clone()));
        blocks
    }
}

impl Clone for Docs {
    fn clone(&self) -> Docs {
        Docs {
            cu_seqlens: self.cu_seqlens.shallow_clone(),
            bounds: self.bounds.clone(),
            max_len: self.max_len,
            blocks: self.blocks.clone(),
            doubled: self.doubled.clone(),
        }
    }
}

/// Which keys each query sees, and the softmax scale.
#[derive(Debug)]
pub struct Pattern {
    /// Query `i` sees no key after position `i`.
    pub causal: bool,
    /// Flash's `window_size_left`: query `i` sees keys `j` with `i - j <= window` (so 0 is the
    /// token itself, 1 adds the one before it); `None` is unbounded. Positions are those within
    /// the row, or within the flattened batch when documents are given (the same thing inside
    /// one document).
    pub window: Option<i64>,
    /// `None`: each row of `T` tokens is one sequence.
    pub docs: Option<Docs>,
    /// Softmax scale; `None` is 1/sqrt(D).
    pub scale: Option<f64>,
}

impl Default for Pattern {
    /// Dense causal over each row with the default scale: GPT-2 (record #1).
    fn default() -> Self {
        Pattern { causal: true, window: None, docs: None, scale: None }
    }
}

impl Pattern {
    /// Whether this is plain dense attention, which SDPA masks by itself.
    fn is_plain(&self) -> bool {
        self.window.is_none() && self.docs.is_none()
    }
}

/// Which implementation [`attend_with`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Flash for CUDA bf16/fp16 inputs with a window or documents; SDPA otherwise.
    Auto,
    /// The shim's FlashAttention-2 (CUDA, bf16/fp16); an error elsewhere.
    Flash,
    /// SDPA with an explicit mask (any device and dtype): the reference. With documents the
    /// B·T tokens are one sequence attended in blocks of 256 queries, each block with a mask over
    /// the keys it can reach (`[256, keys]`), not one `[B·T, B·T]` mask.
    Sdpa,
}

/// Attention of `[B, H, T, D]` q, k, v under `pattern`; returns `[B, H, T, D]`.
pub fn attend(q: &Tensor, k: &Tensor, v: &Tensor, pattern: &Pattern) -> Result<Tensor> {
    attend_with(q, k, v, pattern, Kernel::Auto)
}

/// [`attend`] with the kernel chosen by the caller (GPU checks compare the two).
pub fn attend_with(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    pattern: &Pattern,
    kernel: Kernel,
) -> Result<Tensor> {
    // The profile's attention: masks and kernel here, their backward by sequence number.
    let _range = crate::shim::Range::new("attention");
    let shape = q.size();
    ensure!(
        shape.len() == 4 && k.size() == shape && v.size() == shape,
        "attend: q, k, v must all be [B, H, T, D], got {:?}, {:?}, {:?}",
        shape,
        k.size(),
        v.size()
    );
    if let Some(w) = pattern.window {
        ensure!(w >= 0, "attend: window must be >= 0, got {w}");
    }
    if let Some(docs) = &pattern.docs {
        let tokens = shape[0] * shape[2];
        ensure!(
            docs.total() == tokens,
            "attend: documents cover {} tokens but the batch has B*T = {tokens}",
            docs.total()
        );
    }
    let flash = match kernel {
        Kernel::Flash => true,
        Kernel::Sdpa => false,
        Kernel::Auto => {
            q.device().is_cuda()
                && matches!(q.kind(), Kind::BFloat16 | Kind::Half)
                && !pattern.is_plain()
        }
    };
    if flash {
        flash_path(q, k, v, pattern)
    } else {
        sdpa_path(q, k, v, pattern)
    }
}

fn flash_path(q: &Tensor, k: &Tensor, v: &Tensor, pattern: &Pattern) -> Result<Tensor> {
    let (b, h, t, d) = q.size4()?;
    let mut opts = FlashOptions {
        causal: pattern.causal,
        scale: pattern.scale,
        window_left: pattern.window,
        window_right: None,
        varlen: None,
    };
    // [B, H, T, D] -> [B, T, H, D]: a view whose last dimension stays contiguous, as flash needs.
    let bthd = |x: &Tensor| x.transpose(1, 2);
    match &pattern.docs {
        None => {
            let y = shim::flash_attention(&bthd(q), &bthd(k), &bthd(v), &opts)?;
            Ok(y.transpose(1, 2))
        }
        Some(docs) => {
            let cu = docs.cu_seqlens.to(q.device());
            opts.varlen = Some(Varlen {
                cu_seqlens_q: &cu,
                cu_seqlens_k: &cu,
                max_q: docs.max_len,
                max_k: docs.max_len,
            });
            let packed = |x: &Tensor| bthd(x).reshape([b * t, h, d]);
            let y = shim::flash_attention(&packed(q), &packed(k), &packed(v), &opts)?;
            Ok(y.view([b, t, h, d]).transpose(1, 2))
        }
    }
}

fn sdpa_path(q: &Tensor, k: &Tensor, v: &Tensor, pattern: &Pattern) -> Result<Tensor> {
    if pattern.is_plain() {
        return Ok(Tensor::f_scaled_dot_product_attention(
            q,
            k,
            v,
            None::<Tensor>,
            0.0,
            pattern.causal,
            pattern.scale,
            false,
        )?);
    }
    let (b, h, t, d) = q.size4()?;
    let dev = q.device();
    match &pattern.docs {
        None => {
            let mask = mask(t, pattern.causal, pattern.window, dev);
            Ok(Tensor::f_scaled_dot_product_attention(
                q,
                k,
                v,
                Some(mask),
                0.0,
                false,
                pattern.scale,
                false,
            )?)
        }
        Some(docs) => {
            // One sequence of B*T tokens: [B, H, T, D] -> [1, H, B*T, D], attended in blocks of
            // queries, each against the keys it can reach, so memory grows with the window or
            // the document, not with (B*T)^2.
            let flat = |x: &Tensor| x.transpose(0, 1).reshape([1, h, b * t, d]);
            let (q, k, v) = (flat(q), flat(k), flat(v));
            let mut out = Vec::new();
            for blk in docs.blocks(pattern, dev).iter() {
                let (qs, lo) = (blk.qs, blk.lo);
                out.push(Tensor::f_scaled_dot_product_attention(
                    &q.narrow(2, qs, blk.qe - qs),
                    &k.narrow(2, lo, blk.hi - lo),
                    &v.narrow(2, lo, blk.hi - lo),
                    Some(&blk.mask),
                    0.0,
                    false,
                    pattern.scale,
                    false,
                )?);
            }
            let y = Tensor::cat(&out, 2);
            Ok(y.view([h, b, t, d]).transpose(0, 1))
        }
    }
}

/// Queries per block on the SDPA path with documents.
const QUERY_BLOCK: i64 = 256;

/// `[n, n]` bool, true where query `i` (row) may see key `j` (column).
fn mask(n: i64, causal: bool, window: Option<i64>, dev: Device) -> Tensor {
    let pos = Tensor::arange(n, (Kind::Int64, dev));
    let (i, j) = (pos.unsqueeze(1), pos.unsqueeze(0));
    let back = &i - &j; // how far key j lies before query i
    let mut allowed = Tensor::ones([n, n], (Kind::Bool, dev));
    if causal {
        allowed = allowed.logical_and(&back.ge(0));
    }
    if let Some(w) = window {
        allowed = allowed.logical_and(&back.le(w));
    }
    allowed
}
