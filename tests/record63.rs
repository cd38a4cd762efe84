//! Record #63 against its spec: five untied value embeddings, 25 fewer steps.
mod common;

use tch::{nn, Device, Kind, Tensor};
use trainer::model::params::{Group, Opt, ParamSet};
use trainer::model::value_embed::ValueEmbeds;
use trainer::optim::schedule::Schedule;
use trainer::recipe::Scale;

/// Which table each layer reads, by the tables' distinct rows: #62's "12......012" shares
/// tables between layers 0 and 9 and between 1 and 10; #63's "01......234" gives each of the
/// five layers its own.
#[test]
fn value_embeddings_are_untied() {
    let tables = |pattern: &str| {
        let vs = nn::VarStore::new(Device::Cpu);
        let mut ps = ParamSet::new(vs.root());
        let init = nn::Init::Randn { mean: 0.0, stdev: 1.0 };
        let ve = ValueEmbeds::new(&mut ps, pattern, 8, 4, init, Group::new(Opt::Adam, 75.0));
        let n = ps.into_params(Kind::Float).len();
        let idx = Tensor::from_slice(&[3i64, 5]).view([1, 2]);
        let per_layer = ve.lookup(&idx, Kind::Float);
        let same = |a: usize, b: usize| match (&per_layer[a], &per_layer[b]) {
            (Some(x), Some(y)) => x.equal(y),
            _ => false,
        };
        let layers: Vec<usize> = (0..11).filter(|&i| per_layer[i].is_some()).collect();
        (n, layers, same(0, 9), same(1, 10))
    };
    assert_eq!(tables("12......012"), (3, vec![0, 1, 8, 9, 10], true, true));
    assert_eq!(tables("01......234"), (5, vec![0, 1, 8, 9, 10], false, false));
    let r = common::record(63, Scale::Full);
    assert_eq!(r.value_embed.map(|v| v.layers).as_deref(), Some("01......234"));
}

/// #63's schedule: 1535 scheduled steps, stages from 512 and 1024, the cooldown from 691, the
/// untie after step 1025; 1575 steps map to 236 in the lab.
#[test]
fn record_63_schedule() {
    let s = Schedule::new(&common::record(63, Scale::Full));
    let stages = |step: u64| s.at(step).windows;
    assert_ne!(stages(511), stages(512));
    assert_ne!(stages(1023), stages(1024));
    assert!((s.at(690).lr_factor - 1.52).abs() < 1e-12);
    assert!(s.at(691).lr_factor < 1.52);
    let untie: Vec<u64> = (0..1575).filter(|&t| s.at(t).untie_after).collect();
    assert_eq!(untie, [1025]);
    assert_eq!(common::record(63, Scale::Lab).steps, 236);
}
