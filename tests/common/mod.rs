//! Shared by the trainer's integration tests: small recipes written as manifests.
#![allow(dead_code)] // each test file uses a subset

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::thread;
use tch::{nn, Device, Kind};
use trainer::device::Target;
use trainer::dist::RankEnv;
use trainer::dist::{self, Collectives};
use trainer::model::params::Param;
use trainer::model::Gpt;
use trainer::recipe::{Recipe, Scale};
use trainer::train::RunConfig;

/// A manifest with record #1's full recipe and the given `[lab]` lines.
pub fn manifest(lab: &str) -> String {
    let base =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/records/01.toml")).unwrap();
    let start = base.find("[recipe]").unwrap();
    let end = base.find("[lab]").unwrap();
    format!("{}\n[lab]\n{lab}\n", &base[start..end])
}

/// Record #1 at lab scale with `overrides` (TOML lines) applied on top of its [lab] table.
pub fn lab_recipe(overrides: &str) -> Recipe {
    let base =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/records/01.toml")).unwrap();
    let lab_start = base.find("[lab]\n").unwrap() + "[lab]\n".len();
    let lab_end = base[lab_start..].find("\n[").map_or(base.len(), |i| lab_start + i);
    let mut lab: toml::Table = toml::from_str(&base[lab_start..lab_end]).unwrap();
    let extra: toml::Table = toml::from_str(overrides).unwrap();
    lab.extend(extra);
    Recipe::from_manifest_str(&manifest(&toml::to_string(&lab).unwrap()), Scale::Lab, None).unwrap()
}

/// The GPT of `r` on CPU in fp32, from seed 0.
pub fn build(r: &Recipe) -> (Gpt, Vec<Param>, nn::VarStore) {
    tch::manual_seed(0);
    let vs = nn::VarStore::new(Device::Cpu);
    let (gpt, params) = Gpt::new(vs.root(), r, Kind::Float);
    (gpt, params, vs)
}

/// An environment lookup over `pairs`, for `RankEnv::from_vars`.
pub fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> =
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |k| map.get(k).cloned()
}

/// A free loopback port (released again; the rank-0 thread binds it right after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Rank `rank` of `world` as torchrun would describe it, joining on `port` within `timeout_s`.
pub fn rank_env(rank: usize, world: usize, port: u16, timeout_s: u64) -> RankEnv {
    let (r, w, p, t) =
        (rank.to_string(), world.to_string(), port.to_string(), timeout_s.to_string());
    let pairs = [
        ("RANK", r.as_str()),
        ("WORLD_SIZE", w.as_str()),
        ("LOCAL_RANK", r.as_str()),
        ("LOCAL_WORLD_SIZE", w.as_str()),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", p.as_str()),
        ("RECORDS_DIST_TIMEOUT_S", t.as_str()),
    ];
    RankEnv::from_vars(vars(&pairs)).unwrap()
}

/// Runs `body(rank, backend)` on `world` threads joined over loopback (the single backend for 1,
/// TCP otherwise), each giving up after `timeout_s`.
pub fn ranks<T: Send>(
    world: usize,
    timeout_s: u64,
    body: impl Fn(usize, Box<dyn Collectives>) -> T + Sync,
) -> Vec<T> {
    let port = free_port();
    thread::scope(|s| {
        let handles: Vec<_> = (0..world)
            .map(|rank| {
                let body = &body;
                s.spawn(move || {
                    let env = rank_env(rank, world, port, timeout_s);
                    body(rank, dist::init(&env, Device::Cpu).expect("rendezvous"))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Record `n`'s recipe at `scale`, from its manifest.
pub fn record(n: u32, scale: Scale) -> Recipe {
    let path = format!("{}/records/{n:02}.toml", env!("CARGO_MANIFEST_DIR"));
    Recipe::from_manifest(Path::new(&path), scale, None).unwrap()
}

/// Record `n`'s manifest with `lines` (TOML `key = value`) replacing or adding recipe keys.
pub fn record_with(n: u32, lines: &str, scale: Scale) -> Recipe {
    let path = format!("{}/records/{n:02}.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    let keys: Vec<&str> =
        lines.lines().filter_map(|l| l.split('=').next()).map(str::trim).collect();
    // Only [recipe]'s own keys: a section's fields ([recipe.muon] lr) are not replaced.
    let mut table = "";
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| {
            if l.starts_with('[') {
                table = l.split(']').next().unwrap_or("");
            }
            let key = l.split('=').next().map(str::trim);
            table != "[recipe" || !keys.iter().any(|k| key == Some(k))
        })
        .collect();
    let text = kept.join("\n").replace("[recipe]\n", &format!("[recipe]\n{lines}\n"));
    Recipe::from_manifest_str(&text, scale, None).unwrap()
}

/// `total` tokens of byte documents (40-600 random bytes, each after a BOS, 256) from `seed`, the
/// first 20,000 as a val shard and the rest as a train shard in `dir`.
pub fn byte_document_shards(dir: &Path, seed: u64, total: usize) {
    let mut rng = corpus::synthetic::SplitMix64(seed);
    let mut tokens = Vec::new();
    while tokens.len() < total {
        tokens.push(256u16);
        let len = 40 + rng.below(560);
        tokens.extend((0..len).map(|_| rng.below(256) as u16));
    }
    corpus::shard::write_shard(&dir.join("x_val_000000.bin"), &tokens[..20_000]).unwrap();
    corpus::shard::write_shard(&dir.join("x_train_000001.bin"), &tokens[20_000..]).unwrap();
}

/// The tiny model of the single-process run tests: one layer of 32, rows of 16, 64 tokens a step.
pub const TINY: &str = "n_layer = 1\nn_embd = 32\nn_head = 2\nseq_len = 16\nmax_seq_len = 16\n\
                        batch_rows = 4\nbatch_tokens = 64\nval_every = 100\nval_tokens = 64";

/// A run of `recipe` on one CPU rank over a fixed token pattern written into `dir` (5,000 val,
/// 15,000 train tokens), its files in `out` when given.
pub fn tiny_run(recipe: Recipe, dir: &Path, out: Option<PathBuf>) -> RunConfig {
    let tokens: Vec<u16> = (0..20_000u32).map(|i| (i * 7 % 251) as u16).collect();
    let (val, train) = (dir.join("x_val_000000.bin"), dir.join("x_train_000001.bin"));
    corpus::shard::write_shard(&val, &tokens[..5_000]).unwrap();
    corpus::shard::write_shard(&train, &tokens[5_000..]).unwrap();
    RunConfig {
        recipe,
        scale: Scale::Lab,
        record: None,
        train_files: vec![train],
        val_files: vec![val],
        out,
        target: Target::cpu(),
        ranks: RankEnv::single(),
        header: vec![],
    }
}
