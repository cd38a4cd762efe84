//! One file per subcommand: a clap `Args` struct and `run(args)`.
pub mod bench;
pub mod data;
pub mod diff;
pub mod list;
pub mod replay;
pub mod review;
pub mod series;
pub mod show;

/// The catalog, with a warning for each manifest that does not load (the others stay usable;
/// a command that needs the broken one, `wanted`, fails with its error instead).
pub fn load_catalog(
    root: &std::path::Path,
    wanted: Option<u32>,
) -> anyhow::Result<records::catalog::Catalog> {
    let catalog = records::catalog::Catalog::load(root)?;
    for b in catalog.broken().iter().filter(|b| wanted.is_none() || b.number != wanted) {
        eprintln!("records: warning: {} (left out)", b.error);
    }
    Ok(catalog)
}
