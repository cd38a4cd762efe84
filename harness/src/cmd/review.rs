//! `records review N`: one record's change, read like a pull request.
use records::paths;
use records::present::diff::Paint;
use records::present::review;

/// Walk through record N: header, claim, each commit's hunks with the review notes in place,
/// then the evidence (official logs and this machine's replays).
#[derive(clap::Args)]
pub struct Args {
    /// Record (see `records list`: 29, a3), or an upstream record inside one's step (its one
    /// commit; `records list --all`).
    pub record: records::catalog::RecordId,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: super::FormatArg,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let root = paths::repo_root()?;
    let paint = Paint(super::diff::colour());
    print!("{}", review::render(&root, args.record, args.format.into(), paint)?);
    Ok(())
}
