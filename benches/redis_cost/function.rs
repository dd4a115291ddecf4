//! The store's GCRA script loaded as a Redis 7 function (`FUNCTION LOAD`, `FCALL`) instead of
//! a script (`EVALSHA`): the same Lua, its algorithm defined once at load rather than on every
//! call. The store does not do this (yet); the row measures what it would gain.

use redlimit::__private::script_call;
use redlimit::Policy;
use redlimit::store::RedisStore;

/// The function's name, and its library's.
const NAME: &str = "redlimit_bench_gcra";

/// Loads the library built from the store's script for `policy` (a GCRA policy); returns the
/// `FCALL` of client key `i`, with the very keys and arguments of the store's `EVALSHA`. `None`
/// where the server has no functions (before Redis 7).
pub(crate) fn load(
    con: &mut redis::Connection,
    policy: &Policy,
) -> Option<impl Fn(usize) -> redis::Cmd + use<>> {
    let script = RedisStore::script_source_for(policy);
    let prelude = include_str!("../../lua/prelude.lua");
    // The prelude's statements run per call; the algorithm's function is defined once.
    let per_call = &prelude[prelude
        .find("if not redis.REDIS_VERSION")
        .expect("prelude code")..];
    let tail = &script[script.find("-- The tail").expect("the tail")..];
    let library = format!(
        "#!lua name={NAME}\n{}\nredis.register_function('{NAME}', function(KEYS, ARGV)\n{per_call}\n{tail}\nend)\n",
        include_str!("../../lua/gcra.lua"),
    );
    let loaded: redis::RedisResult<String> = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(&library)
        .query(con);
    if let Err(err) = loaded {
        eprintln!("redis_cost: no function row: {err}");
        return None;
    }
    let policy = policy.clone();
    Some(move |i| {
        let call = script_call("redlimit", &policy, &crate::support::client_key(i), 1);
        let mut fcall = redis::cmd("FCALL");
        fcall.arg(NAME);
        for word in call.words().iter().skip(2) {
            fcall.arg(word);
        }
        fcall
    })
}
