//! Record #84's first two optimizer steps at full shape (Muon, then Muon + Adam) through a real
//! NCCL process group of one rank (ProcessGroupNCCL through the shim, meeting in a TCPStore on
//! loopback), against the same steps through the single-rank backend. NCCL's rules (every tensor
//! on the rank's GPU, one dtype per reduce-scatter: bf16 grads beside fp32 Adam state from #56
//! on) hold at any world size, so one GPU shows what would stop the first run on eight.
use crate::model::{build, Model, RECORD_84};
use crate::packed::packed;
use crate::table::{Row, Status};
use crate::util::Ctx;
use anyhow::Result;
use std::net::TcpListener;
use tch::{Kind, Tensor};
use trainer::dist::contract::Checked;
use trainer::dist::nccl::Nccl;
use trainer::dist::single::Single;
use trainer::dist::{Collectives, RankEnv};
use trainer::model::Ctx as Forward;
use trainer::optim::optimizer::Optimizer;
use trainer::optim::schedule::Schedule;
use trainer::recipe::Scale;

pub fn check(ctx: &Ctx) -> Result<Vec<Row>> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let env = RankEnv { master_addr: "127.0.0.1".into(), master_port: port, ..RankEnv::single() };
    let mut nccl = Checked::new(Box::new(Nccl::connect(&env, ctx.index)?), ctx.dev);
    let through_nccl = two_steps(ctx, &mut nccl)?;
    let mut single = Checked::new(Box::new(Single), ctx.dev);
    let alone = two_steps(ctx, &mut single)?;
    let diff = (&through_nccl - &alone).abs().max().double_value(&[]);
    Ok(vec![Row::judged(
        "NCCL, world 1: record #84's first two optimizer steps",
        format!("params after them: max |NCCL − single| = {diff:e}"),
        Status::judge(diff == 0.0),
        "DistAdam (bf16 embeddings, head and gates with fp32 moments) and Muon through \
         ProcessGroupNCCL's all_reduce, reduce_scatter and all_gather on one rank; an average \
         over one rank changes nothing, so the params must equal the single backend's",
    )])
}

/// Steps 1 and 2 of #84 from its seed on one packed batch; every param afterwards, flat, fp32.
fn two_steps(ctx: &Ctx, coll: &mut dyn Collectives) -> Result<Tensor> {
    let Model { _vs, model, params, recipe: r } = build(ctx, RECORD_84, Scale::Full)?;
    let mut opt = Optimizer::new(params, &r, Kind::BFloat16)?;
    let schedule = Schedule::new(&r);
    for step in 0..2 {
        let plan = schedule.at(step);
        let tokens = schedule.micro_tokens(r.batch_tokens / r.reference_ranks.max(1), &plan);
        let seq = packed(ctx, &r, tokens)?;
        let fwd = Forward {
            docs: Some(seq.docs.clone()),
            windows: plan.windows,
            yarn_window: plan.yarn_window,
            training: true,
            mtp: plan.mtp_weights().to_vec(),
            split_embed: plan.split_embed,
        };
        let loss = model.loss(&seq.x, &seq.y, &fwd)?;
        (&loss * tokens as f64).f_backward()?;
        opt.step(coll, &plan)?;
    }
    let flat: Vec<Tensor> =
        opt.params().iter().map(|p| p.tensor.detach().to_kind(Kind::Float).reshape([-1])).collect();
    Ok(Tensor::cat(&flat, 0))
}
