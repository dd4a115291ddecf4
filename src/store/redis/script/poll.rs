//! The overrides poll's script (`lua/overrides_poll.lua`), hashed once: the poll sends its
//! `EVALSHA_RO` (it only reads; Redis 7 and later), or its `EVALSHA` where Redis knows no
//! `EVALSHA_RO` (Redis 6). The store loads it before its first poll (`poll.rs`), and
//! `call::evalsha` loads it again on `NOSCRIPT` (Redis restarted) as it does a check's. Not
//! the text by `EVAL` every poll: Redis would hash it on every call. Read-only, it is also
//! counted apart from the checks' `EVALSHA` in Redis's command statistics.

use std::sync::LazyLock;

use redis::RedisError;

/// The poll script.
pub(crate) fn script() -> &'static redis::Script {
    static SCRIPT: LazyLock<redis::Script> =
        LazyLock::new(|| redis::Script::new(include_str!("../../../../lua/overrides_poll.lua")));
    &SCRIPT
}

/// The head of a poll's call: `EVALSHA_RO` (or `EVALSHA` if `plain`), the script's hash, its
/// number of keys.
pub(crate) fn poll_command(plain: bool, keys: usize) -> redis::Cmd {
    let mut command = redis::cmd(if plain { "EVALSHA" } else { "EVALSHA_RO" });
    command.arg(script().get_hash()).arg(keys);
    command
}

/// Whether `err` is a server's refusal of a command it does not know (`EVALSHA_RO` before
/// Redis 7): the call never ran.
pub(crate) fn unknown_command(err: &RedisError) -> bool {
    err.code() == Some("ERR")
        && err
            .detail()
            .is_some_and(|d| d.starts_with("unknown command"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_command_is_told_from_other_errors() {
        let parse = |reply: &str| {
            redis::parse_redis_value(reply.as_bytes())
                .and_then(redis::Value::extract_error)
                .unwrap_err()
        };
        assert!(unknown_command(&parse(
            "-ERR unknown command 'EVALSHA_RO', with args beginning with: \r\n"
        )));
        assert!(!unknown_command(&parse(
            "-ERR wrong number of arguments\r\n"
        )));
        assert!(!unknown_command(&parse(
            "-NOSCRIPT No matching script.\r\n"
        )));
    }
}
