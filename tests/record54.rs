//! Record #54 against its spec: the asymmetric logit rescale, the untie on the odd step at 2/3,
//! no scalar pauses, the shorter schedule.
mod common;

use common::build;
use tch::{Kind, Tensor};
use trainer::model::softcap::softcap;
use trainer::optim::schedule::Schedule;
use trainer::recipe::{Scale, Softcap};

/// 23·σ((z + 5)/7.5) against the formula in float64: the midpoint moves to z = −5 (11.5) and
/// the ceiling to 23; #53's form is the same with shift 0 and cap 30.
#[test]
fn the_logit_rescale_is_asymmetric() {
    let r = common::record(54, Scale::Full);
    let s = r.softcap.clone().unwrap();
    assert_eq!((s.cap, s.temperature, s.shift), (23.0, 7.5, 5.0));
    let z = [-40.0, -5.0, 0.0, 3.0, 40.0];
    let got =
        Vec::<f64>::try_from(softcap(&Tensor::from_slice(&z), &s).to_kind(Kind::Double)).unwrap();
    for (g, z) in got.iter().zip(z) {
        let want = 23.0 / (1.0 + (-(z + 5.0) / 7.5f64).exp());
        assert!((g - want).abs() < 1e-5, "z = {z}: {g} vs {want}");
    }
    assert!((got[1] - 11.5).abs() < 1e-6, "the midpoint is at z = -5");
    let old = Softcap { cap: 30.0, temperature: 7.5, shift: 0.0 };
    let at0 = softcap(&Tensor::from_slice(&[0.0f32]), &old).double_value(&[0]);
    assert!((at0 - 15.0).abs() < 1e-6);
}

/// Spec §2.5-§4: the copy after step ceil(2/3 · 1840) | 1 = 1227 and the own table from 1228;
/// no scalar pauses; lr 1.0 -> 1.52 at 614, 1.04770 -> 1.18608 at 1227, the cooldown from
/// step 920, 0.10177 at 1839; MTP [1, .5, .00014] at 613, [1, .49946] at 614; 497,942,528
/// tokens; the lab's 281 steps.
#[test]
fn record_54_schedule_follows_the_spec() {
    let r = common::record(54, Scale::Full);
    let s = Schedule::new(&r);
    let untie: Vec<u64> = (0..1880).filter(|&t| s.at(t).untie_after).collect();
    assert_eq!(untie, [1227]);
    assert_eq!((s.at(1227).split_embed, s.at(1228).split_embed), (false, true));
    assert!((0..1880).all(|t| !s.at(t).freeze_scalars), "upstream never calls the freeze");

    let lr = |t| s.at(t).lr_factor;
    assert_eq!((lr(613), lr(614), lr(919)), (1.0, 1.52, 1.52));
    assert!(lr(921) < 1.52, "the cooldown starts at 920 (w = 1 there)");
    for (t, want) in [(1226, 1.04770), (1227, 1.18608), (1839, 0.10177)] {
        assert!((lr(t) - want).abs() < 5e-6, "step {t}: {}", lr(t));
    }
    assert_eq!(lr(1840), 0.1);

    let w613 = s.at(613).mtp_weights().to_vec();
    assert_eq!(w613.len(), 3);
    assert!((w613[2] - 0.00014).abs() < 5e-6, "{w613:?}");
    assert!((s.at(614).mtp_weights()[1] - 0.49946).abs() < 5e-6);
    assert_eq!(s.at(1227).mtp_weights(), [1.0]);

    let total: usize = (0..1880).map(|t| s.micro_tokens(24 * 2048, &s.at(t)) * 8).sum();
    assert_eq!(total, 497_942_528);
    assert_eq!(common::record(54, Scale::Lab).steps, 281);
}

/// The same model as #53: spec §2.1's 268,665,615 parameters.
#[test]
fn record_54_builds_with_the_spec_parameter_count() {
    let (_gpt, params, _vs) = build(&common::record(54, Scale::Full));
    let n: i64 = params.iter().map(|p| p.tensor.numel() as i64).sum();
    assert_eq!(n, 268_665_615);
}
