//! Record #29's data path: BOS-aligned, document-packed micro-batches (upstream record #26's
//! `BOSFinder`, with #29's `max_doc_len` clip and fixed-size padded `cu_seqlens`).
//!
//! Train: a micro-batch is one flat sequence of N tokens made of documents that start at BOS
//! tokens. Piece k is `[bos_k, min(bos_{k+1}, bos_k + max_doc_len, bos_k + remaining + 1))`,
//! taken until exactly N + 1 tokens are gathered; what a clip cuts off is discarded and the next
//! piece starts at the next BOS. Targets are the buffer shifted by one and cross piece boundaries
//! unmasked. `cu_seqlens` always has `padded_doc_slots(N)` entries (one shape for every step),
//! padded with N (zero-length trailing documents). Upstream #78 pads to 64, 96 or 128 slots for
//! 16k, 32k or 48k tokens instead (FineWeb's documents never fill more); padding changes no
//! number.
//!
//! Rank independence (as in `loader.rs`): a step is `ranks * accum` micro-batch slots built in
//! order from one cursor that every rank walks; slot `m * ranks + r` is rank r's micro-batch m,
//! so 8 ranks x 1 is upstream's r = 0..7 order. When the shard's BOS run out mid-step, the whole
//! step is rebuilt from the next shard's start and the old tail is dropped (upstream drops the
//! world_size micro-batches of that call: the same thing at 8 x 1). Shards are read in order in
//! a single pass, then we wrap to the first shard (upstream never wraps; its run ends first).
//!
//! Val: upstream's unaligned path: contiguous windows, documents start at the BOS positions.
use anyhow::{bail, ensure, Context, Result};
use corpus::shard::Shard;
use std::path::PathBuf;
use tch::{Device, Tensor};

/// One packed micro-batch of N tokens.
pub struct Packed {
    /// [1, N] int64.
    pub inputs: Tensor,
    /// [1, N] int64: the packed buffer shifted by one.
    pub targets: Tensor,
    /// padded_doc_slots(N) offsets on the host: 0, the document ends (last = N), then N.
    /// `attend::Docs::from_offsets` takes them to the device.
    pub cu_seqlens: Vec<i32>,
}

/// Fixed cu_seqlens length for N tokens: upstream's `max_num_docs =
/// next_multiple_of_n(N // 300, n=128)` (median document ~400 tokens), which is at least 128.
pub fn padded_doc_slots(tokens: usize) -> usize {
    (tokens / 300).next_multiple_of(128).max(128)
}

/// Boundaries `[0, ..., N]` padded with N to `padded_doc_slots(N)` int32 entries.
fn padded(bounds: &[usize], n: usize, what: &str) -> Result<Vec<i32>> {
    let slots = padded_doc_slots(n);
    ensure!(
        bounds.len() <= slots,
        "{what}: {} documents need {} cu_seqlens entries, but {n} tokens pad to {slots}",
        bounds.len() - 1,
        bounds.len()
    );
    let mut cu: Vec<i32> = bounds
        .iter()
        .map(|&b| i32::try_from(b))
        .collect::<Result<_, _>>()
        .context("document boundaries overflow int32")?;
    cu.resize(slots, i32::try_from(n).context("tokens overflow int32")?);
    Ok(cu)
}

/// `buf` (N + 1 tokens) -> inputs `buf[..N]`, targets `buf[1..]`, both [1, N].
fn pack(buf: &[u16], cu: &[i32], device: Device) -> Packed {
    let n = buf.len() as i64 - 1;
    let all = Tensor::from_slice(&buf.iter().map(|&t| i64::from(t)).collect::<Vec<_>>());
    Packed {
        inputs: crate::device::upload(&all.narrow(0, 0, n).view([1, n]), device),
        targets: crate::device::upload(&all.narrow(0, 1, n).view([1, n]), device),
        cu_seqlens: cu.to_vec(),
    }
}

/// Positions of `bos` in `toks`.
fn bos_positions(toks: &[u16], bos: u16) -> impl Iterator<Item = usize> + '_ {
    toks.iter().enumerate().filter(move |&(_, &t)| t == bos).map(|(p, _)| p)
}

fn open(files: &[PathBuf]) -> Result<Vec<Shard>> {
    ensure!(!files.is_empty(), "no shard files given");
    files
        .iter()
        .map(|f| Shard::open(f).with_context(|| format!("opening shard {}", f.display())))
        .collect()
}

/// A micro-batch as `(start, end)` token ranges of the current shard.
type Pieces = Vec<(usize, usize)>;
/// A micro-batch's pieces and its cu_seqlens.
type Micro = (Pieces, Vec<i32>);

pub struct BosLoader {
    shards: Vec<Shard>,
    tokens: usize,
    max_doc_len: usize,
    bos: u16,
    rank: usize,
    ranks: usize,
    /// Current shard, its BOS positions, and the index of the next unused one.
    shard: usize,
    bos_at: Vec<usize>,
    next: usize,
    /// Steps handed out so far, for error messages.
    step: usize,
}

impl BosLoader {
    pub fn new(
        files: &[PathBuf],
        tokens: usize,
        max_doc_len: usize,
        bos: u16,
        rank: usize,
        ranks: usize,
    ) -> Result<Self> {
        ensure!(
            tokens > 0 && max_doc_len > 0,
            "BosLoader needs tokens and max_doc_len > 0, got {tokens} and {max_doc_len}"
        );
        ensure!(rank < ranks, "rank {rank} is not below ranks = {ranks}");
        let shards = open(files)?;
        let mut l = BosLoader {
            shards,
            tokens,
            max_doc_len,
            bos,
            rank,
            ranks,
            shard: 0,
            bos_at: Vec::new(),
            next: 0,
            step: 0,
        };
        l.load(0)?;
        Ok(l)
    }

    fn load(&mut self, i: usize) -> Result<()> {
        let s = &self.shards[i];
        self.bos_at = bos_positions(s.tokens(), self.bos).collect();
        ensure!(
            !self.bos_at.is_empty(),
            "{}: no BOS token ({}) in its {} tokens",
            s.path().display(),
            self.bos,
            s.len()
        );
        (self.shard, self.next) = (i, 0);
        Ok(())
    }

    /// The next micro-batch's pieces from BOS index `*next`; `None` when the BOS run out first.
    fn pieces(&self, next: &mut usize) -> Option<Pieces> {
        let (mut out, mut len) = (Vec::new(), 0);
        while len <= self.tokens {
            let start = *self.bos_at.get(*next)?;
            let doc_end =
                self.bos_at.get(*next + 1).copied().unwrap_or(self.shards[self.shard].len());
            let end = doc_end.min(start + self.max_doc_len).min(start + self.tokens - len + 1);
            out.push((start, end));
            len += end - start;
            *next += 1;
        }
        Some(out)
    }

    /// All `slots` of a step from the cursor, keeping this rank's pieces and cu_seqlens; `None`
    /// if the shard runs out. Every slot is checked, so that all ranks fail alike.
    fn build(&self, slots: usize) -> Result<Option<(Vec<Micro>, usize)>> {
        let (mut next, mut mine) = (self.next, Vec::new());
        for slot in 0..slots {
            let Some(p) = self.pieces(&mut next) else { return Ok(None) };
            let mut bounds = vec![0];
            for &(a, b) in &p {
                bounds.push(bounds[bounds.len() - 1] + b - a);
            }
            // The last token is only a target, so the last document ends at N (p is not empty).
            let last = bounds.len() - 1;
            bounds[last] -= 1;
            let cu = padded(&bounds, self.tokens, &format!("step {} slot {slot}", self.step))?;
            if slot % self.ranks == self.rank {
                mine.push((p, cu));
            }
        }
        Ok(Some((mine, next)))
    }

    /// Micro-batches of `tokens` from the next step on (upstream #46's batch schedule).
    pub fn resize(&mut self, tokens: usize) -> Result<()> {
        ensure!(tokens > 0, "BosLoader needs tokens > 0");
        self.tokens = tokens;
        Ok(())
    }

    /// Documents clipped to `max_doc_len` from the next step on (upstream #72: 896 tokens in
    /// the first stage).
    pub fn clip_docs(&mut self, max_doc_len: usize) -> Result<()> {
        ensure!(max_doc_len > 0, "BosLoader needs max_doc_len > 0");
        self.max_doc_len = max_doc_len;
        Ok(())
    }

    /// This rank's `accum` micro-batches for the next optimizer step.
    pub fn next_step(&mut self, accum: usize, device: Device) -> Result<Vec<Packed>> {
        ensure!(accum > 0, "accum must be at least 1");
        let slots = self.ranks * accum;
        let (mine, next) = loop {
            if let Some(built) = self.build(slots)? {
                break built;
            }
            if self.next == 0 {
                let s = &self.shards[self.shard];
                bail!(
                    "step {}: {} ({} tokens, {} BOS) cannot fill one step of {slots} micro-batches of {} tokens",
                    self.step,
                    s.path().display(),
                    s.len(),
                    self.bos_at.len(),
                    self.tokens + 1
                );
            }
            self.load((self.shard + 1) % self.shards.len())?;
        };
        self.next = next;
        let toks = self.shards[self.shard].tokens();
        self.step += 1;
        Ok(mine
            .iter()
            .map(|(pieces, cu)| {
                let buf: Vec<u16> =
                    pieces.iter().flat_map(|&(a, b)| &toks[a..b]).copied().collect();
                pack(&buf, cu, device)
            })
            .collect())
    }
}

/// Validation windows of this rank with their cu_seqlens, built (and checked) once.
pub struct PackedVal {
    windows: Vec<(Vec<u16>, Vec<i32>)>,
}

impl PackedVal {
    pub fn new(
        files: &[PathBuf],
        val_tokens: usize,
        tokens_per_batch: usize,
        bos: u16,
        rank: usize,
        ranks: usize,
    ) -> Result<Self> {
        ensure!(rank < ranks, "rank {rank} is not below ranks = {ranks}");
        let per_call = ranks * tokens_per_batch;
        ensure!(
            per_call > 0 && val_tokens > 0 && val_tokens.is_multiple_of(per_call),
            "val_tokens = {val_tokens} is not a positive multiple of ranks x tokens_per_batch = {per_call}"
        );
        let mut tokens = Vec::with_capacity(val_tokens + 1);
        for shard in open(files)? {
            let need = (val_tokens + 1 - tokens.len()).min(shard.len());
            tokens.extend_from_slice(&shard.tokens()[..need]);
        }
        ensure!(
            tokens.len() > val_tokens,
            "val shards hold {} tokens, need val_tokens + 1 = {}",
            tokens.len(),
            val_tokens + 1
        );
        let n = tokens_per_batch;
        let mut windows = Vec::new();
        // Every rank's windows are checked, so that all ranks fail alike.
        for call in 0..val_tokens / per_call {
            for r in 0..ranks {
                let buf = &tokens[call * per_call + r * n..][..n + 1];
                let docs = bos_positions(&buf[..n], bos);
                let bounds: Vec<usize> = std::iter::once(0).chain(docs).chain([n]).collect();
                let cu = padded(&bounds, n, &format!("val call {call} rank {r}"))?;
                if r == rank {
                    windows.push((buf.to_vec(), cu));
                }
            }
        }
        Ok(PackedVal { windows })
    }

    /// This rank's batches; every rank gets the same number.
    pub fn batches(&self, device: Device) -> impl Iterator<Item = Packed> + '_ {
        self.windows.iter().map(move |(buf, cu)| pack(buf, cu, device))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::attend::Docs;
    use std::path::Path;

    const BOS: u16 = 1;

    /// A shard of documents of the given lengths (BOS + body); a body token is `base + p % 30000`
    /// at position p, so it names its position.
    fn shard(dir: &Path, name: &str, lens: &[usize], base: u16) -> (PathBuf, Vec<u16>) {
        let mut toks = Vec::new();
        for &len in lens {
            toks.push(BOS);
            for _ in 1..len {
                toks.push(base + (toks.len() % 30000) as u16);
            }
        }
        let path = dir.join(name);
        corpus::shard::write_shard(&path, &toks).unwrap();
        (path, toks)
    }

    fn ints(t: &Tensor) -> Vec<i64> {
        Vec::<i64>::try_from(t.flatten(0, -1).to_kind(tch::Kind::Int64)).unwrap()
    }

    fn cat(toks: &[u16], ranges: &[(usize, usize)]) -> Vec<i64> {
        ranges.iter().flat_map(|&(a, b)| toks[a..b].iter().map(|&t| i64::from(t))).collect()
    }

    /// Checks inputs/targets against `buf` (N + 1 tokens) and the leading cu_seqlens entries.
    fn check(p: &Packed, buf: &[i64], bounds: &[i64]) {
        let n = buf.len() - 1;
        assert_eq!(p.inputs.size(), [1, n as i64]);
        assert_eq!(ints(&p.inputs), buf[..n]);
        assert_eq!(ints(&p.targets), buf[1..]);
        let cu: Vec<i64> = p.cu_seqlens.iter().map(|&c| i64::from(c)).collect();
        assert_eq!(cu.len(), padded_doc_slots(n));
        assert_eq!(cu[..bounds.len()], *bounds);
        assert!(cu[bounds.len()..].iter().all(|&c| c == n as i64));
        assert_eq!(Docs::from_offsets(&p.cu_seqlens, Device::Cpu).unwrap().total(), n as i64);
    }

    #[test]
    fn pieces_are_clipped_and_the_last_is_shortened() {
        let dir = tempfile::tempdir().unwrap();
        // Documents start at 0, 5, 17, 24, 30, 39 (47 tokens); N = 16, max_doc_len = 8.
        let (f, toks) = shard(dir.path(), "a.bin", &[5, 12, 7, 6, 9, 8], 10);
        let mut l = BosLoader::new(&[f], 16, 8, BOS, 0, 1).unwrap();
        let step = l.next_step(2, Device::Cpu).unwrap();
        // Doc 2 is clipped to 8 (its tail 13..17 is skipped); doc 3 is cut at N + 1 = 17 tokens.
        check(&step[0], &cat(&toks, &[(0, 5), (5, 13), (17, 21)]), &[0, 5, 13, 16]);
        // The next micro-batch starts at the next BOS (24), not at 21.
        check(&step[1], &cat(&toks, &[(24, 30), (30, 38), (39, 42)]), &[0, 6, 14, 16]);
    }

    /// Upstream #72: the longest document changes between steps; the next step clips to it.
    #[test]
    fn documents_clip_to_the_steps_length() {
        let dir = tempfile::tempdir().unwrap();
        let (f, toks) = shard(dir.path(), "a.bin", &[5, 12, 7, 6, 9, 8], 10);
        let mut l = BosLoader::new(&[f], 16, 8, BOS, 0, 1).unwrap();
        l.clip_docs(4).unwrap();
        let step = l.next_step(1, Device::Cpu).unwrap();
        // Every piece at most 4 tokens: 0..4, 5..9, 17..21, 24..28, then 30 cut at N + 1 = 17.
        check(
            &step[0],
            &cat(&toks, &[(0, 4), (5, 9), (17, 21), (24, 28), (30, 31)]),
            &[0, 4, 8, 12, 16],
        );
        assert!(l.clip_docs(0).is_err());
    }

    #[test]
    fn cu_seqlens_pad_to_upstream_sizes() {
        assert_eq!(padded_doc_slots(49_152), 256);
        assert_eq!(padded_doc_slots(262_144), 896);
        assert_eq!(padded_doc_slots(100), 128);
        let dir = tempfile::tempdir().unwrap();
        let (f, toks) = shard(dir.path(), "a.bin", &[1000; 60], 10);
        let p = BosLoader::new(&[f], 49_152, 2048, BOS, 0, 1)
            .unwrap()
            .next_step(1, Device::Cpu)
            .unwrap();
        let bounds: Vec<i64> = (0..50).map(|k| k * 1000).chain([49_152]).collect();
        check(&p[0], &cat(&toks, &[(0, 49_153)]), &bounds);
        assert_eq!(Docs::from_offsets(&p[0].cu_seqlens, Device::Cpu).unwrap().max_len(), 1000);
    }

    #[test]
    fn running_out_of_bos_rebuilds_the_step_from_the_next_shard_then_wraps() {
        let dir = tempfile::tempdir().unwrap();
        let (a, ta) = shard(dir.path(), "a.bin", &[8; 7], 10);
        let (b, tb) = shard(dir.path(), "b.bin", &[8; 7], 31000);
        let mut l = BosLoader::new(&[a, b], 16, 8, BOS, 0, 1).unwrap();
        let first = cat(&ta, &[(0, 17)]);
        check(&l.next_step(1, Device::Cpu).unwrap()[0], &first, &[0, 8, 16]);
        // Micro-batch 0 fits in a[24..41], but micro-batch 1 finds only a[48..56]: the whole
        // step is rebuilt from b's start.
        let step = l.next_step(2, Device::Cpu).unwrap();
        check(&step[0], &cat(&tb, &[(0, 17)]), &[0, 8, 16]);
        check(&step[1], &cat(&tb, &[(24, 41)]), &[0, 8, 16]);
        check(&l.next_step(1, Device::Cpu).unwrap()[0], &first, &[0, 8, 16]);
    }

    /// 1 x 4, 2 x 2 and 4 x 1 hand out the same micro-batches, slot by slot, across shard changes.
    #[test]
    fn ranks_and_accumulation_see_the_same_slots() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = corpus::synthetic::SplitMix64(5);
        let mut lens = |_| (0..60).map(|_| 1 + rng.below(100)).collect::<Vec<_>>();
        let files = [
            shard(dir.path(), "a.bin", &lens(0), 10).0,
            shard(dir.path(), "b.bin", &lens(1), 31000).0,
        ];
        let slots = |ranks: usize, accum: usize| -> Vec<Vec<(Vec<i64>, Vec<i32>)>> {
            let mut ls: Vec<_> = (0..ranks)
                .map(|r| BosLoader::new(&files, 64, 40, BOS, r, ranks).unwrap())
                .collect();
            (0..30)
                .map(|_| {
                    let per: Vec<_> =
                        ls.iter_mut().map(|l| l.next_step(accum, Device::Cpu).unwrap()).collect();
                    (0..ranks * accum)
                        .map(|s| &per[s % ranks][s / ranks])
                        .map(|p| (ints(&p.inputs), p.cu_seqlens.clone()))
                        .collect()
                })
                .collect()
        };
        let one = slots(1, 4);
        assert_eq!(one, slots(2, 2));
        assert_eq!(one, slots(4, 1));
        assert_ne!(one[0][0], one[0][1]);
    }

    #[test]
    fn val_windows_per_rank_and_their_documents() {
        let dir = tempfile::tempdir().unwrap();
        // BOS at 0, 3, 8, 12, 18, 25; 2 ranks x 8 tokens, 2 calls.
        let (f, toks) = shard(dir.path(), "v.bin", &[3, 5, 4, 6, 7, 9], 10);
        let val = |r| PackedVal::new(std::slice::from_ref(&f), 32, 8, BOS, r, 2).unwrap();
        let (r0, r1): (Vec<_>, Vec<_>) =
            (val(0).batches(Device::Cpu).collect(), val(1).batches(Device::Cpu).collect());
        assert_eq!((r0.len(), r1.len()), (2, 2));
        check(&r0[0], &cat(&toks, &[(0, 9)]), &[0, 0, 3, 8]);
        check(&r1[0], &cat(&toks, &[(8, 17)]), &[0, 0, 4, 8]);
        check(&r0[1], &cat(&toks, &[(16, 25)]), &[0, 2, 8]);
        check(&r1[1], &cat(&toks, &[(24, 33)]), &[0, 1, 8]);
        let err = PackedVal::new(&[f], 24, 8, BOS, 0, 2).err().unwrap();
        assert!(err.to_string().contains("not a positive multiple"), "{err}");
    }

    #[test]
    fn bad_shards_and_too_many_documents_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain.bin");
        corpus::shard::write_shard(&plain, &[5; 100]).unwrap();
        let err = BosLoader::new(&[plain], 16, 8, BOS, 0, 1).err().unwrap();
        assert!(err.to_string().contains("no BOS token"), "{err}");

        let (small, _) = shard(dir.path(), "small.bin", &[5, 5], 10);
        let err = BosLoader::new(&[small], 16, 8, BOS, 0, 1)
            .unwrap()
            .next_step(1, Device::Cpu)
            .err()
            .unwrap();
        assert!(err.to_string().contains("cannot fill one step"), "{err}");

        // 300 tokens pad to 128 entries; 2-token documents need 151.
        let (tiny, toks) = shard(dir.path(), "tiny.bin", &[2; 400], 10);
        let err = BosLoader::new(std::slice::from_ref(&tiny), 300, 8, BOS, 1, 2)
            .unwrap()
            .next_step(1, Device::Cpu)
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("slot 0: 151 documents need 152 cu_seqlens entries"),
            "{err}"
        );
        assert!(toks.len() > 301);
        let err = PackedVal::new(&[tiny], 300, 300, BOS, 0, 1).err().unwrap();
        assert!(err.to_string().contains("val call 0 rank 0: 151 documents"), "{err}");
    }
}
