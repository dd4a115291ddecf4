//! `RlsConfig::load_dir`: a runtime directory read as goruntime reads it, a ConfigMap mount once.

use std::path::PathBuf;

use redlimit::rls::config::{RlsConfig, RlsConfigError};

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("redlimit-rls-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const A: &str =
    "domain: a\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n";
const B: &str =
    "domain: b\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 2}}\n";

#[cfg(unix)]
#[test]
fn load_dir_reads_a_configmap_mount_once() {
    use std::os::unix::fs::symlink;
    let tmp = TempDir::new("configmap");
    let dir = &tmp.0;
    // What the kubelet writes: a timestamped directory, `..data` pointing at it, and a link per
    // key through `..data`.
    let stamp = dir.join("..2026_11_26_22_00_00.000000001");
    std::fs::create_dir(&stamp).unwrap();
    std::fs::write(stamp.join("a.yaml"), A).unwrap();
    std::fs::write(stamp.join("b.yml"), B).unwrap();
    symlink("..2026_11_26_22_00_00.000000001", dir.join("..data")).unwrap();
    symlink("..data/a.yaml", dir.join("a.yaml")).unwrap();
    symlink("..data/b.yml", dir.join("b.yml")).unwrap();
    for ignore_dotfiles in [false, true] {
        let c = RlsConfig::load_dir(dir, ignore_dotfiles, false).unwrap();
        assert_eq!(
            c.domains().map(|d| d.name()).collect::<Vec<_>>(),
            ["a", "b"]
        );
    }
}

#[test]
fn load_dir_reads_every_file_as_goruntime() {
    let tmp = TempDir::new("plain");
    let dir = &tmp.0;
    std::fs::write(dir.join("a.yaml"), A).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub").join("b.conf"), B).unwrap();
    let c = RlsConfig::load_dir(dir, false, false).unwrap();
    assert_eq!(
        c.domains().map(|d| d.name()).collect::<Vec<_>>(),
        ["a", "b"]
    );

    // A dotfile is read unless dotfiles are ignored (RUNTIME_IGNOREDOTFILES).
    std::fs::write(dir.join(".a.yaml.swp"), "not: [yaml").unwrap();
    match RlsConfig::load_dir(dir, false, false) {
        Err(RlsConfigError::Syntax { file, .. }) => assert_eq!(file, ".a.yaml.swp"),
        other => panic!("{other:?}"),
    }
    assert!(RlsConfig::load_dir(dir, true, false).is_ok());

    // Errors name the file by its path in the directory.
    std::fs::write(
        dir.join("sub").join("c.yaml"),
        "domain: c\ndescriptors:\n  - {key: k, rate_limit: {unit: hz}}\n",
    )
    .unwrap();
    let err = RlsConfig::load_dir(dir, true, false).unwrap_err();
    assert_eq!(err.file(), Some("sub/c.yaml"));

    assert!(matches!(
        RlsConfig::load_dir(&dir.join("missing"), false, false),
        Err(RlsConfigError::Io { .. })
    ));
}
