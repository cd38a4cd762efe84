//! The work of one training step on one rank, counted from a recipe at full scale and the
//! step's plan: matmul FLOPs by dtype, attention's computed tiles, the bytes of the memory-bound
//! work, the optimizer's, and what each rank sends. Nothing here is entered per record: a
//! record's count moves only where one of its recipe keys does.
use super::attention;
use crate::trainer::data::loader::Loader;
use crate::trainer::model::{fp8_mlp, precision};
use crate::trainer::optim::{adam_every, schedule::Plan};
use crate::trainer::recipe::Recipe;
use serde::Serialize;

/// Bytes of one activation element: the GPU runs' compute kind, bf16.
const ACT_BYTES: f64 = 2.0;
/// Bytes Adam moves per parameter and update: reads p, g, m, v and writes p, m, v in fp32.
const ADAM_BYTES: f64 = 28.0;
/// Bytes Muon's momentum (and NorMuon's moments) move per parameter: reads g, m, p, writes m, p.
const MUON_BYTES: f64 = 20.0;

/// One rank's work in one training step, by kind (the categories of `records profile`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Work {
    /// Forward and backward matmuls in bf16 (the projections, the MLP, the head).
    pub matmul_bf16_flops: f64,
    /// Matmuls on FP8 operands (#19's head: all three; #84's up-projection: its forward).
    pub matmul_fp8_flops: f64,
    /// QKᵀ and PV of the tiles a block-sparse kernel computes, forward and backward.
    pub attention_flops: f64,
    /// Muon's orthogonalisation (Newton–Schulz or Polar Express matmuls), this rank's share.
    pub orthogonalisation_flops: f64,
    /// Norms, elementwise, rotary, embeddings, softcap and the loss, forward and backward.
    pub other_bytes: f64,
    /// Adam's and Muon's updates, this rank's share.
    pub optimizer_bytes: f64,
    /// Sent by this rank: the gradients' reduce-scatter and the parameters' all-gather.
    pub comm_bytes: f64,
}

impl Work {
    /// Each field of `self` plus `k` times `other`'s.
    pub fn add(&mut self, other: &Work, k: f64) {
        self.matmul_bf16_flops += k * other.matmul_bf16_flops;
        self.matmul_fp8_flops += k * other.matmul_fp8_flops;
        self.attention_flops += k * other.attention_flops;
        self.orthogonalisation_flops += k * other.orthogonalisation_flops;
        self.other_bytes += k * other.other_bytes;
        self.optimizer_bytes += k * other.optimizer_bytes;
        self.comm_bytes += k * other.comm_bytes;
    }
}

/// What a layer holds, read from the recipe's per-layer patterns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Layer {
    /// None, or whether it takes the long window ('L') rather than the short ('S', 'P').
    pub attention: Option<bool>,
    pub mlp: bool,
    pub value_embed: bool,
}

/// The model's shapes at full scale.
#[derive(Debug, Clone, PartialEq)]
pub struct Shapes {
    pub width: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub vocab: usize,
    pub layers: Vec<Layer>,
    pub ranks: usize,
}

impl Shapes {
    pub fn of(r: &Recipe) -> Shapes {
        let at = |p: Option<&str>, i: usize| p.map(|s| s.as_bytes()[i]);
        let value_embed = r.value_embed.as_ref().map(|v| v.layers.as_str());
        let layers = (0..r.n_layer)
            .map(|i| Layer {
                attention: match at(r.attn_layers.as_deref(), i) {
                    Some(b'-') => None,
                    Some(c) => Some(c == b'L'),
                    None => Some(true),
                },
                mlp: at(r.mlp_layers.as_deref(), i) != Some(b'-'),
                value_embed: at(value_embed, i).is_some_and(|c| c != b'.'),
            })
            .collect();
        Shapes {
            width: r.n_embd,
            heads: r.n_head,
            head_dim: r.n_embd / r.n_head.max(1),
            vocab: r.padded_vocab_size,
            layers,
            ranks: r.reference_ranks.max(1),
        }
    }
}

/// One rank's work in the training step `plan` describes.
pub fn step(r: &Recipe, s: &Shapes, plan: &Plan) -> Work {
    let tokens = tokens_per_rank(r, s, plan);
    let n = tokens as f64;
    let (c, v) = (s.width as f64, s.vocab as f64);
    let mut w = Work::default();
    // Forward 2·in·out per token, backward twice that (the input's and the weight's gradient).
    let mm = |inp: f64, out: f64| 3.0 * 2.0 * n * inp * out;
    let doc = doc_len(r, plan);
    for layer in &s.layers {
        if let Some(long) = layer.attention {
            w.matmul_bf16_flops += mm(c, 3.0 * c) + mm(c, c);
            let window = window_of(r, plan, long);
            w.attention_flops += attention::layer_flops(tokens, doc, window, s.heads, s.head_dim);
        }
        if layer.mlp {
            let up = mm(c, 4.0 * c);
            let fp8 = if fp8_mlp::up(r) { up / 3.0 } else { 0.0 };
            w.matmul_fp8_flops += fp8;
            w.matmul_bf16_flops += up - fp8 + mm(4.0 * c, c);
        }
    }
    match r.fp8_head {
        Some(_) => w.matmul_fp8_flops += mm(c, v),
        None => w.matmul_bf16_flops += mm(c, v),
    }
    w.other_bytes = n * (activation_elements(r, s) * ACT_BYTES + loss_bytes(v));
    optimizer(r, s, &mut w);
    w
}

/// Tokens one rank trains on at this step: its share of the step's batch.
pub fn tokens_per_rank(r: &Recipe, s: &Shapes, plan: &Plan) -> usize {
    (r.batch_tokens as f64 * plan.batch_share / s.ranks as f64).round() as usize
}

/// The longest document a step's attention sees: the BOS loader's clipped documents (#26,
/// #72's schedule), else the row (llm.c's rows attend across documents). An upper bound where
/// FineWeb's documents are shorter than the clip.
fn doc_len(r: &Recipe, plan: &Plan) -> usize {
    match r.loader {
        Loader::Bos => plan.max_doc_len.unwrap_or(r.seq_len),
        Loader::Rows => r.seq_len,
    }
}

/// The keys a query sees in a layer at this step (0: all before it).
fn window_of(r: &Recipe, plan: &Plan, long: bool) -> usize {
    match (plan.windows, r.attn_window) {
        ((0, 0), Some(w)) => w + 1,
        ((0, 0), None) => 0,
        ((l, _), _) if long => l as usize,
        ((_, short), _) => short as usize,
    }
}

/// Activation elements the memory-bound work reads and writes per token, forward and backward,
/// counted as a compiled graph runs it: each fused region over width w reads its input and
/// writes its output (2w), and back reads both and writes the gradient (3w): 5w. A block's
/// regions: the residual join and norm before attention, q and k's norm and rotary, the value
/// embedding's join, the join and norm before the MLP, the MLP's activation (4C wide).
fn activation_elements(r: &Recipe, s: &Shapes) -> f64 {
    const REGION: f64 = 5.0;
    let c = s.width as f64;
    let mut e = REGION * c; // the embedding's gather (and the bigram's, the smear's, joined)
    for layer in &s.layers {
        if layer.attention.is_some() {
            let qk = r.qk_norm || r.rotary.is_some();
            e += REGION * c + if qk { REGION * 2.0 * c } else { 0.0 };
        }
        if layer.value_embed {
            e += REGION * c;
        }
        if layer.mlp {
            e += REGION * c + REGION * 4.0 * c;
        }
    }
    e + REGION * c // the final norm
}

/// Bytes of the loss over the logits per token: the head writes the logits in bf16, the loss
/// (softcap and cross-entropy in one pass) reads them and writes their gradient.
fn loss_bytes(vocab: f64) -> f64 {
    3.0 * vocab * ACT_BYTES
}

/// The optimizer's work and the step's communication on one rank.
fn optimizer(r: &Recipe, s: &Shapes, w: &mut Work) {
    let (c, v, ranks) = (s.width as f64, s.vocab as f64, s.ranks as f64);
    let ns_steps =
        r.muon.as_ref().map(|m| m.ns_steps).or(r.muon_classic.as_ref().map(|m| m.ns_steps));
    let mut matrices = Vec::new();
    for layer in &s.layers {
        if layer.attention.is_some() {
            matrices.extend([(c, c); 4]);
        }
        if layer.mlp {
            matrices.extend([(c, 4.0 * c); 2]);
        }
    }
    let matrix_params: f64 = matrices.iter().map(|(a, b)| a * b).sum();
    let tables = embedding_tables(r);
    let other_params = tables * v * c + bigram_rows(r) * c;
    let (adam_params, muon_params) = match ns_steps {
        Some(k) => {
            // Each rank orthogonalises its share of the matrices (upstream's Muon splits them
            // over ranks); per iteration A = X·Xᵀ, B = b·A + c·A², X = a·X + B·X: 4m²n + 2m³.
            let per: f64 = matrices.iter().map(|&(m, n)| 4.0 * m * m * n + 2.0 * m * m * m).sum();
            w.orthogonalisation_flops = k as f64 * per / ranks;
            (other_params, matrix_params)
        }
        None => (other_params + matrix_params, 0.0),
    };
    // Adam sharded over the ranks with Muon's records (#24's reduce-scatter), replicated in
    // llm.c's; every n-th step only with #39's.
    let adam_share = if r.muon.is_some() { 1.0 / ranks } else { 1.0 };
    let adam_every = adam_every::every(r) as f64;
    w.optimizer_bytes =
        adam_params * ADAM_BYTES * adam_share / adam_every + muon_params * MUON_BYTES / ranks;
    // Ring reduce-scatter and all-gather: each sends (R − 1)/R of the gradient and the
    // parameters, in the storage dtype.
    let grad_bytes = |bf16: bool| if bf16 { 2.0 } else { 4.0 };
    let p = precision::of(r);
    let bytes = matrix_params * grad_bytes(p.matrices) + other_params * grad_bytes(p.embeddings);
    w.comm_bytes = 2.0 * (ranks - 1.0) / ranks * bytes;
}

/// Vocabulary-sized tables: the embedding, the untied head, the value embeddings' tables.
fn embedding_tables(r: &Recipe) -> f64 {
    let own_head = r.untied_head || r.head_embed.is_some();
    let value_tables = r.value_embed.as_ref().map_or(0, |v| {
        v.layers.bytes().filter(u8::is_ascii_digit).collect::<std::collections::BTreeSet<_>>().len()
    });
    1.0 + f64::from(u8::from(own_head)) + value_tables as f64
}

/// Rows of the hashed bigram table (upstream #62).
fn bigram_rows(r: &Recipe) -> f64 {
    r.bigram_hash.as_ref().map_or(0.0, |b| (b.rows_per_vocab * r.padded_vocab_size) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trainer::optim::schedule::Schedule;
    use crate::trainer::recipe::Scale;
    use std::path::Path;

    fn full_recipe(record: &str) -> Recipe {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../records").join(record);
        let text = std::fs::read_to_string(&path).unwrap();
        Recipe::from_manifest_str(&text, Scale::Full, None).unwrap()
    }

    /// The first timed step's work, on the record's own ranks.
    fn first_timed(r: &Recipe) -> (Work, usize) {
        let (shapes, schedule) = (Shapes::of(r), Schedule::new(r));
        let plan = (0..schedule.steps()).map(|s| schedule.at(s)).find(|p| p.timed).unwrap();
        (step(r, &shapes, &plan), tokens_per_rank(r, &shapes, &plan))
    }

    #[test]
    fn record_1_s_matmuls_are_six_n_t_and_its_attention_the_causal_tiles() {
        let r = full_recipe("01.toml");
        let (w, tokens) = first_timed(&r);
        assert_eq!(tokens, 524_288 / 8);
        let (t, c, v) = (tokens as f64, 768.0, 50_304.0);
        // N: each block's qkv (3C²), out (C²), MLP (4C² twice); the tied head (C·V).
        let n = 12.0 * 12.0 * c * c + c * v;
        assert_eq!(w.matmul_bf16_flops, 6.0 * n * t);
        assert_eq!(w.matmul_fp8_flops, 0.0);
        // Rows of 1,024 attend causally across documents: 8 query tiles see 1+2+...+8 = 36
        // tiles of 128², at 4·C per pair forward (QKᵀ, PV) and 2.5 forwards back.
        let rows = t / 1024.0;
        let pairs = rows * 36.0 * 128.0 * 128.0;
        assert_eq!(w.attention_flops, 12.0 * pairs * 4.0 * c * 3.5);
        // AdamW on every parameter (no Muon): no orthogonalisation, every rank updates all.
        assert_eq!(w.orthogonalisation_flops, 0.0);
    }

    #[test]
    fn record_84_s_fp8_is_the_head_and_the_up_projection_s_forward() {
        let r = full_recipe("84.toml");
        assert!(fp8_mlp::up(&r) && r.fp8_head.is_some());
        let (w, tokens) = first_timed(&r);
        let (t, c, v) = (tokens as f64, r.n_embd as f64, r.padded_vocab_size as f64);
        let mlps = Shapes::of(&r).layers.iter().filter(|l| l.mlp).count() as f64;
        // The head: forward and both gradients (6·C·V per token); the up-projection (C→4C):
        // its forward only (2·C·4C per token).
        let fp8 = 6.0 * c * v * t + mlps * 2.0 * c * 4.0 * c * t;
        assert!((w.matmul_fp8_flops - fp8).abs() < 1e-9 * fp8, "{} vs {fp8}", w.matmul_fp8_flops);
        // Turning FP8 off moves those FLOPs to bf16 and changes nothing else.
        let mut bf16 = r.clone();
        (bf16.fp8_mlp, bf16.fp8_head) = (None, None);
        let (b, _) = first_timed(&bf16);
        assert_eq!(b.matmul_fp8_flops, 0.0);
        let total = w.matmul_bf16_flops + w.matmul_fp8_flops;
        assert!((b.matmul_bf16_flops - total).abs() < 1e-9 * total);
        assert_eq!((b.attention_flops, b.other_bytes), (w.attention_flops, w.other_bytes));
    }
}
