//! A Redis Cluster: redirects followed, the script loaded on every primary, a call sent again
//! only after a refusal that proves it did not run, and the whole connection rebuilt when calls
//! for one slot range go unanswered (a hung master).
//!
//! redis-rs refreshes its slot map after `MOVED` and reconnects a node after I/O errors, but a
//! frozen master gives neither: calls for its slots just hang, long after its replica took
//! over. A fresh connection reads the slot map from a healthy node and routes those calls to
//! the promoted replica; until the Cluster has failed over, the rebuilds repeat at most once a
//! second.

use std::sync::Arc;
use std::time::Duration;

use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Arg, Cmd, ErrorKind, FromRedisValue, RedisError, RedisResult, ServerErrorKind};

use super::heal::{Dial, Healing};
use super::script::evalsha;
use super::slot::{RANGES, SLOTS_PER_RANGE, slot};

/// How often a Cluster call is re-sent after a refusal that proves it did not run.
const CLUSTER_ATTEMPTS: u32 = 3;

/// The number of health buckets of a Cluster connection: one per slot range, as the layer's
/// circuit breakers.
pub(super) const BUCKETS: usize = RANGES;

/// Dials a Cluster: connects to the seed nodes and reads the slot map. Its own retries are off
/// (they would replay a call after an I/O error); refusals that prove the call did not run are
/// retried here.
pub(super) struct ClusterDial(pub(super) ClusterClient);

impl Dial for ClusterDial {
    type Connection = ClusterConnection;

    fn dial(&self) -> impl std::future::Future<Output = RedisResult<ClusterConnection>> + Send {
        self.0.get_async_connection()
    }
}

impl Healing<ClusterDial> {
    pub(super) async fn run<T: FromRedisValue>(self: &Arc<Self>, command: &Cmd) -> RedisResult<T> {
        self.call(bucket(command), |mut connection| async move {
            let mut attempt = 1;
            loop {
                match evalsha(command, &mut connection).await {
                    Err(err) if attempt < CLUSTER_ATTEMPTS && refused_unrun(&err) => {
                        tokio::time::sleep(Duration::from_millis(5 * u64::from(attempt))).await;
                        attempt += 1;
                    }
                    result => return result,
                }
            }
        })
        .await
    }
}

/// Whether the server refused the call before running it, so sending it again cannot count
/// twice: a redirect while slots move, or a cluster that is briefly down.
fn refused_unrun(err: &RedisError) -> bool {
    err.redirect_node().is_some()
        || matches!(
            err.kind(),
            ErrorKind::Server(
                ServerErrorKind::Moved
                    | ServerErrorKind::Ask
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
            )
        )
}

/// The health bucket of a script call: the slot range of its first key (`EVALSHA sha n key..`;
/// all its keys share one hash tag).
fn bucket(command: &Cmd) -> usize {
    match command.args_iter().nth(3) {
        Some(Arg::Simple(key)) => usize::from(slot(key) / SLOTS_PER_RANGE),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_lands_in_its_key_s_slot_range() {
        let mut command = redis::cmd("EVALSHA");
        command
            .arg("sha")
            .arg(1)
            .arg("rl:p:{foo}:sl")
            .arg("")
            .arg(1);
        assert_eq!(bucket(&command), usize::from(12_182 / SLOTS_PER_RANGE));
        assert!(bucket(&command) < BUCKETS);
    }
}
