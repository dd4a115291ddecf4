//! The end of a script, written for one signature: it calls each limit's algorithm (the
//! functions `lua/*.lua` define), commits all limits or none, and replies (the contract heads
//! `lua/prelude.lua`). Written out limit by limit rather than looping over tables: with every
//! value a local, a decision allocates nothing but its reply, which is what lets a script of
//! several algorithms cost what a hand-written one does.
//!
//! For `gcra` then `fixed_window`, it reads:
//!
//! ```lua
//! local ok1, rb1, ra1, sb1, sa1, retry1, state1, ttl1 = gcra(redis.call('GET', KEYS[1]), ARGV[3] + 0, ARGV[4] + 0, cost, now)
//! local ok2, rb2, ra2, sb2, sa2, retry2, state2, ttl2 = fixed_window(redis.call('GET', KEYS[2]), ARGV[5] + 0, ARGV[6] + 0, cost, now)
//! if ok1 and ok2 then
//!   if ttl1 > 0 then redis.call('SET', KEYS[1], state1, 'PX', math.ceil(ttl1 / 1000) + ttl_slack_ms) elseif ttl1 < 0 then redis.call('SET', KEYS[1], state1, 'KEEPTTL') else redis.call('DEL', KEYS[1]) end
//!   if ttl2 > 0 then redis.call('SET', KEYS[2], state2, 'PX', math.ceil(ttl2 / 1000) + ttl_slack_ms) elseif ttl2 < 0 then redis.call('SET', KEYS[2], state2, 'KEEPTTL') else redis.call('DEL', KEYS[2]) end
//!   return { now, sa1, ra2 }
//! end
//! return { now, 0, ok1 and 1 or 0, rb1, sb1, retry1, ok2 and 1 or 0, rb2, sb2, retry2 }
//! ```
//!
//! Sliding-log limits share one sorted set: it is opened once, before the limits, with the
//! longest log period as its span (`lua/sliding_log_open.lua`, spliced in: no call), and
//! committed once, with the TTL the store passes (a string written once in Rust costs Redis
//! less than a number converted on every call). A log limit admits inline; only a denial
//! calls `sliding_log` for its figures.

use std::fmt::Write as _;

use super::reply::Admitted;
use super::signature::Signature;
use crate::limit::Algorithm;

/// Where a tail finds its limits and puts its reply: a script of one decision reads
/// `KEYS[i]` and `ARGV[n]` and returns its reply; a batch's decision function
/// (`batch.rs`) reads them at its offsets and writes its reply into `out`.
#[derive(Clone, Copy)]
pub(super) enum Frame {
    /// The whole script decides once.
    Single,
    /// The tail is the body of `decide(out, len, o, a, q, now, cost, ttl_slack_ms)`, which
    /// returns the number of values it wrote: its keys from `KEYS[o + 1]`, its lease from
    /// `ARGV[a + 1]`, its limits' arguments (`params` of them: counts, periods, the logs' TTL,
    /// the penalty) from `ARGV[q + 1]`, the counts and periods also as numbers from
    /// `nums[q + 1]`.
    Batch {
        /// The number of the limits' arguments.
        params: usize,
        /// The number of the limits' counts and periods (the first of them), which the batch
        /// has made numbers in `nums` (same indices).
        numbers: usize,
        /// Every key holds a string, read by the batch with one `MGET` into `values`; a
        /// key marked in `reread` is read again with `GET` (see `source.rs`).
        mget: bool,
    },
}

impl Frame {
    pub(super) fn key(self, i: usize) -> String {
        match self {
            Frame::Single => format!("KEYS[{i}]"),
            Frame::Batch { .. } => format!("KEYS[o + {i}]"),
        }
    }

    pub(super) fn arg(self, n: usize) -> String {
        match self {
            Frame::Single => format!("ARGV[{n}]"),
            Frame::Batch {
                params, numbers, ..
            } => {
                // A run's time and cost precede its length, at `q`.
                if n <= 2 {
                    format!("ARGV[q - {}]", 3 - n)
                } else if n <= numbers + 2 {
                    format!("nums[q + {}]", n - 2)
                } else if n <= params + 2 {
                    format!("ARGV[q + {}]", n - 2)
                } else {
                    format!("ARGV[a + {}]", n - params - 2)
                }
            }
        }
    }

    /// The string key `i` holds (as `GET` answers it): the statements that read it, then the
    /// expression that names it.
    pub(super) fn value(self, i: usize) -> (String, String) {
        match self {
            Frame::Batch { mget: true, .. } => (
                format!(
                    "local v{i} = values[o + {i}]\nif reread[o + {i}] then v{i} = redis.call('GET', KEYS[o + {i}]) end\n"
                ),
                format!("v{i}"),
            ),
            _ => (String::new(), format!("redis.call('GET', {})", self.key(i))),
        }
    }

    /// A TTL in ms for `PX` or `PEXPIRE`, given its expression (a number): the statements
    /// that make it, then the expression to pass. A single call passes the number (Redis writes
    /// it as text); a batch passes text, made once per batch for each TTL, in `pxs`: its
    /// decisions share their time, so fresh keys of one limit share their TTL.
    pub(super) fn ttl_ms(self, ms: &str) -> (String, String) {
        match self {
            Frame::Single => (String::new(), ms.to_owned()),
            Frame::Batch { .. } => (
                format!(
                    "local ms = {ms} local px = pxs[ms] if not px then px = tostring(ms) pxs[ms] = px end "
                ),
                "px".to_owned(),
            ),
        }
    }

    /// `indent` then the statement(s) that answer `items` (`now` first).
    pub(super) fn reply(self, indent: &str, items: &[String]) -> String {
        match self {
            Frame::Single => format!("{indent}return {{ {} }}\n", items.join(", ")),
            // The time negative (`-1 - now`): a long answer, not an admission's short one.
            // One assignment per value: a multiple assignment of 66 values would need more
            // registers than a Lua function has.
            Frame::Batch { .. } => {
                let mut lua = String::new();
                for (x, item) in (1..).zip(items) {
                    if x == 1 {
                        let _ = writeln!(lua, "{indent}out[len + 1] = -1 - {item}");
                    } else {
                        let _ = writeln!(lua, "{indent}out[len + {x}] = {item}");
                    }
                }
                let _ = writeln!(lua, "{indent}return {}", items.len());
                lua
            }
        }
    }

    /// `indent` then the statement(s) that answer an admission's `items` (`now`, then the
    /// limits' values, `reply.rs`). In a batch, a decision at the batch's time answers the
    /// limits' values alone (the batch reply holds the time once); one at another time its
    /// time written `-1 - now`, then 1 (not a denial's 0 or 2), then the limits' values.
    pub(super) fn admission(self, indent: &str, items: &[String]) -> String {
        match self {
            Frame::Single => self.reply(indent, items),
            Frame::Batch { .. } => {
                let mut lua = format!("{indent}if now == batch_now then\n");
                for (x, item) in (1..).zip(&items[1..]) {
                    let _ = writeln!(lua, "{indent}  out[len + {x}] = {item}");
                }
                let _ = writeln!(lua, "{indent}  return {}", items.len() - 1);
                let _ = writeln!(lua, "{indent}end");
                let mut long = vec![items[0].clone(), "1".to_owned()];
                long.extend_from_slice(&items[1..]);
                lua.push_str(&self.reply(indent, &long));
                lua
            }
        }
    }
}

/// The tail for `signature`.
pub(super) fn tail(signature: Signature) -> String {
    tail_in(signature, Frame::Single)
}

/// The tail for `signature` in `frame`.
pub(super) fn tail_in(signature: Signature, frame: Frame) -> String {
    let algorithms: Vec<Algorithm> = signature.algorithms().collect();
    // Limit i (from 1) is KEYS[i], count ARGV[2i+1], period ARGV[2i+2].
    let limits = || (1..).zip(algorithms.iter().copied());
    let key = |i: usize| frame.key(i);
    let arg = |n: usize| frame.arg(n);
    let logs: Vec<usize> = limits()
        .filter(|(_, a)| *a == Algorithm::SlidingLog)
        .map(|(i, _)| i)
        .collect();
    let mut lua = String::from("-- The tail: every limit, then all or none committed.\n");
    let w = &mut lua;
    let k = algorithms.len();
    let boxed = key(k + 1);
    // The limits' other arguments: counts and periods, the logs' TTL, the penalty.
    let params = 2 * k + usize::from(!logs.is_empty()) + usize::from(signature.penalty());
    // With a cost per limit (`LimitCosts`), limit i's follows them, as `c{i}`; else every
    // limit is charged the check's `cost`.
    let costs = signature.costs();
    let cost = |i: usize| {
        if costs {
            format!("c{i}")
        } else {
            "cost".to_owned()
        }
    };
    if costs {
        for (i, _) in limits() {
            let _ = writeln!(w, "local c{i} = {} + 0", arg(params + 2 + i));
        }
    }
    let reply = |indent: &str, items: &[String]| frame.reply(indent, items);
    if signature.penalty() {
        w.push_str(&super::penalty::open(frame.value(k + 1), k, reply));
    }
    if let Some(&log) = logs.first() {
        for i in &logs {
            let _ = writeln!(w, "local p{i} = {} + 0", arg(2 * i + 2));
        }
        let periods: Vec<String> = logs.iter().map(|i| format!("p{i}")).collect();
        let span = match &periods[..] {
            [one] => one.clone(),
            many => format!("math.max({})", many.join(", ")),
        };
        let _ = writeln!(w, "local log_span = {span}");
        w.push_str(&open_log(&key(log)));
    }
    for (i, algorithm) in limits() {
        let count = format!("{} + 0", arg(2 * i + 1));
        if algorithm == Algorithm::SlidingLog {
            // The longest log limit's span starts at the base; a shorter one's at the newest
            // member at or before its own start, else at the base.
            if logs.len() == 1 {
                let _ = writeln!(w, "local before{i} = log_base");
            } else {
                let _ = writeln!(
                    w,
                    "local before{i} = p{i} == log_span and log_base or (tonumber(redis.call('ZREVRANGEBYSCORE', {}, log_at - p{i}, '-inf', 'LIMIT', '0', '1')[1]) or 1e15 + log_base) - 1e15",
                    key(i)
                );
            }
            // Admitted inline (what `sliding_log` answers for an admission, without the call).
            let _ = writeln!(
                w,
                "local n{i} = {count}\nlocal used{i} = log_total - before{i}\nlocal ok{i} = used{i} + {} <= n{i}",
                cost(i)
            );
        } else if algorithm == Algorithm::Concurrency {
            let _ = writeln!(
                w,
                "local p{i} = {} + 0\nlocal ok{i}, rb{i}, ra{i}, sb{i}, sa{i}, retry{i} = concurrency({}, {count}, p{i}, {}, now)",
                arg(2 * i + 2),
                key(i),
                cost(i)
            );
        } else {
            let (read, value) = frame.value(i);
            w.push_str(&read);
            let _ = writeln!(
                w,
                "local ok{i}, rb{i}, ra{i}, sb{i}, sa{i}, retry{i}, state{i}, ttl{i} = {}({value}, {count}, {}, {}, now)",
                algorithm.descriptor().lua_fn,
                period(algorithm, &arg(2 * i + 2)),
                cost(i)
            );
        }
    }
    let all_ok: Vec<String> = limits().map(|(i, _)| format!("ok{i}")).collect();
    let _ = writeln!(w, "if {} then", all_ok.join(" and "));
    for (i, algorithm) in limits() {
        if algorithm == Algorithm::Concurrency {
            // The lease id is the script's last argument, after the logs' TTL, the penalty and
            // the costs if any.
            let lease = arg(params + 3 + if costs { k } else { 0 });
            let (make, ms) = frame.ttl_ms(&format!("math.ceil(p{i} / 1000) + ttl_slack_ms"));
            let _ = writeln!(
                w,
                "  if {c} > 0 then redis.call('ZADD', {k}, now, {lease}) {make}redis.call('PEXPIRE', {k}, {ms}) end",
                c = cost(i),
                k = key(i)
            );
        } else if algorithm != Algorithm::SlidingLog {
            let k = key(i);
            let (make, ms) = frame.ttl_ms(&format!("math.ceil(ttl{i} / 1000) + ttl_slack_ms"));
            let _ = writeln!(
                w,
                "  if ttl{i} > 0 then {make}redis.call('SET', {k}, state{i}, 'PX', {ms}) elseif ttl{i} < 0 then redis.call('SET', {k}, state{i}, 'KEEPTTL') else redis.call('DEL', {k}) end"
            );
        }
    }
    if let Some(&log) = logs.first() {
        // The logs share one cost (`LimitCosts` refuses others): the first's.
        let _ = writeln!(
            w,
            "  if {c} > 0 and log_total == 0 then redis.call('ZADD', {k}, log_at, '1000000000000000', log_at, 1e15 + {c}) elseif {c} > 0 then redis.call('ZADD', {k}, log_at, 1e15 + log_total + {c}) end",
            c = cost(log),
            k = key(log)
        );
        let _ = writeln!(
            w,
            "  redis.call('PEXPIRE', {}, {})",
            key(log),
            arg(2 * algorithms.len() + 3)
        );
    }
    // An admission's reply: every limit allowed with no wait, so each says only what of its
    // remaining and reset the decoder cannot derive (`reply.rs`).
    let mut allowed = vec!["now".to_owned()];
    for (i, algorithm) in limits() {
        let admitted = Admitted::of(algorithm);
        if algorithm == Algorithm::SlidingLog {
            // A cost admitted starts a member that frees in p; a cost of 0 leaves the reset
            // the newest member's.
            let c = cost(i);
            allowed.extend(admitted.items(
                format!("n{i} - used{i} - {c}"),
                format!("{c} > 0 and p{i} or (used{i} > 0 and math.max(0, log_newest + p{i} - log_at) or 0)"),
            ));
        } else {
            allowed.extend(admitted.items(format!("ra{i}"), format!("sa{i}")));
        }
    }
    w.push_str(&frame.admission("  ", &allowed));
    let _ = writeln!(w, "end");
    for i in &logs {
        let _ = writeln!(
            w,
            "local _, rb{i}, _, sb{i}, _, retry{i} = sliding_log({}, n{i}, p{i}, {}, log_at, log_newest, log_total, before{i})",
            key(*i),
            cost(*i)
        );
    }
    if signature.penalty() {
        let penalty = arg(params + 2);
        w.push_str(&super::penalty::close(&boxed, &penalty, k, reply));
    }
    let mut denied = vec!["now".to_owned(), "0".to_owned()];
    for (i, _) in limits() {
        denied.extend([
            format!("ok{i} and 1 or 0"),
            format!("rb{i}"),
            format!("sb{i}"),
            format!("retry{i}"),
        ]);
    }
    w.push_str(&frame.reply("", &denied));
    lua
}

/// The expression that passes a limit of `algorithm` its period argument `arg`: as a number,
/// but a calendar window's as the text it is (its windows' boundaries,
/// `lua/calendar_window.lua`).
pub(super) fn period(algorithm: Algorithm, arg: &str) -> String {
    if algorithm == Algorithm::Calendar {
        arg.to_owned()
    } else {
        format!("{arg} + 0")
    }
}

/// The Lua that opens the sliding log at `key`, after `log_span` is defined: the spliced
/// `lua/sliding_log_open.lua`, which leaves `log_at`, `log_newest`, `log_total`, `log_base`.
pub(super) fn open_log(key: &str) -> String {
    format!("local log_key = {key}\n{OPEN_LOG}")
}

/// The opening of a sliding log (see [`open_log`]).
const OPEN_LOG: &str = include_str!("../../../../lua/sliding_log_open.lua");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Limit;
    use std::time::Duration;

    fn tail_of(algorithms: &[Algorithm]) -> String {
        let limits: Vec<Limit> = algorithms
            .iter()
            .map(|a| Limit::new(*a, 10, Duration::from_secs(1)).unwrap())
            .collect();
        tail(Signature::of(&limits))
    }

    #[test]
    fn reads_as_the_module_documentation_shows() {
        let lua = tail_of(&[Algorithm::Gcra, Algorithm::FixedWindow]);
        let documented: String = include_str!("tail.rs")
            .lines()
            .skip_while(|l| *l != "//! ```lua")
            .skip(1)
            .take_while(|l| *l != "//! ```")
            .map(|l| format!("{}\n", l.strip_prefix("//! ").unwrap_or("")))
            .collect();
        assert_eq!(
            lua.lines().skip(1).collect::<Vec<_>>().join("\n") + "\n",
            documented
        );
    }

    #[test]
    fn opens_and_commits_a_shared_log_once() {
        let lua = tail_of(&[
            Algorithm::SlidingLog,
            Algorithm::Gcra,
            Algorithm::SlidingLog,
        ]);
        assert_eq!(lua.matches("local log_key = KEYS[1]\n").count(), 1);
        assert_eq!(
            lua.matches("'ZRANGE', log_key, '-1'").count(),
            1,
            "the log read once"
        );
        assert!(lua.contains("local log_span = math.max(p1, p3)"));
        assert!(lua.contains(
            "p3 == log_span and log_base or (tonumber(redis.call('ZREVRANGEBYSCORE', KEYS[3]"
        ));
        assert_eq!(
            lua.matches("'ZADD'").count(),
            2,
            "into an empty log, or not"
        );
        assert_eq!(lua.matches("'PEXPIRE'").count(), 1);
        assert!(lua.contains("redis.call('PEXPIRE', KEYS[1], ARGV[9])"));
        assert_eq!(
            lua.matches("'SET'").count(),
            2,
            "PX or KEEPTTL, for the one other limit"
        );
    }

    #[test]
    fn a_lease_is_added_only_when_every_limit_allows() {
        let lua = tail_of(&[Algorithm::SlidingLog, Algorithm::Concurrency]);
        assert!(lua.contains("= concurrency(KEYS[2], ARGV[5] + 0, p2, cost, now)"));
        let commit = &lua[lua.find("if ok1 and ok2 then").unwrap()..];
        // After two limits' counts and periods, the time, the cost and the logs' TTL.
        assert!(commit.contains("redis.call('ZADD', KEYS[2], now, ARGV[8])"));
        assert!(commit.contains("redis.call('PEXPIRE', KEYS[2], math.ceil(p2 / 1000)"));
        let alone = tail_of(&[Algorithm::Concurrency]);
        assert!(alone.contains("redis.call('ZADD', KEYS[1], now, ARGV[5])"));
    }

    #[test]
    fn a_cost_per_limit_follows_the_limits_arguments_and_moves_the_lease() {
        let algorithms = [
            Algorithm::SlidingLog,
            Algorithm::Gcra,
            Algorithm::Concurrency,
        ];
        let limits: Vec<Limit> = algorithms
            .iter()
            .map(|a| Limit::new(*a, 10, Duration::from_secs(1)).unwrap())
            .collect();
        let lua = tail(Signature::of(&limits).with_costs(true));
        // Three counts and periods, then the logs' TTL: the costs are ARGV[10..=12].
        for (i, n) in [(1, 10), (2, 11), (3, 12)] {
            assert!(
                lua.contains(&format!("local c{i} = ARGV[{n}] + 0\n")),
                "{lua}"
            );
        }
        assert!(lua.contains("local ok1 = used1 + c1 <= n1"));
        assert!(
            lua.contains("gcra(redis.call('GET', KEYS[2]), ARGV[5] + 0, ARGV[6] + 0, c2, now)")
        );
        assert!(lua.contains("concurrency(KEYS[3], ARGV[7] + 0, p3, c3, now)"));
        assert!(lua.contains("if c3 > 0 then redis.call('ZADD', KEYS[3], now, ARGV[13])"));
        assert!(lua.contains("1e15 + c1"), "the log is charged its own cost");
        assert!(
            !lua.contains(", cost, now)"),
            "no limit is charged the check's cost"
        );
        // Without costs, as before.
        assert!(!tail(Signature::of(&limits)).contains("local c1"));
    }

    #[test]
    fn a_single_log_starts_at_its_base() {
        let lua = tail_of(&[Algorithm::SlidingLog]);
        assert!(lua.contains("local log_span = p1\n"));
        assert!(lua.contains("local before1 = log_base\n"));
        assert!(!lua.contains("ZREVRANGEBYSCORE"));
    }
}
