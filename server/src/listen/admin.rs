//! The admin listener (`REDLIMIT_ADMIN_PORT`, 6071), on only when a token is given: the
//! library's `redlimit::rls::admin` router (a descriptor's counters inspected and reset, its
//! limits overridden, shadow mode turned on and off) behind `Authorization: Bearer TOKEN`.
//!
//! The token comes from a file (`REDLIMIT_ADMIN_TOKEN_FILE`, a mounted secret) or the
//! environment (`REDLIMIT_ADMIN_TOKEN`, never a flag): never from argv, where the process
//! list would show it.

use redlimit::admin::AdminToken;

use crate::settings::Settings;

/// The variable that may hold the token itself.
const TOKEN_VAR: &str = "REDLIMIT_ADMIN_TOKEN";

/// The admin token, if one is given; an error names the variable or the file, never the
/// token.
pub(crate) fn token(
    settings: &Settings,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<AdminToken>, String> {
    let from_env = env(TOKEN_VAR).filter(|v| !v.is_empty());
    match (&settings.admin_token_file, from_env) {
        (Some(_), Some(_)) => Err(format!(
            "{TOKEN_VAR} and REDLIMIT_ADMIN_TOKEN_FILE are both set: give the token one way"
        )),
        (Some(path), None) => AdminToken::from_file(path)
            .map(Some)
            .map_err(|e| format!("REDLIMIT_ADMIN_TOKEN_FILE: {e}")),
        (None, Some(secret)) => AdminToken::new(secret)
            .map(Some)
            .map_err(|e| format!("{TOKEN_VAR}: {e}")),
        (None, None) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn the_token_comes_one_way_and_errors_never_show_it() {
        let plain = Settings::try_parse_from(["redlimit-server"]).unwrap();
        assert!(token(&plain, |_| None).unwrap().is_none());
        assert!(token(&plain, |_| Some(String::new())).unwrap().is_none());
        let given = token(&plain, |_| Some("s3cret".into())).unwrap().unwrap();
        assert!(given.matches("s3cret"));
        let bad = token(&plain, |_| Some("has space s3cret".into())).unwrap_err();
        assert!(!bad.contains("s3cret"), "{bad}");
        let path =
            std::env::temp_dir().join(format!("redlimit-admin-token-{}", std::process::id()));
        std::fs::write(&path, "from-file\n").unwrap();
        let filed = Settings::try_parse_from([
            "redlimit-server",
            "--admin-token-file",
            path.to_str().unwrap(),
        ])
        .unwrap();
        assert!(
            token(&filed, |_| None)
                .unwrap()
                .unwrap()
                .matches("from-file")
        );
        assert!(token(&filed, |_| Some("x".into())).is_err(), "both ways");
        std::fs::remove_file(&path).unwrap();
        let missing =
            Settings::try_parse_from(["redlimit-server", "--admin-token-file", "/nonexistent/t"])
                .unwrap();
        assert!(
            token(&missing, |_| None)
                .unwrap_err()
                .contains("/nonexistent/t")
        );
    }
}
