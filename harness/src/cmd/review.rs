//! `records review N`: one record's change, read like a pull request.
use records::diff::Paint;
use records::paths;
use records::review::{self, Format};

/// Walk through record N: header, claim, each commit's hunks with the review notes in place,
/// then the evidence (official logs and this machine's replays).
#[derive(clap::Args)]
pub struct Args {
    pub record: u32,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: FormatArg,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum FormatArg {
    Text,
    Md,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let root = paths::repo_root()?;
    let format = match args.format {
        FormatArg::Text => Format::Text,
        FormatArg::Md => Format::Markdown,
    };
    print!("{}", review::render(&root, args.record, format, Paint(super::diff::colour()))?);
    Ok(())
}
