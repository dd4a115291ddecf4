//! Checked-in protobuf code kept current: the `.proto` files compiled by the pure-Rust compiler
//! (protox) and tonic-prost-build into a temporary directory and compared with the files checked
//! in, or written over them when `REDLIMIT_REGENERATE_PROTO=1`. The library's check
//! (`tests/it/rls/proto_current.rs`) and the server's (`server/tests/proto_current.rs`, which
//! includes this file by path) run it on their own files.

use std::path::{Path, PathBuf};

/// One crate's generated code and how it is generated.
pub(crate) struct Generated<'a> {
    /// The `.proto` files compiled (their imports come along), under `includes`.
    pub(crate) roots: &'a [&'a str],
    pub(crate) includes: &'a [PathBuf],
    /// Packages whose code is another crate's: (protobuf package, Rust path).
    pub(crate) extern_paths: &'a [(&'a str, &'a str)],
    /// Whether servers are generated beside the clients.
    pub(crate) servers: bool,
    /// The files checked in, one per protobuf package generated here.
    pub(crate) files: &'a [&'a str],
    /// The files the generator writes for the `extern_paths` packages, not kept here.
    pub(crate) elsewhere: &'a [&'a str],
    /// Where `files` are checked in.
    pub(crate) checked_in: PathBuf,
    /// The command that regenerates them.
    pub(crate) regenerate: &'a str,
}

impl Generated<'_> {
    /// Fails on a checked-in file that differs from what the generator writes today (writes it
    /// instead with `REDLIMIT_REGENERATE_PROTO=1`), and on a file the generator writes that
    /// neither `files` nor `elsewhere` names.
    pub(crate) fn check(&self) {
        let scratch = std::env::temp_dir().join(format!("redlimit-proto-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).expect("temp dir");
        self.generate(&scratch);
        let regenerate = std::env::var_os("REDLIMIT_REGENERATE_PROTO").is_some_and(|v| v == "1");
        let mut stale = Vec::new();
        for name in self.files {
            let fresh = std::fs::read_to_string(scratch.join(name)).expect("generated file");
            let path = self.checked_in.join(name);
            if regenerate {
                std::fs::write(&path, &fresh).expect("write generated file");
            } else if std::fs::read_to_string(&path).ok().as_deref() != Some(fresh.as_str()) {
                stale.push(*name);
            }
        }
        let extra: Vec<_> = std::fs::read_dir(&scratch)
            .expect("temp dir")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| !self.files.contains(&n.as_str()) && !self.elsewhere.contains(&n.as_str()))
            .collect();
        let _ = std::fs::remove_dir_all(&scratch);
        assert!(
            extra.is_empty(),
            "the generator wrote files not named: {extra:?}"
        );
        assert!(
            stale.is_empty(),
            "{} is stale for {stale:?}: run {}",
            self.checked_in.display(),
            self.regenerate
        );
    }

    fn generate(&self, out: &Path) {
        let descriptors = protox::compile(self.roots, self.includes).expect("the protos compile");
        let mut builder = tonic_prost_build::configure()
            .build_server(self.servers)
            .build_client(true)
            .build_transport(false)
            .out_dir(out);
        for (proto, rust) in self.extern_paths {
            builder = builder.extern_path(*proto, *rust);
        }
        builder
            .compile_fds(descriptors)
            .expect("tonic-prost-build generates");
        // Envoy's comments are reStructuredText: as rustdoc they would be broken links and
        // indented "code" run as doctests. The .proto files are the documentation.
        for entry in std::fs::read_dir(out).expect("generated files") {
            let path = entry.expect("generated file").path();
            let text = std::fs::read_to_string(&path).expect("generated file");
            let kept: String = text
                .lines()
                .filter(|line| !line.trim_start().starts_with("///"))
                .flat_map(|line| [line, "\n"])
                .collect();
            std::fs::write(&path, kept).expect("generated file");
        }
    }
}
