//! One file per subcommand: a clap `Args` struct and `run(args)`.
pub mod bench;
pub mod cost;
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
pub mod walk;

/// The catalog, with a warning for each manifest that does not load (the others stay usable;
/// a command that needs the broken one, `wanted`, fails with its error instead).
pub fn load_catalog(
    root: &std::path::Path,
    wanted: Option<records::catalog::RecordId>,
) -> anyhow::Result<records::catalog::Catalog> {
    let catalog = records::catalog::Catalog::load(root)?;
    for b in catalog.broken().iter().filter(|b| wanted.is_none() || b.number != wanted) {
        tracing::warn!("records: warning: {} (left out)", b.error);
    }
    Ok(catalog)
}

/// Where a timed command reads and writes, and whether it waits for the timing lock; shared by
/// `replay`, `bench` and `profile`.
#[derive(Clone, clap::Args)]
pub struct RunPlaces {
    /// Shard folder [default: data/default at lab scale, data/fineweb10B at full scale].
    #[arg(long)]
    pub data: Option<std::path::PathBuf>,
    /// Where results go [default: <repo>/results].
    #[arg(long)]
    pub results: Option<std::path::PathBuf>,
    /// Do not wait for another timed run on this machine (the timing lock); this run's times
    /// are then marked as not comparable if one is running.
    #[arg(long)]
    pub no_lock: bool,
}

impl RunPlaces {
    /// `--data`, else the default corpus (made if missing) at lab scale or FineWeb's folder.
    pub fn data(&self, root: &std::path::Path, lab: bool) -> anyhow::Result<std::path::PathBuf> {
        Ok(match (&self.data, lab) {
            (Some(d), _) => d.clone(),
            (None, true) => {
                let byte = corpus::tokenizer::Tokenizer::byte();
                records::data::corpora::ensure_default(root, &byte)?.0
            }
            (None, false) => records::data::download::default_dest(root),
        })
    }

    /// `--results`, else `<repo>/results`.
    pub fn results(&self, root: &std::path::Path) -> std::path::PathBuf {
        self.results.clone().unwrap_or_else(|| records::paths::results_dir(root))
    }
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

impl From<FormatArg> for records::text::table::Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Text => records::text::table::Format::Text,
            FormatArg::Md => records::text::table::Format::Markdown,
        }
    }
}
