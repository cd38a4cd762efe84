//! Record #1's loader (llm.c): contiguous rows of T+1 tokens, targets shifted by one, no
//! document alignment (attention crosses document boundaries).
//!
//! The training stream is a global order of rows (shards in order, each shard's rows shuffled
//! once per epoch with a fixed seed). Optimizer step `s` takes the next `R = batch_tokens / T`
//! rows; micro-batch `m` of rank `r` gets rows `[(m·W + r)·B, +B)` of them. The rows a step sees
//! therefore do not depend on how they are split over ranks and micro-batches, which is what makes
//! 2 ranks equal 1 rank with 2x accumulation. (llm.c shuffles with mt19937 seeded per rank; the
//! statistics are the same, the exact order is ours.)
//!
//! The recipe's `loader` picks it or, from upstream #26 (in #29's form), whole documents packed
//! behind a BOS token (packed.rs), which the attention keeps apart; batches.rs builds the one
//! chosen. Act 1's stream (stream.rs) reads rows too.
use crate::recipe::registry::{technique, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use {
    crate::device::upload,
    anyhow::{bail, Context, Result},
    corpus::{shard::Shard, synthetic::SplitMix64},
    std::path::PathBuf,
    tch::{Device, Kind, Tensor},
};

/// `loader = "bos"`: which loader feeds training.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Loader {
    /// llm.c: rows of seq_len tokens, attention crosses documents (this file).
    #[default]
    Rows,
    /// Upstream #26/#29: each micro-batch is one packed sequence of batch_rows·seq_len tokens
    /// made of whole documents from a BOS, each clipped to seq_len (max_doc_len); attention stays
    /// inside documents.
    Bos,
}

pub const TECHNIQUE: Technique = technique("loader", &[26, 29], &["attn_layers", "val_seq_len"]);

/// A micro-batch: inputs and targets, both [B, T] int64.
#[cfg(not(recipe_only))]
pub struct Batch {
    pub inputs: Tensor,
    pub targets: Tensor,
}

#[cfg(not(recipe_only))]
pub struct TrainLoader {
    shards: Vec<Shard>,
    seq_len: usize,
    rows_per_micro: usize,
    rank: usize,
    ranks: usize,
    seed: u64,
    epoch: u64,
    shard: usize,
    order: Vec<usize>,
    /// Next row of `order` to hand out.
    cursor: usize,
}

#[cfg(not(recipe_only))]
impl TrainLoader {
    pub fn new(
        files: &[PathBuf],
        seq_len: usize,
        rows_per_micro: usize,
        rank: usize,
        ranks: usize,
        seed: u64,
    ) -> Result<Self> {
        let shards = open_all(files)?;
        if let Some(s) = shards.iter().find(|s| s.len() <= seq_len) {
            bail!(
                "{}: {} tokens is shorter than one row of {} tokens",
                s.path().display(),
                s.len(),
                seq_len + 1
            );
        }
        let mut l = TrainLoader {
            shards,
            seq_len,
            rows_per_micro,
            rank,
            ranks,
            seed,
            epoch: 0,
            shard: 0,
            order: Vec::new(),
            cursor: 0,
        };
        l.load_shard(0);
        Ok(l)
    }

    fn load_shard(&mut self, i: usize) {
        let n_rows = (self.shards[i].len() - 1) / self.seq_len;
        let mut rng = SplitMix64(self.seed ^ (self.epoch << 32) ^ i as u64);
        self.order = (0..n_rows).collect();
        for k in (1..n_rows).rev() {
            self.order.swap(k, rng.below(k + 1));
        }
        self.shard = i;
        self.cursor = 0;
    }

    /// The next global row (start offset), moving to the next shard/epoch as needed.
    fn next_row(&mut self) -> (usize, usize) {
        if self.cursor == self.order.len() {
            let next = (self.shard + 1) % self.shards.len();
            if next == 0 {
                self.epoch += 1;
            }
            self.load_shard(next);
        }
        let row = self.order[self.cursor];
        self.cursor += 1;
        (self.shard, row * self.seq_len)
    }

    /// This rank's micro-batches for one optimizer step: `accum` batches of [B, T].
    pub fn next_step(&mut self, accum: usize, device: Device) -> Vec<Batch> {
        let b = self.rows_per_micro;
        let mut out = Vec::with_capacity(accum);
        for _ in 0..accum {
            let mut rows = Vec::with_capacity(b);
            for slot in 0..self.ranks * b {
                let row = self.next_row();
                if slot / b == self.rank {
                    rows.push(row);
                }
            }
            out.push(self.gather(&rows, device));
        }
        out
    }

    fn gather(&self, rows: &[(usize, usize)], device: Device) -> Batch {
        let t = self.seq_len;
        let mut buf: Vec<i64> = Vec::with_capacity(rows.len() * (t + 1));
        for &(s, start) in rows {
            buf.extend(self.shards[s].tokens()[start..start + t + 1].iter().map(|&x| x as i64));
        }
        to_batch(buf, rows.len(), t, device)
    }
}

/// Validation rows: the first `val_tokens` of the val shards, in rows of T; rank r takes rows
/// r, r+W, ... (llm.c: offset rank·B·T, stride W·B·T), B rows per batch.
#[cfg(not(recipe_only))]
pub struct ValLoader {
    tokens: Vec<u16>,
    seq_len: usize,
    rows_per_batch: usize,
    rank: usize,
    ranks: usize,
    /// The rows evaluated, in order: all of them, or reference rank 0's (a1).
    rows: Vec<usize>,
}

#[cfg(not(recipe_only))]
impl ValLoader {
    pub fn new(
        files: &[PathBuf],
        val_tokens: usize,
        seq_len: usize,
        rows_per_batch: usize,
        rank: usize,
        ranks: usize,
    ) -> Result<Self> {
        let mut tokens = Vec::with_capacity(val_tokens + 1);
        for shard in open_all(files)? {
            let need = (val_tokens + 1).saturating_sub(tokens.len());
            tokens.extend_from_slice(&shard.tokens()[..need.min(shard.len())]);
        }
        if tokens.len() < val_tokens + 1 {
            bail!(
                "val shards hold {} tokens but the recipe asks for val_tokens = {val_tokens}",
                tokens.len()
            );
        }
        let per_batch = rows_per_batch * seq_len * ranks;
        if !val_tokens.is_multiple_of(per_batch) {
            bail!("recipe.val_tokens = {val_tokens} is not a multiple of batch_rows x seq_len x ranks = {per_batch}");
        }
        let rows = (0..val_tokens / seq_len).collect();
        Ok(ValLoader { tokens, seq_len, rows_per_batch, rank, ranks, rows })
    }

    /// Only the rows upstream's rank 0 reads when `ranks` reference ranks take `b` rows each in
    /// turn: rows [0, b), [ranks·b, ranks·b + b), ... (Act 1's a1 prints rank 0's own val loss,
    /// never all-reduced). Our ranks still share them and average.
    pub fn reference_rank0(mut self, b: usize, ranks: usize) -> Result<Self> {
        self.rows.retain(|r| (r / b.max(1)).is_multiple_of(ranks.max(1)));
        let per_batch = self.rows_per_batch * self.ranks;
        if !self.rows.len().is_multiple_of(per_batch) {
            bail!(
                "reference rank 0's {} val rows do not split into batches of {} rows on {} ranks",
                self.rows.len(),
                self.rows_per_batch,
                self.ranks
            );
        }
        Ok(self)
    }

    /// Batches this rank evaluates; every rank gets the same number.
    pub fn batches(&self, device: Device) -> impl Iterator<Item = Batch> + '_ {
        let (t, b) = (self.seq_len, self.rows_per_batch);
        let my_rows: Vec<usize> =
            self.rows.iter().copied().skip(self.rank).step_by(self.ranks).collect();
        let n_batches = self.rows.len() / (b * self.ranks);
        (0..n_batches).map(move |i| {
            let mut buf = Vec::with_capacity(b * (t + 1));
            for &row in &my_rows[i * b..(i + 1) * b] {
                buf.extend(self.tokens[row * t..row * t + t + 1].iter().map(|&x| x as i64));
            }
            to_batch(buf, b, t, device)
        })
    }
}

#[cfg(not(recipe_only))]
pub(super) fn open_all(files: &[PathBuf]) -> Result<Vec<Shard>> {
    if files.is_empty() {
        bail!("no shard files given");
    }
    files
        .iter()
        .map(|f| Shard::open(f).with_context(|| format!("opening shard {}", f.display())))
        .collect()
}

/// `buf` holds `rows` windows of T+1 tokens -> inputs/targets [rows, T].
#[cfg(not(recipe_only))]
pub(super) fn to_batch(buf: Vec<i64>, rows: usize, t: usize, device: Device) -> Batch {
    let all = Tensor::from_slice(&buf).view([rows as i64, t as i64 + 1]);
    let inputs = upload(&all.narrow(1, 0, t as i64).to_kind(Kind::Int64), device);
    let targets = upload(&all.narrow(1, 1, t as i64).to_kind(Kind::Int64), device);
    Batch { inputs, targets }
}

#[cfg(all(test, not(recipe_only)))]
mod tests {
    use super::*;

    fn shard_with(dir: &std::path::Path, name: &str, n: usize) -> PathBuf {
        let path = dir.join(name);
        let tokens: Vec<u16> = (0..n).map(|i| i as u16).collect();
        corpus::shard::write_shard(&path, &tokens).unwrap();
        path
    }

    fn rows(batches: &[Batch]) -> Vec<i64> {
        let mut firsts: Vec<i64> = batches
            .iter()
            .flat_map(|b| Vec::<i64>::try_from(b.inputs.select(1, 0)).unwrap())
            .collect();
        firsts.sort();
        firsts
    }

    #[test]
    fn targets_are_inputs_shifted_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let f = shard_with(dir.path(), "t_train_000001.bin", 1000);
        let mut l = TrainLoader::new(&[f], 8, 2, 0, 1, 7).unwrap();
        let b = &l.next_step(1, Device::Cpu)[0];
        assert_eq!(b.inputs.size(), [2, 8]);
        let diff = (&b.targets - &b.inputs).eq(1).all().int64_value(&[]);
        assert_eq!(diff, 1);
    }

    /// The rows of a step are the same set however they are split over ranks and micro-batches.
    #[test]
    fn ranks_and_accumulation_see_the_same_rows() {
        let dir = tempfile::tempdir().unwrap();
        let f = shard_with(dir.path(), "t_train_000001.bin", 4001);
        let mut one = TrainLoader::new(std::slice::from_ref(&f), 10, 2, 0, 1, 3).unwrap();
        let mut r0 = TrainLoader::new(std::slice::from_ref(&f), 10, 2, 0, 2, 3).unwrap();
        let mut r1 = TrainLoader::new(&[f], 10, 2, 1, 2, 3).unwrap();
        for _ in 0..30 {
            let a = rows(&one.next_step(2, Device::Cpu));
            let mut b = rows(&r0.next_step(1, Device::Cpu));
            b.extend(rows(&r1.next_step(1, Device::Cpu)));
            b.sort();
            assert_eq!(a, b);
        }
    }

    #[test]
    fn val_rows_are_split_across_ranks_without_overlap() {
        let dir = tempfile::tempdir().unwrap();
        let f = shard_with(dir.path(), "t_val_000000.bin", 200);
        let all: Vec<i64> = rows(
            &ValLoader::new(std::slice::from_ref(&f), 160, 10, 2, 0, 1)
                .unwrap()
                .batches(Device::Cpu)
                .collect::<Vec<_>>(),
        );
        let mut split = rows(
            &ValLoader::new(std::slice::from_ref(&f), 160, 10, 2, 0, 2)
                .unwrap()
                .batches(Device::Cpu)
                .collect::<Vec<_>>(),
        );
        split.extend(rows(
            &ValLoader::new(&[f], 160, 10, 2, 1, 2)
                .unwrap()
                .batches(Device::Cpu)
                .collect::<Vec<_>>(),
        ));
        split.sort();
        assert_eq!(all, split);
        assert_eq!(all.len(), 16);
    }

    /// a1: of 16 rows read by two reference ranks 2 rows at a time, rank 0's are rows 0, 1, 4,
    /// 5, ...; one rank or two of ours evaluate exactly those.
    #[test]
    fn val_rows_of_reference_rank_0() {
        let dir = tempfile::tempdir().unwrap();
        let f = shard_with(dir.path(), "t_val_000000.bin", 200);
        let val = |rank, ranks| {
            let l = ValLoader::new(std::slice::from_ref(&f), 160, 10, 2, rank, ranks).unwrap();
            rows(&l.reference_rank0(2, 2).unwrap().batches(Device::Cpu).collect::<Vec<_>>())
        };
        let one = val(0, 1);
        assert_eq!(one, [0, 10, 40, 50, 80, 90, 120, 130]);
        let mut two = val(0, 2);
        two.extend(val(1, 2));
        two.sort();
        assert_eq!(two, one);
        let l = ValLoader::new(&[f], 160, 10, 2, 0, 8).unwrap();
        let err = l.reference_rank0(2, 2).err().unwrap().to_string();
        let want = "reference rank 0's 8 val rows do not split into batches of 2 rows on 8 ranks";
        assert_eq!(err, want);
    }
}
