//! The registry of recipe keys (src/recipe/registry.rs) covers every key, maps every step-based
//! key at lab scale, and drives validation; the schedule gives each step's plan.
mod common;
use serde::de::{self, Visitor};
use serde::Deserialize;
use trainer::optim::schedule::Schedule;
use trainer::recipe::registry::{entry, Lab, REGISTRY};
use trainer::recipe::{Recipe, Scale};

fn manifest(n: u32) -> String {
    let path = format!("{}/records/{n:02}.toml", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).unwrap()
}

/// The field names serde's derive hands to `deserialize_struct`: every key of `Recipe`.
fn recipe_keys() -> &'static [&'static str] {
    struct Names(Option<&'static [&'static str]>);
    impl<'de> de::Deserializer<'de> for &mut Names {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("names only"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = Some(fields);
            Err(de::Error::custom("names only"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
    let mut names = Names(None);
    let _ = Recipe::deserialize(&mut names);
    names.0.expect("Recipe is a struct")
}

#[test]
fn every_recipe_key_has_one_registry_entry() {
    let keys = recipe_keys();
    assert!(keys.len() > 40, "{keys:?}");
    for k in keys {
        assert!(entry(k).is_some(), "recipe key {k} has no entry in src/recipe/registry.rs");
    }
    for t in REGISTRY {
        assert!(keys.contains(&t.key), "registry entry {} is not a recipe key", t.key);
        assert_eq!(REGISTRY.iter().filter(|u| u.key == t.key).count(), 1, "{} twice", t.key);
        for need in t.needs.iter().flat_map(|n| n.split('|')).chain(t.excludes.iter().copied()) {
            assert!(entry(need).is_some_and(|n| n.is_technique()), "{}: {need}", t.key);
        }
    }
}

/// Every integer of a recipe (a key, a field of a key's table, or an array's items) states its
/// lab rule: a step count is `Steps`, and an integer that counts no steps says so (`Kept`,
/// `Layer`, `Tokens`, ...). Found by the value's type, not by its name, in every record's
/// recipe (the newest trainer reads them all; one it cannot read fails the test); and the common
/// `[lab]` table sets exactly the keys the registry says it does.
#[test]
fn every_integer_key_states_its_lab_rule() {
    let integer = |v: &toml::Value| match v {
        toml::Value::Array(a) => a.first().is_some_and(toml::Value::is_integer),
        v => v.is_integer(),
    };
    let mut missing = std::collections::BTreeMap::new();
    for n in [1, 29, 38, 46, 53, 54, 62, 63, 84] {
        let r = Recipe::from_manifest_str(&manifest(n), Scale::Full, None)
            .unwrap_or_else(|e| panic!("records/{n:02}.toml: {e:#}"));
        for (key, value) in &toml::Table::try_from(r).unwrap() {
            let lab = entry(key).unwrap().lab;
            if integer(value) && lab == Lab::Same {
                missing.entry(key.clone()).or_insert(n);
            }
            for (f, _) in value.as_table().into_iter().flatten().filter(|(_, v)| integer(v)) {
                let rules = if let Lab::Fields(rules) = lab { rules } else { &[] };
                if !rules.iter().any(|&(name, rule)| name == f && rule != Lab::Same) {
                    missing.entry(format!("{key}.{f}")).or_insert(n);
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "integers with no lab rule (Steps, or Kept), first record: {missing:?}"
    );
    for n in [1, 29, 38] {
        let m: toml::Table = toml::from_str(&manifest(n)).unwrap();
        let mut lab: Vec<&str> = m["lab"].as_table().unwrap().keys().map(String::as_str).collect();
        let mut table: Vec<&str> =
            REGISTRY.iter().filter(|t| t.lab == Lab::Table).map(|t| t.key).collect();
        lab.sort();
        table.sort();
        assert_eq!(lab, table, "records/{n:02}.toml [lab] vs the registry's Lab::Table keys");
    }
}

/// Each record turns on exactly the techniques of its era: those whose first upstream record is
/// at or before it (#29 and #38: until #45's single skip replaced the U-net, a record kept
/// every key of the records before it).
#[test]
fn record_1_has_no_technique_on_and_each_record_those_of_its_era() {
    assert!(common::record(1, Scale::Full).techniques_on().unwrap().is_empty());
    for n in [29, 38] {
        let on = common::record(n, Scale::Lab).techniques_on().unwrap();
        let era: Vec<&str> = REGISTRY
            .iter()
            .filter(|t| t.is_technique() && t.records.first().is_some_and(|&r| r <= n))
            .map(|t| t.key)
            .collect();
        assert_eq!(on, era, "record #{n}");
    }
    // Each Act 1 step turns on the keys the registry credits to it, and no other.
    for n in 1..=6 {
        let path = format!("{}/records/a{n}.toml", env!("CARGO_MANIFEST_DIR"));
        let r = Recipe::from_manifest(std::path::Path::new(&path), Scale::Full, None).unwrap();
        let mut on = r.techniques_on().unwrap();
        let mut act1: Vec<&str> =
            REGISTRY.iter().filter(|t| t.act1.contains(&n)).map(|t| t.key).collect();
        on.sort();
        act1.sort();
        assert_eq!(on, act1, "a{n}");
    }
}

/// A combination the model cannot run fails when the recipe is read, naming both keys.
#[test]
fn a_missing_dependency_names_the_keys() {
    for (from, to, want) in [
        ("rotary = { base = 1024.0, truncated = true }", "", "attn_layers needs rotary"),
        (
            "loss_sum = true",
            "loss_sum = true\nextension_final = true",
            "extension_final needs iteration_extension",
        ),
        ("loader = \"bos\"", "", "attn_layers needs loader"),
    ] {
        let text = manifest(29).replacen(from, to, 1);
        let err = format!("{:#}", Recipe::from_manifest_str(&text, Scale::Lab, None).unwrap_err());
        assert!(err.contains(want), "{err}");
    }
    // Rules with a choice or a replacement (upstream #45), in the registry too.
    for (from, to, want) in [
        ("unet = true", "unet = false", "skip_gate needs unet or single_skip"),
        (
            "unet = true",
            "unet = true\nsingle_skip = { layers = [4, 7] }",
            "single_skip replaces unet",
        ),
    ] {
        let text = manifest(38).replacen(from, to, 1);
        let err = format!("{:#}", Recipe::from_manifest_str(&text, Scale::Lab, None).unwrap_err());
        assert!(err.contains(want), "{err}");
    }
    // #51's tie and #73's residual lambdas: what they replace must be off.
    let residuals = "unet = false\nparallel_residuals = { betas = [0.9, 0.95] }";
    let x0_on = "x0_lambdas = true\nx0_lambdas_apart = true";
    for (from, to, want) in [
        ("untied_head = false", "untied_head = true", "head_embed replaces untied_head"),
        ("unet = false", residuals, "parallel_residuals replaces x0_lambdas"),
        (
            x0_on,
            "x0_lambdas = false\nx0_lambdas_apart = false",
            "block_lambda_init needs x0_lambdas or parallel_residuals",
        ),
        // #77's hand-over of the backout's layer (7, lab layer 2) is the parallel sublayers'.
        ("layer = 7", "layer = 7\nattend = true", "backout.attend hands layer 2's output"),
    ] {
        let text = manifest(63).replacen(from, to, 1);
        let err = format!("{:#}", Recipe::from_manifest_str(&text, Scale::Lab, None).unwrap_err());
        assert!(err.contains(want), "{err}");
    }
}

/// Each precision choice needs what it acts on: record #1 has neither rotary nor Muon.
#[test]
fn a_precision_choice_without_what_it_acts_on_is_refused_by_name() {
    for (choice, want) in [
        ("rotary = true", "precision.rotary needs rotary"),
        ("adam_state = \"fp32\"", "precision.adam_state needs muon"),
        ("matrices = true", "precision.matrices needs muon"),
    ] {
        let text = format!("{}\n[recipe.precision]\n{choice}\n", manifest(1));
        let err = format!("{:#}", Recipe::from_manifest_str(&text, Scale::Lab, None).unwrap_err());
        assert!(err.contains(want), "{choice}: {err}");
    }
    let text = format!("{}\n[recipe.precision]\nembeddings = true\n", manifest(1));
    let r = Recipe::from_manifest_str(&text, Scale::Lab, None).unwrap();
    assert!(r.precision.is_some_and(|p| p.embeddings && !p.linears));
}

/// Record #29's schedule (spec §3, §5): windows (3, 7, 11) x 128 in three stages, the decay
/// from step 919, the momentum reaching 0.95 at step 300.
#[test]
fn record_29_schedule_gives_each_steps_plan() {
    let s = Schedule::new(&common::record(29, Scale::Full));
    let at = |step| s.at(step);
    assert_eq!((at(0).windows, at(556).windows), ((384, 128), (384, 128)));
    assert_eq!((at(557).windows, at(1114).windows), ((896, 384), (1408, 640)));
    assert_eq!((at(0).lr_factor, at(918).lr_factor), (1.0, 1.0));
    assert!(at(919).lr_factor < 1.0);
    assert_eq!(at(0).momentum, Some(0.85));
    assert!((at(300).momentum.unwrap() - 0.95).abs() < 1e-12);
    assert_eq!(s.warmup(1).windows, (896, 384), "warmup cycles the sizes");
    let table = s.table(0);
    let steps: Vec<&str> = table.lines().skip(1).map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(steps, ["0", "300", "557", "919", "1114", "1670"], "{table}");
    let none = Schedule::new(&common::record(1, Scale::Full));
    assert_eq!((none.at(5).momentum, none.at(5).windows), (None, (0, 0)));
}
