//! The penalty box on Redis: one key beside the key's state (same hash tag, so the same
//! cluster slot and the same script call) holding until when the key is boxed, in Unix µs,
//! with a TTL of the penalty. The tail (`tail.rs`) of a policy with a penalty box reads it
//! first: a boxed key is denied at once, nothing else read; and it writes it when a limit
//! denies a request (unless the cost exceeds what some limit could ever admit).
//!
//! The contract of `lua/prelude.lua` grows by one key and one argument: `KEYS[k+1]` the box,
//! the last `ARGV` the penalty in µs. A decision made or found in the box replies `2` for
//! `allowed`.

use std::fmt::Write as _;

use crate::key::Key;
use crate::policy::Policy;

/// The box of `key` under `policy`: the first state key's hash tag and prefix, then `:pb`
/// (`rl:login:{ip:1.2.3.4}:pb`).
pub(crate) fn box_key(prefix: &str, policy: &Policy, key: &Key) -> String {
    beside(prefix, policy, key, "pb")
}

/// A key of `key` under `policy` named `suffix`, in the same slot as its state: after the
/// check's hash tag, and for a key with limit keys after the key itself (a box holds the
/// client, not its tenant).
pub(crate) fn beside(prefix: &str, policy: &Policy, key: &Key, suffix: &str) -> String {
    let name = policy.name();
    if key.has_limit_keys() {
        format!(
            "{prefix}:{name}:{{{}}}:{}:{suffix}",
            key.hash_tag(),
            key.as_str()
        )
    } else {
        format!("{prefix}:{name}:{{{}}}:{suffix}", key.as_str())
    }
}

/// The Lua that answers at once for a boxed key: every limit denied with nothing remaining
/// until the box ends. `boxed` reads the box key's value: the statements, then the expression
/// (`tail::Frame::value`); `reply` writes a reply.
pub(super) fn open(
    boxed: (String, String),
    limits: usize,
    reply: impl Fn(&str, &[String]) -> String,
) -> String {
    let (read, value) = boxed;
    let mut lua = read;
    let _ = writeln!(lua, "local box_until = tonumber({value} or '0') or 0");
    let _ = writeln!(lua, "if box_until > now then");
    let _ = writeln!(lua, "  local left = box_until - now");
    let mut items = vec!["now".to_owned(), "2".to_owned()];
    for _ in 0..limits {
        items.extend(["0", "0", "left", "left"].map(str::to_owned));
    }
    lua.push_str(&reply("  ", &items));
    lua.push_str("end\n");
    lua
}

/// The Lua that boxes the key on a denial (unless some limit can never admit the cost) and
/// replies with every denying limit's wait at least the penalty. `penalty` is the argument's
/// expression.
pub(super) fn close(
    boxed: &str,
    penalty: &str,
    limits: usize,
    reply: impl Fn(&str, &[String]) -> String,
) -> String {
    let mut lua = String::new();
    let finite: Vec<String> = (1..=limits)
        .map(|i| format!("(ok{i} or retry{i} >= 0)"))
        .collect();
    let _ = writeln!(lua, "if {} then", finite.join(" and "));
    let _ = writeln!(lua, "  local pen = tonumber({penalty})");
    let _ = writeln!(
        lua,
        "  redis.call('SET', {boxed}, now + pen, 'PX', math.ceil(pen / 1000) + ttl_slack_ms)"
    );
    let mut items = vec!["now".to_owned(), "2".to_owned()];
    for i in 1..=limits {
        items.extend([
            format!("ok{i} and 1 or 0"),
            format!("rb{i}"),
            format!("ok{i} and sb{i} or math.max(sb{i}, pen)"),
            format!("ok{i} and 0 or math.max(retry{i}, pen)"),
        ]);
    }
    lua.push_str(&reply("  ", &items));
    lua.push_str("end\n");
    lua
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Limit;
    use std::time::Duration;

    fn signature(limits: &[Limit]) -> super::super::signature::Signature {
        super::super::signature::Signature::of(limits).with_penalty(true)
    }

    #[test]
    fn the_box_is_read_before_any_limit_and_set_on_a_denial() {
        let limits = [
            Limit::gcra(5, Duration::from_secs(1)).unwrap(),
            Limit::sliding_log(5, Duration::from_secs(1)).unwrap(),
        ];
        let lua = super::super::tail::tail(signature(&limits));
        let read = lua
            .find("redis.call('GET', KEYS[3])")
            .expect("the box read");
        assert!(read < lua.find("gcra(redis.call('GET', KEYS[1])").unwrap());
        assert!(read < lua.find("local log_key = KEYS[2]").unwrap());
        // The penalty follows the logs' TTL: time, cost, two limits, TTL, penalty.
        assert!(lua.contains("local pen = tonumber(ARGV[8])"));
        assert!(lua.contains("(ok1 or retry1 >= 0) and (ok2 or retry2 >= 0)"));
        assert!(lua.contains("redis.call('SET', KEYS[3], now + pen, 'PX'"));
        let batch = super::super::source::batch_source(signature(&limits));
        assert!(batch.contains("local keys_each, args_each, params_each = 3, 0, 6\n"));
        assert!(batch.contains("tonumber(redis.call('GET', KEYS[o + 3]) or '0')"));
        assert!(batch.contains("local pen = tonumber(ARGV[q + 6])"));
        // Every key a string: the box read with the batch's one MGET.
        let strings = [Limit::gcra(5, Duration::from_secs(1)).unwrap()];
        let batch = super::super::source::batch_source(signature(&strings));
        assert!(batch.contains("local v2 = values[o + 2]\n"));
        assert!(batch.contains("local box_until = tonumber(v2 or '0') or 0"));
    }

    #[test]
    fn the_box_shares_the_state_s_hash_tag() {
        let policy =
            Policy::new("login", [Limit::gcra(5, Duration::from_secs(1)).unwrap()]).unwrap();
        assert_eq!(
            box_key("rl", &policy, &Key::new("ip:1.2.3.4")),
            "rl:login:{ip:1.2.3.4}:pb"
        );
    }
}
