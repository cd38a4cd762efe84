//! The recipe's loaders behind one interface: llm.c's rows (record #1) or upstream's packed
//! BOS-aligned sequences with document boundaries (#26, #29). Rows carry documents only under
//! Act 1's document mask (a6), cut at each EOT (src/model/eot_docs.rs).
use super::loader::{Batch, Loader, TrainLoader, ValLoader};
use super::packed::{BosLoader, Packed, PackedVal};
use super::stream::{Reads, StreamLoader};
use crate::model::attend::Docs;
use crate::model::eot_docs::eot_docs;
use crate::recipe::{Recipe, Tokenizer};
use anyhow::{Context, Result};
use corpus::tokenizer::{BYTE_BOS, GPT2_BOS};
use std::path::PathBuf;
use tch::{Device, Tensor};

/// One micro-batch: inputs and targets [B, T] int64, and the documents when packed (B = 1).
pub struct Micro {
    pub inputs: Tensor,
    pub targets: Tensor,
    pub docs: Option<Docs>,
}

impl Micro {
    fn packed(p: Packed) -> Result<Micro> {
        let docs = Docs::from_offsets(&p.cu_seqlens, p.inputs.device())
            .context("packed batch boundaries")?;
        Ok(Micro { inputs: p.inputs, targets: p.targets, docs: Some(docs) })
    }

    /// Rows: one document per row, or a6's documents opening at each `eot`.
    fn rows(b: Batch, eot: Option<i64>) -> Result<Micro> {
        let docs = eot.map(|e| eot_docs(&b.inputs, e)).transpose()?;
        Ok(Micro { inputs: b.inputs, targets: b.targets, docs })
    }
}

/// The token that opens a document: GPT-2's EOT (50256), the byte corpus's separator.
fn bos(r: &Recipe) -> u16 {
    match r.tokenizer {
        Tokenizer::Byte => BYTE_BOS,
        Tokenizer::Gpt2 => GPT2_BOS,
    }
}

/// Where rows' documents open when the recipe masks documents (a6), else None.
fn doc_eot(r: &Recipe) -> Option<i64> {
    r.doc_mask.then(|| i64::from(bos(r)))
}

pub struct Train {
    source: TrainSource,
    /// Rows' documents open at this token (a6's document mask).
    eot: Option<i64>,
}

enum TrainSource {
    Rows(TrainLoader),
    Stream(StreamLoader),
    Bos(BosLoader),
}

impl Train {
    /// `rows` rows of seq_len per micro-batch (the packed loader packs rows·seq_len tokens).
    pub fn new(
        r: &Recipe,
        files: &[PathBuf],
        rows: usize,
        rank: usize,
        ranks: usize,
    ) -> Result<Train> {
        let source = match r.loader {
            Loader::Rows if r.stream_loader => {
                // a4: a read per micro-batch of every reference rank.
                let micro_reads = r.stream_micro_reads.then_some(r.batch_rows * r.reference_ranks);
                let reads = Reads { rows: micro_reads, repeat_first: r.stream_repeat_first };
                let seq = (r.seq_len, rows);
                TrainSource::Stream(StreamLoader::new(files, seq, (rank, ranks), reads)?)
            }
            Loader::Rows => {
                TrainSource::Rows(TrainLoader::new(files, r.seq_len, rows, rank, ranks, r.seed)?)
            }
            Loader::Bos => {
                let tokens = rows * r.seq_len;
                TrainSource::Bos(BosLoader::new(files, tokens, r.seq_len, bos(r), rank, ranks)?)
            }
        };
        Ok(Train { source, eot: doc_eot(r) })
    }

    /// This rank's `accum` micro-batches of `tokens` each for the next optimizer step, documents
    /// clipped to `max_doc_len` when given (rows keep their size: only the packed loader follows
    /// a batch or document-length schedule).
    pub fn next_step(
        &mut self,
        accum: usize,
        (tokens, max_doc_len): (usize, Option<usize>),
        device: Device,
    ) -> Result<Vec<Micro>> {
        let eot = self.eot;
        match &mut self.source {
            TrainSource::Rows(l) => {
                l.next_step(accum, device).into_iter().map(|b| Micro::rows(b, eot)).collect()
            }
            TrainSource::Stream(l) => {
                l.next_step(accum, device)?.into_iter().map(|b| Micro::rows(b, eot)).collect()
            }
            TrainSource::Bos(l) => {
                l.resize(tokens)?;
                if let Some(n) = max_doc_len {
                    l.clip_docs(n)?;
                }
                l.next_step(accum, device)?.into_iter().map(Micro::packed).collect()
            }
        }
    }
}

pub struct Val {
    source: ValSource,
    eot: Option<i64>,
}

enum ValSource {
    Rows(ValLoader),
    Packed(PackedVal),
}

impl Val {
    /// Packed validation reads `val_seq_len` tokens per rank per call, fewer when the budget
    /// split over the ranks is smaller (the lab).
    pub fn new(
        r: &Recipe,
        files: &[PathBuf],
        rows: usize,
        rank: usize,
        ranks: usize,
    ) -> Result<Val> {
        let source = match (r.loader, r.val_seq_len) {
            (Loader::Bos, Some(n)) => {
                let per_call = n.min(r.val_tokens / ranks);
                let packed = PackedVal::new(files, r.val_tokens, per_call, bos(r), rank, ranks)?;
                ValSource::Packed(packed)
            }
            _ => {
                let l = ValLoader::new(files, r.val_tokens, r.seq_len, rows, rank, ranks)?;
                // a1: reference rank 0's rows only, as its script prints them.
                let l = match r.val_rank0_rows {
                    true => l.reference_rank0(r.batch_rows, r.reference_ranks)?,
                    false => l,
                };
                ValSource::Rows(l)
            }
        };
        Ok(Val { source, eot: doc_eot(r) })
    }

    /// This rank's validation batches, made one at a time.
    pub fn batches(&self, device: Device) -> Box<dyn Iterator<Item = Result<Micro>> + '_> {
        match &self.source {
            ValSource::Rows(l) => Box::new(l.batches(device).map(|b| Micro::rows(b, self.eot))),
            ValSource::Packed(l) => Box::new(l.batches(device).map(Micro::packed)),
        }
    }
}
