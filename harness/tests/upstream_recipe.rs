//! The recipe of every upstream record in a span: a manifest's `[[upstream]]` rows, applied in
//! order to the parent record's recipe, give the record's own `[recipe]`, and a row that does
//! not is named with its key.
use records::catalog::upstream_recipe::{check, recipe_at, Rows};
use records::catalog::Manifest;
use std::path::{Path, PathBuf};

fn records_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../records")
}

fn load(n: u32) -> Manifest {
    Manifest::load(&records_dir().join(format!("{n:02}.toml"))).unwrap()
}

/// #38's manifest with `from` replaced by `to`, loaded from a scratch directory.
fn edited_38(from: &str, to: &str) -> (tempfile::TempDir, Manifest) {
    let text = std::fs::read_to_string(records_dir().join("38.toml")).unwrap();
    assert!(text.contains(from), "38.toml has no {from:?}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("38.toml");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    let m = Manifest::load(&path).unwrap();
    (dir, m)
}

#[test]
fn the_rows_of_38_add_up_from_29_and_give_each_upstream_records_recipe() {
    let (parent, m) = (load(29), load(38));
    assert_eq!(check(&parent, &m), Ok(Rows::Proven(9)));
    // #30 dropped layer 0's MLP at 1,705 steps; #31 went back to 1,670 with YaRN.
    let at_30 = recipe_at(&parent.recipe, &m.upstream, 30);
    assert_eq!(at_30["mlp_layers"].as_str(), Some("-MMMMMMMMMMM"));
    assert_eq!(at_30["steps"].as_integer(), Some(1705));
    assert!(!at_30.contains_key("yarn"));
    let at_31 = recipe_at(&parent.recipe, &m.upstream, 31);
    assert_eq!(at_31["steps"].as_integer(), Some(1670));
    assert!(at_31.contains_key("yarn"));
    // Polar Express only from #38 on.
    let at_37 = recipe_at(&parent.recipe, &m.upstream, 37);
    assert!(at_37["muon"].get("orthogonalizer").is_none());
}

/// #37's row: the training loss on bf16 logits joins #32's precision.
const ROW_37: &str = "[upstream.recipe]\nprecision = { embeddings = true, linears = true, rotary = true, adam_state = \"bf16\", loss = true }";

#[test]
fn a_row_that_misses_a_key_is_named_with_the_key() {
    let (_dir, m) = edited_38(ROW_37, "same_math = \"x\"\n");
    let err = check(&load(29), &m).unwrap_err();
    assert!(err.contains("`precision`") && err.contains("set last by #32's row"), "{err}");
}

#[test]
fn a_row_with_neither_keys_nor_a_reason_and_a_wrong_step_count_are_refused() {
    let (_dir, m) = edited_38(ROW_37, "");
    let err = check(&load(29), &m).unwrap_err();
    assert!(err.contains("upstream #37 sets no recipe key; say why in same_math"), "{err}");
    let (_dir, m) =
        edited_38("smear = { gate_channels = 12 }\nsteps = 1645", "smear = { gate_channels = 12 }");
    let err = check(&load(29), &m).unwrap_err();
    assert!(err.contains("upstream #34's recipe trains 1660 steps but its log 1645"), "{err}");
}
