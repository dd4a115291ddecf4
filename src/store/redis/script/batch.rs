//! Several decisions of one script signature in one call: the batch script's `EVALSHA`,
//! written from the decisions' arguments, and its reply split back into one per decision.
//!
//! The batch script (`source.rs` writes it) runs the signature's tail as a function once per
//! decision, in order, each committed on its own, as if each were its own call. The tail is a
//! check's, or the always variant's (`always.rs`: every cost lands) for a signature of it,
//! whose decisions lay out their keys and arguments as its single call does (no penalty box,
//! no penalty, no lease). Its contract:
//!
//! - `KEYS`: the keys of each decision in turn (as in a single call: one per limit, and the
//!   penalty box's);
//! - `ARGV`: one run per stretch of consecutive decisions that share a time (`''` for Redis
//!   `TIME`), a cost and the limits' arguments (counts and periods, the logs' TTL, the
//!   penalty, the costs per limit): the time, the cost, the run's length in decisions, then
//!   those arguments (so `ARGV[1]` and `ARGV[2]` are the first decision's time and cost, as
//!   the prelude reads them); then each decision's own argument in turn (its lease id, with a concurrency
//!   limit); then, when every key holds a string (no sliding log, no concurrency limit: the
//!   script reads them all with one `MGET`), the positions in `KEYS` of the keys met earlier
//!   in the batch, space-separated, which it reads again;
//! - reply: the time of the first decision, then for each decision in turn its reply: an
//!   admission at that time answers its limits' values alone (a single call's admission
//!   without its time, `reply.rs`: the first of them is never negative); an admission at
//!   another time its time `t` written `-1 - t`, then 1, then those values; any other answer
//!   is a single call's long reply (`2 + 4k` integers, the second 0 or 2) with its time
//!   written `-1 - t`; or one string, the error it raised (`WRONGTYPE ...`), which fails that
//!   decision alone.

use std::collections::HashSet;
use std::fmt::Write as _;

use redis::{Arg, Cmd, ErrorKind, RedisError, RedisResult, Value};

use super::args::{check_bytes, push_time_and_cost};
use super::check::CheckArgs;
use super::registry::LuaScript;
use super::reply::Widths;

/// The `EVALSHA` of `script`'s batch script for `checks`, written straight from their
/// arguments (no check's own `EVALSHA` is made). Every check runs `script`.
pub(crate) fn batch_command<'a>(
    prefix: &str,
    script: &LuaScript,
    checks: impl Iterator<Item = &'a CheckArgs> + Clone,
) -> Cmd {
    let shape = script.shape;
    let (count, bytes) = checks.clone().fold((0, 0), |(count, bytes), check| {
        let own = check.lease.as_ref().map_or(0, String::len);
        (
            count + 1,
            bytes + check_bytes(prefix, &check.policy, &check.key) + own + 48,
        )
    });
    // Sized at once.
    let mut command = redis::Cmd::with_capacity(count * (shape.keys + 2 + shape.params) + 8, bytes);
    command
        .arg("EVALSHA")
        .arg(script.batch.get_hash())
        .arg(count * shape.keys);
    for check in checks.clone() {
        check.push_keys(&mut command, prefix);
    }
    let again = if shape.mget {
        keys_met_again(&command, count * shape.keys)
    } else {
        String::new()
    };
    // Runs of checks that share a time, a cost and the limits' arguments.
    let mut rest = checks.clone().peekable();
    while let Some(first) = rest.next() {
        let mut length = 1;
        while rest.next_if(|check| first.shares_run(check)).is_some() {
            length += 1;
        }
        push_time_and_cost(&mut command, first.clock, first.cost);
        command.arg(length);
        first.push_limit_args(&mut command);
    }
    for check in checks {
        if let Some(lease) = &check.lease {
            command.arg(lease.as_str());
        }
    }
    if shape.mget {
        command.arg(again);
    }
    command
}

/// The positions (from 1) among the first `keys` keys of `command` of those met earlier in
/// it, space-separated.
fn keys_met_again(command: &Cmd, keys: usize) -> String {
    let mut seen = HashSet::with_capacity_and_hasher(keys, foldhash::fast::FixedState::default());
    let mut again = String::new();
    // After the command, the SHA1 and the number of keys.
    for (position, key) in (1..).zip(command.args_iter().skip(3).take(keys)) {
        if let Arg::Simple(key) = key
            && !seen.insert(key)
        {
            if !again.is_empty() {
                again.push(' ');
            }
            // Into the one string: no allocation per repeated key.
            let _ = write!(again, "{position}");
        }
    }
    again
}

/// Splits a batch reply into one result per decision, each as its own call's reply, for
/// `decisions` of the same signature (`widths`). A reply of the wrong shape fails every
/// decision it cannot answer.
pub(crate) fn split(
    reply: Vec<Value>,
    decisions: usize,
    widths: Widths,
) -> Vec<RedisResult<Vec<i64>>> {
    let int = |v: &Value| match v {
        Value::Int(n) => Ok(*n),
        other => Err(malformed(&format!("{other:?} in a decision's reply"))),
    };
    let Some(Ok(batch_now)) = reply.first().map(int) else {
        let what = format!("{:?} for the batch's time", reply.first());
        return (0..decisions).map(|_| Err(malformed(&what))).collect();
    };
    let (short, long) = (widths.admitted, 2 + 4 * widths.limits);
    let mut results = Vec::with_capacity(decisions);
    let mut at = 1;
    while results.len() < decisions {
        let rest = reply.get(at..).unwrap_or_default();
        let short_reply = || malformed("a batch reply shorter than its decisions");
        // The decision's reply: its time, then its values.
        let answer = |time: i64, values: &[Value]| -> RedisResult<Vec<i64>> {
            let mut answer = Vec::with_capacity(1 + values.len());
            answer.push(time);
            for value in values {
                answer.push(int(value)?);
            }
            Ok(answer)
        };
        let result = match rest.first() {
            // An admission at the batch's time: its limits' values alone.
            Some(Value::Int(first)) if *first >= 0 => {
                at += short;
                rest.get(..short)
                    .ok_or_else(short_reply)
                    .and_then(|values| answer(batch_now, values))
            }
            // An admission at another time, its time written `-1 - t`, then 1, then its
            // limits' values; else a single call's long reply, its time so written.
            Some(Value::Int(time)) => {
                let (skip, width) = match rest.get(1) {
                    Some(Value::Int(1)) => (2, 2 + short),
                    _ => (1, long),
                };
                at += width;
                rest.get(skip..width)
                    .ok_or_else(short_reply)
                    .and_then(|values| answer(-1 - time, values))
            }
            Some(value) => {
                at += 1;
                match value {
                    Value::BulkString(text) => Err(raised(&String::from_utf8_lossy(text))),
                    Value::SimpleString(text) => Err(raised(text)),
                    other => Err(malformed(&format!("{other:?} for a decision"))),
                }
            }
            None => Err(short_reply()),
        };
        results.push(result);
    }
    results
}

/// The error a decision raised, as the server would have answered it to a single call: its
/// code (`WRONGTYPE`) first, or `ERR` for a Lua error without one.
fn raised(text: &str) -> RedisError {
    let line: String = text.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
    let coded = line
        .split(' ')
        .next()
        .is_some_and(|code| !code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase()));
    let reply = if coded {
        format!("-{line}\r\n")
    } else {
        format!("-ERR {line}\r\n")
    };
    match redis::parse_redis_value(reply.as_bytes()).and_then(Value::extract_error) {
        Err(err) => err,
        Ok(_) => malformed(&line),
    }
}

fn malformed(what: &str) -> RedisError {
    RedisError::from((ErrorKind::Parse, "unexpected batch reply", what.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::super::clock::Clock;
    use super::super::signature::Signature;
    use super::*;
    use crate::key::Key;
    use crate::limit::Limit;
    use crate::policy::Policy;
    use crate::store::redis::script::script_for;
    use std::time::Duration;

    fn check(policy: &Policy, key: &str, cost: u64, clock: Clock) -> CheckArgs {
        CheckArgs {
            policy: policy.clone(),
            key: Key::new(key),
            cost,
            costs: None,
            clock,
            lease: None,
            always: false,
        }
    }

    fn widths(limit: Result<Limit, crate::ConfigError>) -> Widths {
        Widths::of(Signature::of(&[limit.unwrap()]))
    }

    #[test]
    fn an_admission_at_the_batch_s_time_answers_what_its_limits_cannot_derive() {
        let gcra = Limit::gcra(5, Duration::from_secs(1)).unwrap();
        let window = Limit::sliding_window(9, Duration::from_secs(1)).unwrap();
        // GCRA one value, a sliding window two.
        let w = Widths::of(Signature::of(&[gcra, window]));
        let ints = |v: &[i64]| v.iter().map(|&n| Value::Int(n)).collect::<Vec<_>>();
        let results = split(ints(&[9, 200_000, 8, 500_000, 0, 7, 9]), 2, w);
        assert_eq!(results[0].as_ref().unwrap(), &[9, 200_000, 8, 500_000]);
        assert_eq!(results[1].as_ref().unwrap(), &[9, 0, 7, 9]);
    }

    fn texts(command: &Cmd) -> Vec<String> {
        command
            .args_iter()
            .map(|a| match a {
                Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => String::new(),
            })
            .collect()
    }

    #[test]
    fn keys_then_runs_of_shared_arguments_then_the_keys_met_again() {
        let policy = Policy::new(
            "p",
            [
                Limit::gcra(5, Duration::from_secs(1)).unwrap(),
                Limit::fixed_window(9, Duration::from_secs(2)).unwrap(),
            ],
        )
        .unwrap();
        let a = check(&policy, "a", 1, Clock::default());
        let b = check(&policy, "b", 1, Clock::default());
        let again = check(&policy, "a", 3, Clock::at(7));
        let script = script_for(policy.limits());
        let batch = batch_command("rl", script, [&a, &b, &again].into_iter());
        assert_eq!(
            texts(&batch),
            [
                "EVALSHA",
                script.batch.get_hash(),
                "6",
                "rl:p:{a}:gc0",
                "rl:p:{a}:fw1",
                "rl:p:{b}:gc0",
                "rl:p:{b}:fw1",
                "rl:p:{a}:gc0",
                "rl:p:{a}:fw1",
                // Two decisions at Redis time, cost 1, these limits;
                "",
                "1",
                "2",
                "5",
                "1000000",
                "9",
                "2000000",
                // then one at 7 µs, cost 3, the same limits;
                "7",
                "3",
                "1",
                "5",
                "1000000",
                "9",
                "2000000",
                // then the positions of the keys met earlier in the batch.
                "5 6",
            ]
        );
    }

    #[test]
    fn a_lease_is_a_decision_s_own_argument() {
        let policy = Policy::new(
            "p",
            [Limit::new(crate::Algorithm::Concurrency, 2, Duration::from_secs(5)).unwrap()],
        )
        .unwrap();
        let lease = |key: &str, id: &str| CheckArgs {
            lease: Some(id.to_owned()),
            ..check(&policy, key, 1, Clock::default())
        };
        let (a, b) = (lease("a", "l1"), lease("a", "l2"));
        let script = script_for(policy.limits());
        let batch = batch_command("rl", script, [&a, &b].into_iter());
        // No MGET of sorted sets: no positions to read again.
        assert_eq!(
            texts(&batch)[2..],
            [
                "2",
                "rl:p:{a}:cc",
                "rl:p:{a}:cc",
                "",
                "1",
                "2",
                "2",
                "5000000",
                "l1",
                "l2"
            ]
        );
    }

    #[test]
    fn an_error_fails_its_own_decision_only() {
        let ints = |v: &[i64]| v.iter().map(|&n| Value::Int(n)).collect::<Vec<_>>();
        // The batch's time, then an admission at it: its limit's two values.
        let mut reply = ints(&[9, 1, 4]);
        reply.push(Value::BulkString(
            b"WRONGTYPE Operation against a key holding the wrong kind of value".to_vec(),
        ));
        reply.push(Value::BulkString(
            b"user_script:9: attempt to compare".to_vec(),
        ));
        // A denial at 2 µs, then an admission at 3 µs (marked by a 1 after its time): the time
        // written -1 - t.
        reply.extend(ints(&[-3, 0, 0, 0, 5, 7, -4, 1, 2, 9]));
        let results = split(
            reply,
            5,
            widths(Limit::sliding_window(9, Duration::from_secs(1))),
        );
        assert_eq!(results[0].as_ref().unwrap(), &[9, 1, 4]);
        assert_eq!(results[1].as_ref().unwrap_err().code(), Some("WRONGTYPE"));
        assert_eq!(results[2].as_ref().unwrap_err().code(), Some("ERR"));
        assert_eq!(results[3].as_ref().unwrap(), &[2, 0, 0, 0, 5, 7]);
        assert_eq!(results[4].as_ref().unwrap(), &[3, 2, 9]);
    }

    #[test]
    fn a_short_reply_fails_what_it_cannot_answer() {
        let ints = |v: &[i64]| v.iter().map(|&n| Value::Int(n)).collect::<Vec<_>>();
        for (reply, answered) in [
            (ints(&[]), 0),
            (vec![Value::BulkString(b"9".to_vec()), Value::Int(1)], 0),
            (ints(&[9, 1]), 0),
            (ints(&[9, 1, 4, -3, 0]), 1),
        ] {
            let results = split(
                reply.clone(),
                2,
                widths(Limit::sliding_window(9, Duration::from_secs(1))),
            );
            assert_eq!(results.len(), 2);
            assert_eq!(results.iter().filter(|r| r.is_ok()).count(), answered);
            assert!(
                results
                    .iter()
                    .skip(answered)
                    .all(|r| r.as_ref().unwrap_err().kind() == ErrorKind::Parse),
                "{reply:?}"
            );
        }
    }
}
