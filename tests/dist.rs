//! Data-parallel ranks: the rank environment, the TCP backend with ranks as threads, and NCCL's
//! contract held by every backend.
mod common;

use common::{free_port, rank_env, vars};
use std::net::TcpListener;
use std::thread;
use std::time::{Duration, Instant};
use tch::{Device, Kind, Tensor};
use trainer::dist::contract::Checked;
use trainer::dist::single::Single;
use trainer::dist::{self, Collectives, DistError, EnvError, Op, RankEnv, Source};

fn env_err(pairs: &[(&str, &str)]) -> String {
    RankEnv::from_vars(vars(pairs)).expect_err("the environment is invalid").to_string()
}

const TORCHRUN_2: [(&str, &str); 6] = [
    ("RANK", "1"),
    ("WORLD_SIZE", "2"),
    ("LOCAL_RANK", "1"),
    ("LOCAL_WORLD_SIZE", "2"),
    ("MASTER_ADDR", "127.0.0.1"),
    ("MASTER_PORT", "29500"),
];

fn with(
    base: &[(&'static str, &'static str)],
    changes: &[(&'static str, &'static str)],
) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<_> =
        base.iter().filter(|(k, _)| !changes.iter().any(|(c, _)| c == k)).copied().collect();
    out.extend(changes.iter().filter(|(_, v)| !v.is_empty()).copied());
    out
}

#[test]
fn no_launcher_variables_mean_a_single_process() {
    let env = RankEnv::from_vars(vars(&[])).unwrap();
    assert_eq!(env, RankEnv::single());
    assert_eq!((env.rank, env.world, env.source), (0, 1, Source::Single));
    let coll = dist::init(&env, Device::Cpu).unwrap();
    assert_eq!((coll.rank(), coll.world(), coll.backend()), (0, 1, "single"));
}

#[test]
fn torchrun_variables_are_read_and_win_over_slurm() {
    let pairs = with(&TORCHRUN_2, &[("SLURM_PROCID", "5"), ("SLURM_NTASKS", "8")]);
    let env = RankEnv::from_vars(vars(&pairs)).unwrap();
    assert_eq!(env.source, Source::Torchrun);
    assert_eq!((env.rank, env.world, env.local_rank, env.local_world), (1, 2, 1, 2));
    assert_eq!((env.master_addr.as_str(), env.master_port), ("127.0.0.1", 29500));
    assert_eq!(env.tcp_port().unwrap(), 29500);
    let agent = with(&TORCHRUN_2, &[("TORCHELASTIC_USE_AGENT_STORE", "True")]);
    let env = RankEnv::from_vars(vars(&agent)).unwrap();
    assert_eq!(env.tcp_port().unwrap(), 29501, "torchrun's agent holds MASTER_PORT");
}

#[test]
fn torchrun_errors_name_the_variable_and_value() {
    assert_eq!(
        env_err(&with(&TORCHRUN_2, &[("RANK", "2")])),
        "RANK=2 must be less than WORLD_SIZE=2"
    );
    assert_eq!(
        env_err(&with(&TORCHRUN_2, &[("LOCAL_RANK", "3")])),
        "LOCAL_RANK=3 must be less than LOCAL_WORLD_SIZE=2"
    );
    assert_eq!(
        env_err(&with(&TORCHRUN_2, &[("RANK", "one")])),
        "RANK=\"one\" is not a non-negative integer"
    );
    assert_eq!(
        env_err(&with(&TORCHRUN_2, &[("MASTER_PORT", "70000")])),
        "MASTER_PORT=\"70000\" is not a port number in 1..=65535"
    );
    assert_eq!(
        env_err(&with(&TORCHRUN_2, &[("WORLD_SIZE", "0"), ("RANK", "0")])),
        "WORLD_SIZE=\"0\" is not a count of at least 1"
    );
    let err = env_err(&with(&TORCHRUN_2, &[("LOCAL_RANK", "")]));
    assert!(err.starts_with("LOCAL_RANK is not set, but RANK or WORLD_SIZE is"), "{err}");
    let err = env_err(&with(&TORCHRUN_2, &[("MASTER_ADDR", "")]));
    assert_eq!(err, "MASTER_ADDR is not set, but WORLD_SIZE=2 needs rank 0's address");
    assert_eq!(
        env_err(&with(&TORCHRUN_2, &[("RECORDS_DIST_TIMEOUT_S", "0")])),
        "RECORDS_DIST_TIMEOUT_S=\"0\" is not a positive number of seconds"
    );
    let agent =
        with(&TORCHRUN_2, &[("TORCHELASTIC_USE_AGENT_STORE", "True"), ("MASTER_PORT", "65535")]);
    assert_eq!(
        RankEnv::from_vars(vars(&agent)).unwrap().tcp_port(),
        Err(EnvError::NoTcpPort(65535))
    );
}

#[test]
fn slurm_variables_are_read_and_a_missing_master_is_explained() {
    let slurm = [
        ("SLURM_PROCID", "5"),
        ("SLURM_NTASKS", "8"),
        ("SLURM_LOCALID", "1"),
        ("SLURM_NTASKS_PER_NODE", "4"),
        ("MASTER_ADDR", "node01"),
        ("MASTER_PORT", "29500"),
    ];
    let env = RankEnv::from_vars(vars(&slurm)).unwrap();
    assert_eq!(env.source, Source::Slurm);
    assert_eq!((env.rank, env.world, env.local_rank, env.local_world), (5, 8, 1, 4));
    assert_eq!(env.master_addr, "node01");

    let uniform = with(&slurm, &[("SLURM_NTASKS_PER_NODE", ""), ("SLURM_TASKS_PER_NODE", "4(x2)")]);
    assert_eq!(RankEnv::from_vars(vars(&uniform)).unwrap().local_world, 4);
    let uneven = with(&slurm, &[("SLURM_NTASKS_PER_NODE", ""), ("SLURM_TASKS_PER_NODE", "4,2")]);
    assert!(
        env_err(&uneven).starts_with("SLURM_TASKS_PER_NODE=\"4,2\" is not a uniform task count")
    );

    let err = env_err(&with(&slurm, &[("MASTER_ADDR", "")]));
    assert!(
        err.starts_with("this is Slurm task 5 of SLURM_NTASKS=8, but MASTER_ADDR is not set"),
        "{err}"
    );
    assert!(err.contains("scontrol show hostnames"), "{err}");
    assert_eq!(
        env_err(&with(&slurm, &[("SLURM_PROCID", "8")])),
        "SLURM_PROCID=8 must be less than SLURM_NTASKS=8"
    );
    let single_task = [
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "1"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_NTASKS_PER_NODE", "1"),
    ];
    assert_eq!(RankEnv::from_vars(vars(&single_task)).unwrap().world, 1);
}

/// Runs `body(rank, backend)` on `world` threads joined through the TCP backend.
fn ranks<T: Send>(
    world: usize,
    timeout_s: u64,
    body: impl Fn(usize, Box<dyn Collectives>) -> T + Sync,
) -> Vec<T> {
    common::ranks(world, timeout_s, |rank, coll| {
        assert_eq!((coll.rank(), coll.world(), coll.backend()), (rank, world, "tcp"));
        body(rank, coll)
    })
}

/// Values whose fp32 sums round, so the order of summation shows in the bits.
fn values(rank: usize, n: usize, salt: f32) -> Tensor {
    let v: Vec<f32> = (0..n)
        .map(|i| {
            ((i as f32 + 1.0) * (rank as f32 + 1.37) + salt).sin() * 10f32.powi((i % 5) as i32 - 2)
        })
        .collect();
    Tensor::from_slice(&v)
}

/// The reduction computed locally, summing in rank order.
fn local_sum(world: usize, n: usize, salt: f32) -> Tensor {
    let mut acc = values(0, n, salt);
    for r in 1..world {
        acc += values(r, n, salt);
    }
    acc
}

fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    a.size() == b.size() && a.kind() == b.kind() && a.equal(b)
}

#[test]
fn all_reduce_sum_and_avg_match_a_local_sum_in_rank_order_exactly() {
    let world = 4;
    let shapes: [&[i64]; 3] = [&[2, 3], &[5], &[4, 1, 2]];
    let results = ranks(world, 60, |rank, mut coll| {
        let mut sums: Vec<Tensor> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| values(rank, s.iter().product::<i64>() as usize, i as f32).view(*s))
            .collect();
        coll.all_reduce(&mut sums, Op::Sum).unwrap();
        let mut avg = vec![values(rank, 1000, 9.0)];
        coll.all_reduce(&mut avg, Op::Avg).unwrap();
        (sums, avg.remove(0))
    });
    for (rank, (sums, avg)) in results.iter().enumerate() {
        for (i, s) in shapes.iter().enumerate() {
            let n = s.iter().product::<i64>() as usize;
            let want = local_sum(world, n, i as f32).view(*s);
            assert!(same_bits(&sums[i], &want), "rank {rank} tensor {i}");
        }
        let want = local_sum(world, 1000, 9.0) / world as f64;
        assert!(same_bits(avg, &want), "rank {rank} avg");
    }
}

#[test]
fn reduce_scatter_all_gather_broadcast_and_barrier() {
    let world = 3;
    let results = ranks(world, 60, |rank, mut coll| {
        let input = values(rank, world * 6, 1.0).view([world as i64 * 2, 3]);
        let mut chunk = Tensor::zeros([2, 3], (Kind::Float, Device::Cpu));
        coll.reduce_scatter(&mut chunk, &input, Op::Sum).unwrap();

        let mut gathered = Tensor::zeros([world as i64, 4], (Kind::Float, Device::Cpu));
        coll.all_gather(&mut gathered, &values(rank, 4, 2.0)).unwrap();

        let mut from2 = values(rank, 7, 3.0);
        coll.broadcast(&mut from2, 2).unwrap();
        let mut from0 = Tensor::from_slice(&[rank as i64 * 10, 1]);
        coll.broadcast(&mut from0, 0).unwrap();
        coll.barrier().unwrap();
        (chunk, gathered, from2, from0)
    });
    let sum = local_sum(world, world * 6, 1.0);
    let rows: Vec<Tensor> = (0..world).map(|r| values(r, 4, 2.0)).collect();
    let stacked = Tensor::stack(&rows, 0);
    for (rank, (chunk, gathered, from2, from0)) in results.iter().enumerate() {
        let want = sum.narrow(0, rank as i64 * 6, 6).view([2, 3]);
        assert!(same_bits(chunk, &want), "rank {rank} reduce_scatter");
        assert!(same_bits(gathered, &stacked), "rank {rank} all_gather");
        assert!(same_bits(from2, &values(2, 7, 3.0)), "rank {rank} broadcast from 2");
        assert!(same_bits(from0, &Tensor::from_slice(&[0i64, 1])), "rank {rank} broadcast from 0");
    }
}

#[test]
fn wrong_sizes_are_refused_before_any_exchange() {
    let results = ranks(2, 30, |rank, mut coll| {
        let mut out = Tensor::zeros([3], (Kind::Float, Device::Cpu));
        let input = Tensor::zeros([5], (Kind::Float, Device::Cpu));
        let err = coll.reduce_scatter(&mut out, &input, Op::Sum).unwrap_err().to_string();
        (rank, err)
    });
    for (rank, err) in results {
        // Each rank checks before sending anything, so each reports its own mistake.
        assert_eq!(
            err,
            "reduce_scatter: input has 5 elements, output has 3; with 2 ranks the input needs 6",
            "rank {rank}"
        );
    }
}

#[test]
fn ranks_that_disagree_on_sizes_fail_naming_the_rank() {
    let results = ranks(3, 30, |rank, mut coll| {
        let n = if rank == 1 { 5 } else { 4 };
        let mut t = vec![values(rank, n, 0.0)];
        let first = coll.all_reduce(&mut t, Op::Sum).unwrap_err().to_string();
        let again = coll.barrier().unwrap_err();
        assert!(matches!(again, DistError::Poisoned(_)), "{again}");
        first
    });
    assert!(
        results[0].starts_with("rank 1 sent 20 bytes for all_reduce #1 where 16 were expected"),
        "{}",
        results[0]
    );
    assert!(results[2].contains("rank 1 sent 20 bytes"), "{}", results[2]);
}

#[test]
fn a_dead_peer_makes_every_other_rank_fail_naming_it_within_seconds() {
    // The timeout is long, so only noticing the closed socket can make this fast.
    let started = Instant::now();
    let results = ranks(3, 120, |rank, mut coll| {
        if rank == 2 {
            drop(coll); // the process "dies": its socket closes
            return None;
        }
        let mut t = vec![values(rank, 16, 0.0)];
        Some((coll.all_reduce(&mut t, Op::Sum).unwrap_err(), started.elapsed()))
    });
    for (rank, r) in results.iter().enumerate().take(2) {
        let (err, at) = r.as_ref().unwrap();
        let msg = err.to_string();
        assert!(
            msg.starts_with("rank 2 closed its connection during all_reduce #1"),
            "rank {rank}: {msg}"
        );
        assert!(*at < Duration::from_secs(30), "rank {rank} took {at:?}");
    }
    assert!(matches!(results[1].as_ref().unwrap().0, DistError::Relayed(_)));
}

#[test]
fn a_silent_peer_times_out_naming_it() {
    let results = ranks(3, 2, |rank, mut coll| {
        if rank == 1 {
            thread::sleep(Duration::from_secs(4)); // alive but never joins the collective
            return String::new();
        }
        coll.barrier().unwrap_err().to_string()
    });
    assert!(
        results[0].starts_with("rank 1 did not respond within 2 s during barrier #1"),
        "{}",
        results[0]
    );
    assert!(results[2].starts_with("rank 1 did not respond"), "{}", results[2]);
}

#[test]
fn rendezvous_failures_are_clear() {
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let err = dist::init(&rank_env(0, 2, port, 5), Device::Cpu).err().unwrap().to_string();
    assert!(err.contains("already in use"), "{err}");
    assert!(err.contains("MASTER_PORT"), "{err}");

    let err = dist::init(&rank_env(1, 2, free_port(), 1), Device::Cpu).err().unwrap().to_string();
    assert!(err.starts_with("rank 1 cannot reach rank 0 at 127.0.0.1:"), "{err}");
}

/// Micro-batch `m` (4 rows) of a fixed linear-regression problem: the mean squared error.
fn micro_loss(w: &Tensor, m: i64) -> Tensor {
    let x: Vec<f32> = (0..32).map(|i| ((i * 7 % 11) as f32 - 5.0) / 3.0).collect();
    let y: Vec<f32> = (0..8).map(|i| (i as f32 * 0.7).cos()).collect();
    let x = Tensor::from_slice(&x).view([8, 4]).narrow(0, m * 4, 4);
    let y = Tensor::from_slice(&y).narrow(0, m * 4, 4);
    (x.mv(w) - y).square().mean(Kind::Float)
}

const LR: f64 = 0.05;

fn sgd(w: &mut Tensor) {
    tch::no_grad(|| {
        let g = w.grad();
        let _ = w.f_sub_(&(g * LR)).unwrap();
    });
    w.zero_grad();
}

/// Data-parallel SGD on a linear model: 2 ranks averaging gradients every step match 1 rank
/// accumulating the same 2 micro-batches.
#[test]
fn two_ranks_match_one_rank_with_twice_the_accumulation() {
    let steps = 5;
    let mut w = Tensor::from_slice(&[0.1f32, -0.2, 0.3, 0.0]).set_requires_grad(true);
    let mut single = Vec::new();
    for _ in 0..steps {
        let mut total = 0.0;
        for m in 0..2 {
            let loss = micro_loss(&w, m) / 2.0;
            loss.backward();
            total += loss.double_value(&[]);
        }
        single.push(total);
        sgd(&mut w);
    }

    let per_rank = ranks(2, 60, |rank, mut coll| {
        let mut w = Tensor::from_slice(&[0.1f32, -0.2, 0.3, 0.0]).set_requires_grad(true);
        let mut losses = Vec::new();
        for _ in 0..steps {
            let loss = micro_loss(&w, rank as i64);
            loss.backward();
            let mut both = vec![w.grad(), loss.detach().view([1])];
            coll.all_reduce(&mut both, Op::Avg).unwrap();
            losses.push(both[1].double_value(&[0]));
            sgd(&mut w);
        }
        (losses, w.detach())
    });
    for (rank, (losses, w_rank)) in per_rank.iter().enumerate() {
        for (step, (a, b)) in single.iter().zip(losses).enumerate() {
            assert!((a - b).abs() < 1e-6, "rank {rank} step {step}: {a} vs {b}");
        }
        let diff = (w_rank - w.detach()).abs().max().double_value(&[]);
        assert!(diff < 1e-6, "rank {rank} weights differ by {diff}");
    }
    assert!(per_rank[0].1.equal(&per_rank[1].1), "ranks must hold identical weights");
}

#[test]
fn every_backend_holds_to_nccls_contract_one_rank_too() {
    // One rank: the single backend copies, but a bf16 grad scattered into an fp32 buffer or a
    // tensor off the training device would stop NCCL, so it is refused here as well.
    let mut single = dist::init(&RankEnv::single(), Device::Cpu).unwrap();
    let mut out = Tensor::zeros([4], (Kind::Float, Device::Cpu));
    let bf16 = Tensor::zeros([4], (Kind::BFloat16, Device::Cpu));
    let err = single.reduce_scatter(&mut out, &bf16, Op::Avg).unwrap_err().to_string();
    assert_eq!(err, "reduce_scatter: input is BFloat16 but output is Float; NCCL needs one dtype");
    let err = single.all_gather(&mut out, &bf16).unwrap_err().to_string();
    assert!(err.starts_with("all_gather: input is BFloat16 but output is Float"), "{err}");
    let mut mixed = [Tensor::zeros([1], (Kind::Float, Device::Cpu)), bf16.shallow_clone()];
    let err = single.all_reduce(&mut mixed, Op::Avg).unwrap_err().to_string();
    assert!(err.starts_with("all_reduce: tensor 1 is BFloat16 but tensor 0 is Float"), "{err}");
    let mut ints = [Tensor::zeros([1], (Kind::Int64, Device::Cpu))];
    assert!(single.all_reduce(&mut ints, Op::Avg).is_err(), "Op::Avg on integers");
    // Same dtypes, same device: it copies.
    let input = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]);
    single.reduce_scatter(&mut out, &input, Op::Avg).unwrap();
    assert!(same_bits(&out, &input));

    // A rank training on a GPU must pass GPU tensors: a host-made tensor (a loss built with
    // Tensor::from_slice) is refused by name. The check compares devices only, so it needs none.
    let mut gpu_rank = Checked::new(Box::new(Single), Device::Cuda(0));
    let mut loss = [Tensor::from_slice(&[2.5f64])];
    let err = gpu_rank.all_reduce(&mut loss, Op::Avg).unwrap_err().to_string();
    assert_eq!(
        err,
        "all_reduce: tensor 0 is on Cpu, not on this rank's training device Cuda(0) (NCCL takes \
         only tensors on the rank's GPU)"
    );
}

#[test]
fn tcp_ranks_hold_to_nccls_contract_before_any_exchange() {
    let results = ranks(2, 30, |rank, coll| {
        let mut coll = Checked::new(coll, Device::Cpu);
        let mut out = Tensor::zeros([3], (Kind::Float, Device::Cpu));
        let input = Tensor::zeros([6], (Kind::BFloat16, Device::Cpu));
        let err = coll.reduce_scatter(&mut out, &input, Op::Avg).unwrap_err().to_string();
        // Both ranks refused before sending, so the backend is still usable.
        coll.barrier().unwrap();
        (rank, err)
    });
    for (rank, err) in results {
        assert_eq!(
            err, "reduce_scatter: input is BFloat16 but output is Float; NCCL needs one dtype",
            "rank {rank}"
        );
    }
}
