//! Files written whole, the one way every part of the workspace writes a result: a temp file
//! beside the target, synced, then renamed over it, so a reader never sees half a file and a
//! write that fails (a full disk, a folder in the way) leaves no temp file behind.
use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path`, making its folder. The file keeps the permissions of the one it
/// replaces, else 0644 (a temp file starts 0600). The error names `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let named = |e: std::io::Error| {
        std::io::Error::new(e.kind(), format!("writing {}: {e}", path.display()))
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(named)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(named)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).map_or(0o644, |m| m.permissions().mode());
        tmp.as_file().set_permissions(std::fs::Permissions::from_mode(mode)).map_err(named)?;
    }
    tmp.write_all(bytes).map_err(named)?;
    tmp.as_file().sync_all().map_err(named)?;
    tmp.persist(path).map_err(|e| named(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_keeps_the_mode_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("out.json");
        write_atomic(&path, b"first").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path), 0o644, "not the temp file's 0600");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            write_atomic(&path, b"second").unwrap();
            assert_eq!(mode(&path), 0o755, "the replaced file's mode");
        }
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temp file left");
    }

    #[test]
    fn a_failed_write_names_the_path_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("taken");
        std::fs::create_dir(&path).unwrap(); // a folder where the file should go
        let err = write_atomic(&path, b"data").unwrap_err().to_string();
        assert!(err.contains("taken"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temp file left");
    }
}
