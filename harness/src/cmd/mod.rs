//! One file per subcommand: a clap `Args` struct and `run(args)`.
pub mod data;
pub mod diff;
pub mod list;
pub mod replay;
pub mod review;
pub mod series;
pub mod show;
pub mod verdict;

/// `--format`: aligned tables for a terminal, or markdown.
#[derive(Clone, Copy, Default, clap::ValueEnum)]
pub enum FormatArg {
    /// Aligned text for a terminal.
    #[default]
    Text,
    /// Markdown, to paste into a pull request or an issue.
    Md,
}

impl From<FormatArg> for records::table::Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Text => records::table::Format::Text,
            FormatArg::Md => records::table::Format::Markdown,
        }
    }
}
