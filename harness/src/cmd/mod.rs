//! One file per subcommand: a clap `Args` struct and `run(args)`.
pub mod bench;
pub mod data;
pub mod diff;
pub mod list;
pub mod profile;
pub mod replay;
pub mod review;
pub mod series;
pub mod show;
pub mod site;
pub mod verdict;

/// The catalog, with a warning for each manifest that does not load (the others stay usable;
/// a command that needs the broken one, `wanted`, fails with its error instead).
pub fn load_catalog(
    root: &std::path::Path,
    wanted: Option<u32>,
) -> anyhow::Result<records::catalog::Catalog> {
    let catalog = records::catalog::Catalog::load(root)?;
    for b in catalog.broken().iter().filter(|b| wanted.is_none() || b.number != wanted) {
        tracing::warn!("records: warning: {} (left out)", b.error);
    }
    Ok(catalog)
}

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
