//! The recipe's loaders behind one interface: llm.c's rows (record #1) or upstream's packed
//! BOS-aligned sequences with document boundaries (#26, #29).
use super::loader::{TrainLoader, ValLoader};
use super::packed::{BosLoader, Packed, PackedVal};
use super::stream::{Reads, StreamLoader};
use crate::model::attend::Docs;
use crate::recipe::{Loader, Recipe, Tokenizer};
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
}

fn bos(r: &Recipe) -> u16 {
    match r.tokenizer {
        Tokenizer::Byte => BYTE_BOS,
        Tokenizer::Gpt2 => GPT2_BOS,
    }
}

pub enum Train {
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
        Ok(match r.loader {
            Loader::Rows if r.stream_loader => {
                // a4: a read per micro-batch of every reference rank.
                let micro_reads = r.stream_micro_reads.then_some(r.batch_rows * r.reference_ranks);
                let reads = Reads { rows: micro_reads, repeat_first: r.stream_repeat_first };
                Train::Stream(StreamLoader::new(files, (r.seq_len, rows), (rank, ranks), reads)?)
            }
            Loader::Rows => {
                Train::Rows(TrainLoader::new(files, r.seq_len, rows, rank, ranks, r.seed)?)
            }
            Loader::Bos => {
                Train::Bos(BosLoader::new(files, rows * r.seq_len, r.seq_len, bos(r), rank, ranks)?)
            }
        })
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
        match self {
            Train::Rows(l) => Ok(l
                .next_step(accum, device)
                .into_iter()
                .map(|b| Micro { inputs: b.inputs, targets: b.targets, docs: None })
                .collect()),
            Train::Stream(l) => Ok(l
                .next_step(accum, device)?
                .into_iter()
                .map(|b| Micro { inputs: b.inputs, targets: b.targets, docs: None })
                .collect()),
            Train::Bos(l) => {
                l.resize(tokens)?;
                if let Some(n) = max_doc_len {
                    l.clip_docs(n)?;
                }
                l.next_step(accum, device)?.into_iter().map(Micro::packed).collect()
            }
        }
    }
}

pub enum Val {
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
        Ok(match (r.loader, r.val_seq_len) {
            (Loader::Bos, Some(n)) => {
                let per_call = n.min(r.val_tokens / ranks);
                Val::Packed(PackedVal::new(files, r.val_tokens, per_call, bos(r), rank, ranks)?)
            }
            _ => Val::Rows(ValLoader::new(files, r.val_tokens, r.seq_len, rows, rank, ranks)?),
        })
    }

    /// This rank's validation batches, made one at a time.
    pub fn batches(&self, device: Device) -> Box<dyn Iterator<Item = Result<Micro>> + '_> {
        match self {
            Val::Rows(l) => Box::new(
                l.batches(device)
                    .map(|b| Ok(Micro { inputs: b.inputs, targets: b.targets, docs: None })),
            ),
            Val::Packed(l) => Box::new(l.batches(device).map(Micro::packed)),
        }
    }
}
