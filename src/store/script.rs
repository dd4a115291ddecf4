//! The Lua script: a prelude, the five algorithm files and the check loop, assembled at
//! compile time into one script (see `lua/prelude.lua` for its contract).

use crate::limit::{Algorithm, Limit};

/// The whole script, as sent to Redis.
pub(crate) const SOURCE: &str = concat!(
    include_str!("../../lua/prelude.lua"),
    include_str!("../../lua/fixed_window.lua"),
    include_str!("../../lua/sliding_window.lua"),
    include_str!("../../lua/sliding_log.lua"),
    include_str!("../../lua/token_bucket.lua"),
    include_str!("../../lua/gcra.lua"),
    include_str!("../../lua/check.lua"),
);

/// The state key of one limit: `{prefix}:{policy}:{{key}}:{suffix}`. The braces make the key
/// the cluster hash tag; [`Key`](crate::Key) text never contains braces, so every key of one
/// evaluation hashes to one slot. The suffix names the algorithm and numbers, so a changed
/// limit starts fresh instead of misreading old state; sliding logs share one key.
pub(crate) fn state_key(prefix: &str, policy: &str, key: &str, limit: &Limit) -> String {
    match limit.algorithm() {
        Algorithm::SlidingLog => format!("{prefix}:{policy}:{{{key}}}:sl"),
        algorithm => format!(
            "{prefix}:{policy}:{{{key}}}:{}:{}:{}",
            algorithm.code(),
            limit.count(),
            limit.period_us()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn keys_share_a_hash_tag() {
        let l = Limit::gcra(5, Duration::from_secs(1));
        assert_eq!(
            state_key("rl", "login", "ip:1.2.3.4", &l),
            "rl:login:{ip:1.2.3.4}:gc:5:1000000"
        );
        let s = Limit::sliding_log(5, Duration::from_secs(1));
        assert_eq!(
            state_key("rl", "login", "ip:1.2.3.4", &s),
            "rl:login:{ip:1.2.3.4}:sl"
        );
    }

    #[test]
    fn script_is_assembled_in_order() {
        let prelude = SOURCE.find("local function int(").unwrap();
        let gcra = SOURCE.find("local function gcra_check(").unwrap();
        let tail = SOURCE.find("local checks = {").unwrap();
        assert!(prelude < gcra && gcra < tail);
    }
}
