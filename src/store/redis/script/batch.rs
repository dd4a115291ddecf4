//! Several decisions of one script signature in one call: the batch script's `EVALSHA`, made
//! of the decisions' own `EVALSHA`s, and its reply split back into one per decision.
//!
//! The batch script (`source.rs` writes it) runs the signature's tail as a function once per
//! decision, in order, each committed on its own, as if each were its own call. Its contract:
//!
//! - `KEYS`: the keys of each decision in turn (one per limit, as in a single call);
//! - `ARGV`: the arguments of each decision in turn (the same as a single call's: its time or
//!   `''` for Redis `TIME`, its cost, its counts and periods, its logs' TTL);
//! - reply: for each decision in turn, its reply (`2 + 2k` integers for `k` limits when it
//!   admits, `2 + 4k` otherwise), or one string: the error it raised (`WRONGTYPE ...`), which
//!   fails that decision alone.

use redis::{Arg, Cmd, ErrorKind, RedisError, RedisResult, Value};

use super::registry::LuaScript;

/// The `EVALSHA` of `script`'s batch script for `decisions`: each decision's own `EVALSHA`
/// (from [`script_command`](super::script_command)) and its number of keys. Every decision
/// runs `script`.
pub(crate) fn batch_command<'a>(
    script: &LuaScript,
    decisions: impl Iterator<Item = (&'a Cmd, usize)> + Clone,
) -> Cmd {
    let total: usize = decisions.clone().map(|(_, keys)| keys).sum();
    let mut command = redis::cmd("EVALSHA");
    command.arg(script.batch.get_hash()).arg(total);
    // A decision's `EVALSHA` is: the command, the SHA1, the number of keys, the keys, the rest.
    for (decision, keys) in decisions.clone() {
        for key in decision.args_iter().skip(3).take(keys) {
            push(&mut command, key);
        }
    }
    for (decision, keys) in decisions {
        for arg in decision.args_iter().skip(3 + keys) {
            push(&mut command, arg);
        }
    }
    command
}

fn push(command: &mut Cmd, arg: Arg<&[u8]>) {
    if let Arg::Simple(bytes) = arg {
        command.arg(bytes);
    }
}

/// Splits a batch reply into one result per decision: `decisions` of `limits` limits each.
/// A reply of the wrong shape fails every decision it cannot answer.
pub(crate) fn split(
    reply: Vec<Value>,
    decisions: usize,
    limits: usize,
) -> Vec<RedisResult<Vec<i64>>> {
    let mut results = Vec::with_capacity(decisions);
    let mut at = 0;
    while results.len() < decisions {
        let rest = reply.get(at..).unwrap_or_default();
        let result = match rest.first() {
            Some(Value::Int(_)) => {
                // An admission (its second value 1) answers two values per limit, else four.
                let width = match rest.get(1) {
                    Some(Value::Int(1)) => 2 + 2 * limits,
                    _ => 2 + 4 * limits,
                };
                at += width;
                match rest.get(..width) {
                    Some(values) => values
                        .iter()
                        .map(|v| match v {
                            Value::Int(n) => Ok(*n),
                            other => Err(malformed(&format!("{other:?} in a decision's reply"))),
                        })
                        .collect::<RedisResult<Vec<i64>>>(),
                    None => Err(malformed("a batch reply shorter than its decisions")),
                }
            }
            Some(value) => {
                at += 1;
                match value {
                    Value::BulkString(text) => Err(raised(&String::from_utf8_lossy(text))),
                    Value::SimpleString(text) => Err(raised(text)),
                    other => Err(malformed(&format!("{other:?} for a decision"))),
                }
            }
            None => Err(malformed("a batch reply shorter than its decisions")),
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
    use super::*;
    use crate::key::Key;
    use crate::limit::Limit;
    use crate::policy::Policy;
    use crate::store::redis::script::{script_command, script_for};
    use std::time::Duration;

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
    fn keys_then_arguments_of_each_decision_in_turn() {
        let policy = Policy::new(
            "p",
            [
                Limit::gcra(5, Duration::from_secs(1)).unwrap(),
                Limit::fixed_window(9, Duration::from_secs(2)).unwrap(),
            ],
        )
        .unwrap();
        let a = script_command("rl", &policy, &Key::new("a"), 1, None);
        let b = script_command("rl", &policy, &Key::new("b"), 3, Some(7));
        let script = script_for(policy.limits());
        let batch = batch_command(script, [(&a, 2), (&b, 2)].into_iter());
        assert_eq!(
            texts(&batch),
            [
                "EVALSHA",
                script.batch.get_hash(),
                "4",
                "rl:p:{a}:gc0",
                "rl:p:{a}:fw1",
                "rl:p:{b}:gc0",
                "rl:p:{b}:fw1",
                "",
                "1",
                "5",
                "1000000",
                "9",
                "2000000",
                "7",
                "3",
                "5",
                "1000000",
                "9",
                "2000000",
            ]
        );
    }

    #[test]
    fn an_error_fails_its_own_decision_only() {
        let ints = |v: &[i64]| v.iter().map(|&n| Value::Int(n)).collect::<Vec<_>>();
        let mut reply = ints(&[1, 1, 4, 0]);
        reply.push(Value::BulkString(
            b"WRONGTYPE Operation against a key holding the wrong kind of value".to_vec(),
        ));
        reply.push(Value::BulkString(
            b"user_script:9: attempt to compare".to_vec(),
        ));
        reply.extend(ints(&[2, 0, 0, 0, 5, 7, 3, 1, 2, 9]));
        let results = split(reply, 5, 1);
        // An admission answers two values per limit, a denial four.
        assert_eq!(results[0].as_ref().unwrap(), &[1, 1, 4, 0]);
        assert_eq!(results[1].as_ref().unwrap_err().code(), Some("WRONGTYPE"));
        assert_eq!(results[2].as_ref().unwrap_err().code(), Some("ERR"));
        assert_eq!(results[3].as_ref().unwrap(), &[2, 0, 0, 0, 5, 7]);
        assert_eq!(results[4].as_ref().unwrap(), &[3, 1, 2, 9]);
    }

    #[test]
    fn a_short_reply_fails_what_it_cannot_answer() {
        let results = split(vec![Value::Int(1), Value::Int(1)], 2, 1);
        assert_eq!(results.len(), 2);
        assert!(results
            .iter()
            .all(|r| r.as_ref().unwrap_err().kind() == ErrorKind::Parse));
    }
}
