//! `train --print-params`: one row per parameter with the settings its optimizer applies, the
//! table a reviewer holds against upstream's parameter groups. Each optimizer fills the rows of
//! its own parameters from the same fields its step reads.
use tch::Kind;

/// What an optimizer does with one parameter.
pub struct ParamRow {
    pub name: String,
    pub shape: Vec<i64>,
    /// How the parameter is stored (bf16 on GPUs for some, from the recipe's storage policy).
    pub storage: Kind,
    /// "adamw", "adam", "adam (scalars)" or "muon".
    pub optimizer: &'static str,
    /// Multiplies the optimizer's base lr: the group's lr_mul, times Muon's shape factor.
    pub lr_mul: f64,
    /// Multiplies the optimizer's weight decay; 0 where the parameter does not decay.
    pub wd_mul: f64,
    /// Adam's (β1, β2) and eps; None for Muon.
    pub betas: Option<[f64; 2]>,
    pub eps: Option<f64>,
    /// The dtype of the optimizer's state (Adam's moments, Muon's momentum).
    pub state: Kind,
    /// Muon: the matrices it orthogonalizes, with NorMuon's reduce dim each, e.g.
    /// "4x768x768 dim -2"; empty for Adam.
    pub muon_blocks: String,
}

/// The table as tab-separated text with a header line.
pub fn render(rows: &[ParamRow]) -> String {
    let mut out = String::from(
        "name\tshape\tstorage\toptimizer\tlr_mul\twd_mul\tbetas\teps\tstate\tmuon_blocks\n",
    );
    for r in rows {
        let shape: Vec<String> = r.shape.iter().map(i64::to_string).collect();
        let betas = r.betas.map_or("-".to_string(), |[b1, b2]| format!("{b1},{b2}"));
        let eps = r.eps.map_or("-".to_string(), |e| format!("{e:e}"));
        let blocks = if r.muon_blocks.is_empty() { "-" } else { &r.muon_blocks };
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{betas}\t{eps}\t{}\t{blocks}\n",
            r.name,
            shape.join("x"),
            kind_name(r.storage),
            r.optimizer,
            r.lr_mul,
            r.wd_mul,
            kind_name(r.state),
        ));
    }
    out
}

pub fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Float => "fp32",
        Kind::BFloat16 => "bf16",
        Kind::Half => "fp16",
        Kind::Double => "fp64",
        _ => "other",
    }
}
