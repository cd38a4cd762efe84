//! Every parameter's optimizer settings against a table written from upstream's code.
//! `train --print-params` prints, per parameter of a record at full scale, its storage dtype, its
//! optimizer, its lr and weight-decay multipliers, Adam's betas and eps, the dtype of its
//! optimizer state and the matrices Muon orthogonalizes. tests/param_tables/NN.tsv holds the same
//! columns for records/NN.toml, written by hand from upstream's logged train_gpt.py (llm.c for
//! #1), each row citing the log lines it comes from. Why: in issue 23 the gates fell back to
//! their optimizer's default betas instead of the betas upstream gives their label, and every test
//! that held the trainer against itself passed; a table written from upstream's code does not.
//!
//! Each of our parameters must match exactly one row's name glob (`*` is any run of characters)
//! and agree with it on every column (numbers as numbers); each row must match some parameter.
//! A failure lists every disagreement with the row's citation. The differences ours still has
//! are listed in `KNOWN`, each with our value, and a listed difference that is gone fails too.

use std::collections::{BTreeMap, HashMap};
use std::process::Command;

const RECORDS: [&str; 9] = ["01", "29", "38", "46", "53", "54", "62", "63", "84"];

/// The columns compared, besides the name.
const COLUMNS: [&str; 8] =
    ["storage", "optimizer", "lr_mul", "wd_mul", "betas", "eps", "state", "muon_blocks"];

/// (record, table row's glob, column, our value) where ours does not follow upstream: the
/// scalars' wd_mul, 1 upstream until #50 set it to 0, which multiplies Adam's weight decay of 0
/// until then (no number changes).
const KNOWN: [(&str, &str, &str, &str); 3] = [
    ("29", "scalars", "wd_mul", "0"),
    ("38", "scalars", "wd_mul", "0"),
    ("46", "scalars", "wd_mul", "0"),
];

/// A TSV's rows as column -> cell, after its header line; lines starting with `#` are comments.
fn rows(text: &str) -> Vec<HashMap<&str, &str>> {
    let mut lines = text.lines().filter(|l| !l.is_empty() && !l.starts_with('#'));
    let header: Vec<&str> = lines.next().expect("a header line").split('\t').collect();
    for c in COLUMNS {
        assert!(header.contains(&c), "no column {c} in {header:?}");
    }
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split('\t').collect();
            assert_eq!(cells.len(), header.len(), "{l}");
            header.iter().copied().zip(cells).collect()
        })
        .collect()
}

/// Whether `name` matches `glob`, where `*` stands for any run of characters.
fn matches(glob: &str, name: &str) -> bool {
    match glob.split_once('*') {
        None => glob == name,
        Some((head, tail)) => name.strip_prefix(head).is_some_and(|rest| {
            (0..=rest.len()).any(|i| rest.is_char_boundary(i) && matches(tail, &rest[i..]))
        }),
    }
}

/// Whether two cells agree: numbers and comma-separated numbers (betas) as numbers, the rest as
/// text.
fn same(a: &str, b: &str) -> bool {
    let numbers = |s: &str| s.split(',').map(str::parse::<f64>).collect::<Result<Vec<_>, _>>();
    match (numbers(a), numbers(b)) {
        (Ok(x), Ok(y)) => {
            x.len() == y.len()
                && x.iter().zip(&y).all(|(p, q)| (p - q).abs() <= 1e-9 * p.abs().max(q.abs()))
        }
        _ => a == b,
    }
}

/// Every disagreement between record `nn`'s parameters and its table.
fn disagreements(nn: &str) -> Vec<String> {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(env!("CARGO_BIN_EXE_train"))
        .args(["--scale", "full", "--print-params", "--manifest"])
        .arg(format!("{root}/records/{nn}.toml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "#{nn}: {}", String::from_utf8_lossy(&out.stderr));
    let ours = String::from_utf8(out.stdout).unwrap();
    let table = std::fs::read_to_string(format!("{root}/tests/param_tables/{nn}.tsv")).unwrap();
    let (ours, table) = (rows(&ours), rows(&table));
    let mut found = Vec::new();
    let mut used = vec![false; table.len()];
    // (table row, column, our value) -> our parameters, so that a glob's disagreement prints once.
    let mut differ: BTreeMap<(usize, &str, &str), Vec<&str>> = BTreeMap::new();
    for p in &ours {
        let name = p["name"];
        let hits: Vec<usize> =
            (0..table.len()).filter(|&i| matches(table[i]["name_glob"], name)).collect();
        hits.iter().for_each(|&i| used[i] = true);
        let [i] = hits[..] else {
            found.push(format!("#{nn} {name}: matches {} table rows, not 1", hits.len()));
            continue;
        };
        for c in COLUMNS.into_iter().filter(|c| !same(table[i][c], p[c])) {
            differ.entry((i, c, p[c])).or_default().push(name);
        }
    }
    let mut known: Vec<_> = KNOWN.iter().filter(|k| k.0 == nn).collect();
    for ((i, c, ours), names) in differ {
        let row = &table[i];
        if let Some(k) = known.iter().position(|k| (k.1, k.2, k.3) == (row["name_glob"], c, ours)) {
            known.remove(k);
            continue;
        }
        found.push(format!(
            "#{nn} {c} of {} ({}): upstream {}, ours {ours}. Upstream: {}",
            row["name_glob"],
            names.join(", "),
            row[c],
            row["upstream"]
        ));
    }
    for (_, glob, c, ours) in known {
        found.push(format!("#{nn} {c} of {glob}: no longer {ours}; remove it from KNOWN"));
    }
    for (row, _) in table.iter().zip(&used).filter(|(_, used)| !**used) {
        found.push(format!("#{nn} {}: matches none of our parameters", row["name_glob"]));
    }
    found
}

#[test]
fn every_parameter_has_the_optimizer_settings_upstreams_code_gives_it() {
    let found: Vec<String> = RECORDS.iter().flat_map(|nn| disagreements(nn)).collect();
    assert!(found.is_empty(), "{} disagreements with upstream:\n{}", found.len(), found.join("\n"));
}
