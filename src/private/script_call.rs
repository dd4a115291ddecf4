//! One script call as the Redis store sends it, for a test or a benchmark to send by hand: its
//! words, its bytes on the wire, or its reply from a connection of the caller's own.

use crate::error::StoreError;

/// A script call (`EVALSHA` or `EVAL`, its keys and arguments) as the Redis store would send
/// it. Opaque: a baseline reads its words or its encoding, or runs it, and the store's choice
/// of Redis client stays its own.
#[derive(Clone)]
pub struct ScriptCall(redis::Cmd);

impl ScriptCall {
    pub(crate) fn new(command: redis::Cmd) -> Self {
        ScriptCall(command)
    }

    /// The command's words: the command (`EVALSHA`), the script's SHA1 (or source), the
    /// number of keys, the keys, then the arguments.
    pub fn words(&self) -> Vec<Vec<u8>> {
        self.0
            .args_iter()
            .filter_map(|arg| match arg {
                redis::Arg::Simple(bytes) => Some(bytes.to_vec()),
                // A script call has no cursor argument.
                _ => None,
            })
            .collect()
    }

    /// The command as Redis reads it off the wire (RESP), to pipeline many by hand.
    pub fn packed(&self) -> Vec<u8> {
        self.0.get_packed_command()
    }

    /// Sends it on `connection` and returns the script's reply, a flat list of integers (a
    /// check's or a sync's; a refund's reply is a single integer: read it with [`packed`]'s
    /// bytes instead).
    ///
    /// [`packed`]: ScriptCall::packed
    pub fn run(&self, connection: &mut impl redis::ConnectionLike) -> Result<Vec<i64>, StoreError> {
        self.0
            .query(connection)
            .map_err(crate::store::redis_store_error)
    }

    /// [`ScriptCall::run`] on an asynchronous connection.
    pub async fn run_async(
        &self,
        connection: &mut impl redis::aio::ConnectionLike,
    ) -> Result<Vec<i64>, StoreError> {
        self.0
            .query_async(connection)
            .await
            .map_err(crate::store::redis_store_error)
    }
}

impl std::fmt::Debug for ScriptCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let words: Vec<String> = self
            .words()
            .iter()
            .map(|word| String::from_utf8_lossy(word).into_owned())
            .collect();
        f.debug_tuple("ScriptCall").field(&words).finish()
    }
}
