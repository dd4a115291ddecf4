//! Redis errors as the crate's errors: the kind decides the variant, the `redis::RedisError`
//! stays the source, and configuration texts never carry credentials.

use redis::{ErrorKind, RedisError};

use super::redact::{Redacted, scrub};
use crate::error::{ConfigError, StoreError};

/// A Redis error as a store error: failures to reach, authenticate to or find the server are
/// connection errors; replies the script never gives are unexpected replies; errors the server
/// answered with are script errors.
pub(super) fn store_error(err: RedisError) -> StoreError {
    let connection = err.is_io_error()
        || err.is_connection_refusal()
        || err.is_connection_dropped()
        || err.is_timeout()
        || matches!(
            err.kind(),
            ErrorKind::Io
                | ErrorKind::AuthenticationFailed
                | ErrorKind::ClusterConnectionNotFound
                | ErrorKind::InvalidClientConfig
                | ErrorKind::RESP3NotSupported
                | ErrorKind::MasterNameNotFoundBySentinel
                | ErrorKind::NoValidReplicasFoundBySentinel
                | ErrorKind::EmptySentinelList
        );
    if connection {
        return StoreError::connection(err);
    }
    if err.code() == Some("CLOCKSKEW") {
        // `lua/calendar_window.lua`: Redis's time is outside the windows this client sent.
        return StoreError::ClockSkew(err.detail().unwrap_or_default().to_owned());
    }
    match err.kind() {
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => {
            StoreError::UnexpectedReply(err.to_string())
        }
        _ => StoreError::script(err),
    }
}

/// A Redis error met while configuring a store for `urls`: the redacted URLs, then the error
/// with any credential of theirs scrubbed.
pub(super) fn config_error<'a>(
    urls: impl IntoIterator<Item = &'a str> + Clone,
    err: &RedisError,
) -> ConfigError {
    let shown: Vec<String> = urls
        .clone()
        .into_iter()
        .map(|u| Redacted(u).to_string())
        .collect();
    ConfigError::Redis(format!(
        "{}: {}",
        shown.join(", "),
        scrub(&err.to_string(), urls)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    fn server_error(reply: &[u8]) -> RedisError {
        redis::parse_redis_value(reply)
            .and_then(redis::Value::extract_error)
            .unwrap_err()
    }

    #[test]
    fn unreachable_servers_are_connection_errors() {
        let errors: Vec<RedisError> = vec![
            io::Error::from(io::ErrorKind::ConnectionRefused).into(),
            io::Error::from(io::ErrorKind::ConnectionReset).into(),
            io::Error::from(io::ErrorKind::BrokenPipe).into(),
            io::Error::from(io::ErrorKind::TimedOut).into(),
            (ErrorKind::Io, "connection closed").into(),
            (ErrorKind::AuthenticationFailed, "WRONGPASS").into(),
            (ErrorKind::ClusterConnectionNotFound, "no node").into(),
            (ErrorKind::MasterNameNotFoundBySentinel, "no master").into(),
        ];
        for err in errors {
            let text = err.to_string();
            let mapped = store_error(err);
            assert!(mapped.is_connection(), "{text}: {mapped:?}");
            let source = std::error::Error::source(&mapped).unwrap();
            assert!(source.downcast_ref::<RedisError>().is_some());
        }
    }

    #[test]
    fn server_replies_are_script_errors() {
        for reply in [
            &b"-ERR user_script:1: boom\r\n"[..],
            b"-BUSY Redis is busy running a script\r\n",
            b"-OOM command not allowed\r\n",
            b"-READONLY You can't write against a read only replica.\r\n",
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ] {
            let mapped = store_error(server_error(reply));
            assert!(mapped.is_script(), "{reply:?}: {mapped:?}");
            let source = std::error::Error::source(&mapped).unwrap();
            assert!(source.downcast_ref::<RedisError>().is_some());
        }
    }

    #[test]
    fn garbage_replies_are_unexpected() {
        let parse: RedisError =
            redis::from_redis_value::<Vec<i64>>(redis::Value::SimpleString("nope".into()))
                .unwrap_err()
                .into();
        let typed: RedisError = (ErrorKind::UnexpectedReturnType, "not integers").into();
        for err in [parse, typed] {
            let mapped = store_error(err);
            assert!(
                matches!(mapped, StoreError::UnexpectedReply(_)),
                "{mapped:?}"
            );
        }
    }

    #[test]
    fn config_errors_show_no_credentials() {
        let url = "redis://admin:hunter2@db:6379";
        let err = RedisError::from((
            ErrorKind::InvalidClientConfig,
            "bad",
            format!("echoed {url} and hunter2"),
        ));
        let text = config_error([url], &err).to_string();
        assert!(
            !text.contains("hunter2") && !text.contains("admin"),
            "{text}"
        );
        assert!(text.contains("redis://db:6379"), "{text}");
    }
}
