//! The overrides poll's script (`lua/overrides_poll.lua`), hashed once: the poll sends its
//! `EVALSHA`, and `call::evalsha` loads it on `NOSCRIPT` as it does a check's.

use std::sync::LazyLock;

/// The poll script.
pub(crate) fn script() -> &'static redis::Script {
    static SCRIPT: LazyLock<redis::Script> =
        LazyLock::new(|| redis::Script::new(include_str!("../../../../lua/overrides_poll.lua")));
    &SCRIPT
}

/// The `EVALSHA` head of a poll: the command, the script's hash, its number of keys.
pub(crate) fn poll_command(keys: usize) -> redis::Cmd {
    let mut command = redis::cmd("EVALSHA");
    command.arg(script().get_hash()).arg(keys);
    command
}
