//! Reading recipes from manifests: errors name the key and line; lab scale maps schedules.
mod common;

use trainer::recipe::{Recipe, Scale};

#[test]
fn lab_scale_maps_step_schedules_onto_the_budget() {
    let r = common::lab_recipe("");
    assert_eq!(r.steps, 250);
    // 700 of 19,560 steps is 8.95 of 250.
    assert_eq!(r.warmup_steps, 9);
    assert_eq!(r.n_layer, 4);
    assert_eq!(r.lr, 6e-4, "the lab rule shrinks shapes, not the optimizer");
    let longer =
        Recipe::from_manifest_str(&common::manifest("steps = 10"), Scale::Lab, Some(1956)).unwrap();
    assert_eq!(longer.warmup_steps, 70);
}

#[test]
fn unknown_recipe_key_names_the_key_and_line() {
    let text = common::manifest("").replace("lr = 6e-4", "lrr = 6e-4");
    let line = text.lines().position(|l| l.starts_with("lrr")).unwrap() + 1;
    let err = format!("{:#}", Recipe::from_manifest_str(&text, Scale::Full, None).unwrap_err());
    assert!(err.contains("lrr"), "{err}");
    assert!(err.contains(&format!("line {line}")), "{err}");
}

#[test]
fn wrong_type_names_the_line() {
    let text = common::manifest("").replace("n_layer = 12", "n_layer = \"twelve\"");
    let line = text.lines().position(|l| l.starts_with("n_layer")).unwrap() + 1;
    let err = format!("{:#}", Recipe::from_manifest_str(&text, Scale::Full, None).unwrap_err());
    assert!(err.contains(&format!("line {line}")), "{err}");
}

#[test]
fn bad_lab_keys_are_named() {
    let err = format!(
        "{:#}",
        Recipe::from_manifest_str(&common::manifest("n_layerz = 2"), Scale::Lab, None).unwrap_err()
    );
    assert!(err.contains("lab.n_layerz"), "{err}");
    let err = format!(
        "{:#}",
        Recipe::from_manifest_str(&common::manifest("n_head = -1"), Scale::Lab, None).unwrap_err()
    );
    assert!(err.contains("lab.n_head"), "{err}");
}

#[test]
fn inconsistent_values_are_rejected() {
    let err = format!(
        "{:#}",
        Recipe::from_manifest_str(&common::manifest("n_head = 5"), Scale::Lab, None).unwrap_err()
    );
    assert!(err.contains("n_embd must be a multiple of n_head"), "{err}");
    let r = common::lab_recipe("");
    assert!(r.micro_batch(3).is_err(), "8 rows do not split over 3 ranks");
    assert_eq!(r.micro_batch(1).unwrap(), (8, 1));
    assert_eq!(r.micro_batch(2).unwrap(), (4, 1), "more ranks: smaller micro-batches");
    assert_eq!(common::lab_recipe("batch_tokens = 8192").micro_batch(2).unwrap(), (8, 2));
    let full = Recipe::from_manifest_str(&common::manifest(""), Scale::Full, None).unwrap();
    assert_eq!(full.micro_batch(8).unwrap(), (64, 1), "the official run: 8 ranks x 64 rows");
    assert_eq!(full.micro_batch(1).unwrap(), (64, 8), "one GPU accumulates 8 micro-batches");
}
