//! The techniques of upstream #30-#38 (record #38's span), each against hand-derived or float64
//! values, on record #29's recipe with the one key added.
mod common;

use common::build;
use trainer::recipe::{Recipe, Scale};

/// Record #29's manifest with `lines` added to its `[recipe]` (replacing keys of the same name).
fn record_29_with(lines: &str, scale: Scale) -> Recipe {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/records/29.toml")).unwrap();
    let keys: Vec<&str> =
        lines.lines().filter_map(|l| l.split('=').next()).map(str::trim).collect();
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !keys.iter().any(|k| l.split('=').next().map(str::trim) == Some(k)))
        .collect();
    let text = kept.join("\n").replace("[recipe]\n", &format!("[recipe]\n{lines}\n"));
    Recipe::from_manifest_str(&text, scale, None).unwrap()
}

fn names(r: &Recipe) -> Vec<String> {
    build(r).1.iter().map(|p| p.name.clone()).collect()
}

/// #30: a layer without an MLP has no MLP parameters, and the others keep theirs.
#[test]
fn mlp_layers_drop_the_mlp_of_layer_0() {
    let r = record_29_with(r#"mlp_layers = "-MMMMMMMMMMM""#, Scale::Full);
    let n = names(&r);
    assert!(!n.iter().any(|n| n.starts_with("blocks.0.mlp")), "{n:?}");
    assert!(n.iter().any(|n| n.starts_with("blocks.1.mlp")));
    assert!(n.iter().any(|n| n.starts_with("blocks.0.attn")), "#30 keeps layer 0's attention");
    let lab = record_29_with(r#"mlp_layers = "-MMMMMMMMMMM""#, Scale::Lab);
    assert_eq!(lab.mlp_layers.as_deref(), Some("MMMM"), "the lab takes layers 1, 4, 7, 10");
}
