//! Act 1's document mask (a6): a row's documents start at each EOT token (GPT-2's 50256; the lab
//! corpus's separator), which belongs to the document it opens, as the script's
//! `docs = (idx == eot).cumsum(1)` with attention only where query and key share an id. Rows are
//! cut from the stream without regard to documents, so every row start opens one too.
use super::attend::Docs;
use anyhow::{Context, Result};
use tch::{Device, Kind, Tensor};

/// idx: [B, T] token ids -> the documents of the flattened B·T tokens (one read of idx).
pub fn eot_docs(idx: &Tensor, eot: i64) -> Result<Docs> {
    Docs::from_offsets(&eot_offsets(idx, eot)?, idx.device())
}

/// The documents' boundaries in the flattened B·T tokens: 0, each row start and each EOT, B·T.
pub fn eot_offsets(idx: &Tensor, eot: i64) -> Result<Vec<i32>> {
    let (b, t) = idx.size2().context("document mask: token ids are [B, T]")?;
    let ids = Vec::<i64>::try_from(idx.to(Device::Cpu).to_kind(Kind::Int64).reshape([-1]))
        .context("reading token ids for the document mask")?;
    let mut offsets = Vec::new();
    for row in 0..b {
        offsets.push(row * t);
        offsets.extend((1..t).filter(|&p| ids[(row * t + p) as usize] == eot).map(|p| row * t + p));
    }
    offsets.push(b * t);
    (offsets.into_iter().map(i32::try_from))
        .collect::<Result<_, _>>()
        .context("document boundaries overflow int32")
}
