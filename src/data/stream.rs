//! Act 1's loader (a1, from Keller Jordan's first modded-nanogpt script, itself llm.c's Python
//! loader): the train shards read in order as one token stream, no shuffling. Each read takes the
//! next `n·T + 1` tokens as n rows of T; when a shard has fewer left, its tail is skipped and the
//! read starts at the next shard (after the last, the first again). a1-a3 read a whole step at
//! once (n = batch_tokens / T), a4 on one micro-batch of every reference rank (n = batch_rows ×
//! reference_ranks), which moves where the shards' tails fall; a4 also hands out its first read
//! twice. Upstream's rank r takes rows `[r·B, +B)` of each read; micro-batch `m` of our rank `r`
//! takes rows `[(m·W + r)·B, +B)` of the step's, so the rows a step sees do not depend on the
//! ranks.
use super::loader::{open_all, to_batch, Batch};
use anyhow::{bail, Result};
use corpus::shard::Shard;
use std::path::{Path, PathBuf};
use tch::Device;

/// The first `n` of `dir`'s train shards (sorted by name) when the recipe sets `train_shards`:
/// Act 1's runs read 12 and wrapped round them, so more data would be another run.
pub fn first_shards(files: Vec<PathBuf>, n: Option<usize>, dir: &Path) -> Result<Vec<PathBuf>> {
    match n {
        Some(n) if files.len() < n => bail!(
            "{}: the recipe reads the first {n} train shards (train_shards = {n}) but the folder \
             holds {}; `records data fineweb --train-shards {n}` fetches them",
            dir.display(),
            files.len()
        ),
        Some(n) => Ok(files.into_iter().take(n).collect()),
        None => Ok(files),
    }
}

pub struct StreamLoader {
    shards: Vec<Shard>,
    seq_len: usize,
    rows_per_micro: usize,
    rank: usize,
    ranks: usize,
    /// Rows per read; None: a whole step.
    read_rows: Option<usize>,
    /// The next read does not advance (a4: read 0 is used twice).
    repeat_next: bool,
    shard: usize,
    /// The next read's first token in `shard`.
    pos: usize,
}

/// How the stream is cut: rows per read (None: a whole step), and whether the first read is
/// handed out twice (a4).
pub struct Reads {
    pub rows: Option<usize>,
    pub repeat_first: bool,
}

impl StreamLoader {
    pub fn new(
        files: &[PathBuf],
        (seq_len, rows_per_micro): (usize, usize),
        (rank, ranks): (usize, usize),
        reads: Reads,
    ) -> Result<Self> {
        Ok(StreamLoader {
            shards: open_all(files)?,
            seq_len,
            rows_per_micro,
            rank,
            ranks,
            read_rows: reads.rows,
            repeat_next: reads.repeat_first,
            shard: 0,
            pos: 0,
        })
    }

    /// This rank's `accum` micro-batches of [B, T] for the next optimizer step.
    pub fn next_step(&mut self, accum: usize, device: Device) -> Result<Vec<Batch>> {
        let (t, b) = (self.seq_len, self.rows_per_micro);
        let rows = accum * self.ranks * b;
        let read = self.read_rows.unwrap_or(rows);
        if read == 0 || !rows.is_multiple_of(read) {
            bail!("a step's {rows} rows do not split into reads of {read} rows");
        }
        let mut starts = Vec::with_capacity(rows); // (shard, first token) of each row
        while starts.len() < rows {
            starts.extend(self.read(read)?);
        }
        let out = (0..accum)
            .map(|m| {
                let first = (m * self.ranks + self.rank) * b;
                let mut buf = Vec::with_capacity(b * (t + 1));
                for &(s, start) in &starts[first..first + b] {
                    let tokens = &self.shards[s].tokens()[start..start + t + 1];
                    buf.extend(tokens.iter().map(|&x| x as i64));
                }
                to_batch(buf, b, t, device)
            })
            .collect();
        Ok(out)
    }

    /// The next `n` rows of the stream, as (shard, first token).
    fn read(&mut self, n: usize) -> Result<Vec<(usize, usize)>> {
        let t = self.seq_len;
        let span = n * t + 1;
        if self.pos > 0 && self.pos + span > self.shards[self.shard].len() {
            self.shard = (self.shard + 1) % self.shards.len();
            self.pos = 0;
        }
        let s = &self.shards[self.shard];
        if s.len() < span {
            bail!(
                "{}: {} tokens is shorter than one read of {span} tokens",
                s.path().display(),
                s.len()
            );
        }
        let rows = (0..n).map(|j| (self.shard, self.pos + j * t)).collect();
        if !std::mem::take(&mut self.repeat_next) {
            self.pos += span - 1;
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STEP: Reads = Reads { rows: None, repeat_first: false };

    /// Shards of `lens` tokens, each token its position in its shard plus 10,000 × the shard.
    fn shards(dir: &std::path::Path, lens: &[usize]) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for (i, &n) in lens.iter().enumerate() {
            let path = dir.join(format!("t_train_{i:06}.bin"));
            let tokens: Vec<u16> = (0..n).map(|k| (10_000 * i + k) as u16).collect();
            corpus::shard::write_shard(&path, &tokens).unwrap();
            out.push(path);
        }
        out
    }

    fn firsts(b: &[Batch]) -> Vec<i64> {
        b.iter().flat_map(|b| Vec::<i64>::try_from(b.inputs.select(1, 0)).unwrap()).collect()
    }

    /// Steps follow each other in the stream; a tail too short for a step is skipped (shard 0
    /// holds 100 tokens: two steps of 4 rows of 10 + 1 fit, a third does not), and the stream
    /// wraps after the last shard.
    #[test]
    fn steps_read_the_stream_in_order_and_skip_short_tails() {
        let dir = tempfile::tempdir().unwrap();
        let files = shards(dir.path(), &[100, 60]);
        let mut l = StreamLoader::new(&files, (10, 2), (0, 1), STEP).unwrap();
        let mut starts = Vec::new();
        for _ in 0..4 {
            let step = l.next_step(2, Device::Cpu).unwrap();
            assert_eq!(step[0].inputs.size(), [2, 10]);
            let t = Vec::<i64>::try_from(step[1].targets.get(1)).unwrap();
            let i = Vec::<i64>::try_from(step[1].inputs.get(1)).unwrap();
            assert_eq!(t[..9], i[1..], "targets are the inputs shifted by one");
            starts.push(firsts(&step));
        }
        assert_eq!(starts[0], [0, 10, 20, 30]);
        assert_eq!(starts[1], [40, 50, 60, 70]);
        assert_eq!(starts[2], [10_000, 10_010, 10_020, 10_030], "shard 0's 20-token tail skipped");
        assert_eq!(starts[3], [0, 10, 20, 30], "wraps to shard 0");
    }

    /// Two ranks with one micro-batch each see the rows one rank sees with two.
    #[test]
    fn ranks_split_a_step_as_accumulation_does() {
        let dir = tempfile::tempdir().unwrap();
        let files = shards(dir.path(), &[500]);
        let mut one = StreamLoader::new(&files, (10, 2), (0, 1), STEP).unwrap();
        let mut r0 = StreamLoader::new(&files, (10, 2), (0, 2), STEP).unwrap();
        let mut r1 = StreamLoader::new(&files, (10, 2), (1, 2), STEP).unwrap();
        for _ in 0..8 {
            let mut a = firsts(&one.next_step(2, Device::Cpu).unwrap());
            let mut b = firsts(&r0.next_step(1, Device::Cpu).unwrap());
            b.extend(firsts(&r1.next_step(1, Device::Cpu).unwrap()));
            a.sort();
            b.sort();
            assert_eq!(a, b);
        }
    }

    #[test]
    fn train_shards_takes_the_first_by_name_or_names_what_is_missing() {
        let files: Vec<PathBuf> = (1..=3).map(|i| format!("t_train_{i:06}.bin").into()).collect();
        let dir = Path::new("/data/fineweb10B");
        assert_eq!(first_shards(files.clone(), None, dir).unwrap(), files);
        assert_eq!(first_shards(files.clone(), Some(2), dir).unwrap(), files[..2]);
        let err = first_shards(files, Some(12), dir).unwrap_err().to_string();
        assert!(err.starts_with("/data/fineweb10B: the recipe reads the first 12"), "{err}");
        assert!(err.contains("holds 3") && err.contains("--train-shards 12"), "{err}");
    }

    #[test]
    fn a_shard_shorter_than_a_step_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let files = shards(dir.path(), &[100, 30]);
        let mut l = StreamLoader::new(&files, (10, 2), (0, 1), STEP).unwrap();
        l.next_step(2, Device::Cpu).unwrap();
        l.next_step(2, Device::Cpu).unwrap();
        let err = l.next_step(2, Device::Cpu).err().unwrap().to_string();
        assert!(err.contains("t_train_000001.bin") && err.contains("41 tokens"), "{err}");
    }

    /// a4: reads of 2 rows (one micro-batch of one reference rank) move where the tail falls
    /// (shard 0's 100 tokens hold four reads of 21 tokens where they held two steps of 41), and
    /// the first read is handed out twice.
    #[test]
    fn micro_batch_reads_and_a_repeated_first_read() {
        let dir = tempfile::tempdir().unwrap();
        let files = shards(dir.path(), &[100, 60]);
        let reads = Reads { rows: Some(2), repeat_first: true };
        let mut l = StreamLoader::new(&files, (10, 2), (0, 1), reads).unwrap();
        let starts: Vec<Vec<i64>> =
            (0..3).map(|_| firsts(&l.next_step(2, Device::Cpu).unwrap())).collect();
        assert_eq!(starts[0], [0, 10, 0, 10], "read 0 twice");
        assert_eq!(starts[1], [20, 30, 40, 50]);
        assert_eq!(starts[2], [60, 70, 10_000, 10_010], "80 + 21 > 100: the next shard");
    }
}
