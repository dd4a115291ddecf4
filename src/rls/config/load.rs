//! Reading a runtime directory as envoyproxy/ratelimit's loader (lyft/goruntime) reads it, but
//! reading each file of a Kubernetes ConfigMap mount once.
//!
//! goruntime walks the directory with Go's `filepath.Walk`: every regular file, in lexical
//! order, subdirectories included, symlinks to files followed, symlinks to directories not;
//! with `RUNTIME_IGNOREDOTFILES` it skips names starting with a dot. A ConfigMap mount holds
//! `file.yaml -> ..data/file.yaml`, `..data -> ..2026_11_26_...` and that timestamped
//! directory; goruntime reads the files twice (through the links and in the timestamped
//! directory), which makes a duplicate domain (their issue #367). Here directories whose name
//! starts with `..` (Kubernetes' own) are never entered.

use std::fs;
use std::path::Path;

use super::error::RlsConfigError;

/// The files under `dir` as (name relative to `dir`, text), in lexical order.
pub(crate) fn read_dir(
    dir: &Path,
    ignore_dotfiles: bool,
) -> Result<Vec<(String, String)>, RlsConfigError> {
    let mut files = Vec::new();
    walk(dir, "", ignore_dotfiles, &mut files)?;
    Ok(files)
}

fn walk(
    dir: &Path,
    prefix: &str,
    ignore_dotfiles: bool,
    files: &mut Vec<(String, String)>,
) -> Result<(), RlsConfigError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| RlsConfigError::Io { path, source }
    };
    let mut entries = fs::read_dir(dir)
        .map_err(io(dir))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if ignore_dotfiles && name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let relative = format!("{prefix}{name}");
        let kind = entry.file_type().map_err(io(&path))?;
        if kind.is_dir() {
            if !name.starts_with("..") {
                walk(&path, &format!("{relative}/"), ignore_dotfiles, files)?;
            }
            continue;
        }
        if kind.is_symlink() {
            // Followed to a file; a link to a directory (`..data`) is not entered, as in Go.
            match fs::metadata(&path) {
                Ok(target) if target.is_file() => {}
                _ => continue,
            }
        } else if !kind.is_file() {
            continue;
        }
        let text = fs::read_to_string(&path).map_err(io(&path))?;
        files.push((relative, text));
    }
    Ok(())
}
