//! The scripts in use: one per signature, written and hashed once, then kept for the life of
//! the process (a service has as many as it has distinct algorithm mixes: a handful), and found
//! again by hash when Redis answers `NOSCRIPT`.

use std::collections::HashMap;
use std::sync::{LazyLock, OnceLock, RwLock};

use super::always::always_source;
use super::charge::charge_source;
use super::reply::Widths;
use super::signature::{BatchShape, Signature, position};
use super::source::{batch_source, source};
use crate::limit::{Algorithm, Limit};
use crate::policy::Policy;

/// One script: its Lua text and its `redis::Script` (the SHA1 that `EVALSHA` names), the
/// batch script of the same signature (several decisions in one call), and its charge. A
/// signature of the always variant ([`Signature::with_always`]) is a script of its own: its
/// text and batch are the always variant's (`always.rs`), batched as a check's are.
#[derive(Debug)]
pub(crate) struct LuaScript {
    /// How many values a decision of it reports (`batch::split` reads them).
    pub(crate) limits: Widths,
    /// How its batch script lays out its call.
    pub(crate) shape: BatchShape,
    pub(crate) source: String,
    pub(crate) script: redis::Script,
    pub(crate) batch: redis::Script,
    /// Its charge variant (`charge.rs`), made at its first use: a signature with a cost per
    /// limit never needs it.
    charge: OnceLock<redis::Script>,
    signature: Signature,
}

impl LuaScript {
    fn new(signature: Signature) -> &'static LuaScript {
        let source = if signature.always() {
            always_source(signature)
        } else {
            source(signature)
        };
        let script = redis::Script::new(&source);
        let batch = redis::Script::new(&batch_source(signature));
        // Kept for the process's life, so calls borrow it without counting references.
        Box::leak(Box::new(LuaScript {
            limits: Widths::of(signature),
            shape: BatchShape::of(signature),
            source,
            script,
            batch,
            charge: OnceLock::new(),
            signature,
        }))
    }

    /// Its charge variant (`charge.rs`): every limit charged whatever its state.
    pub(crate) fn charge(&self) -> &redis::Script {
        self.charge
            .get_or_init(|| redis::Script::new(&charge_source(self.signature)))
    }
}

/// Single-limit policies, the common case, by algorithm: no lock on their path.
static SINGLE: [OnceLock<&'static LuaScript>; Algorithm::EVERY.len()] =
    [const { OnceLock::new() }; Algorithm::EVERY.len()];

/// Every other mix.
static MIXES: LazyLock<RwLock<HashMap<Signature, &'static LuaScript>>> =
    LazyLock::new(Default::default);

/// The script of a policy with these limits.
pub(crate) fn script_for(limits: &[Limit]) -> &'static LuaScript {
    by_signature(Signature::of(limits))
}

/// The script of `policy`: its limits', and its penalty box if it has one.
pub(crate) fn script_for_policy(policy: &Policy) -> &'static LuaScript {
    script_for_check(policy, false)
}

/// The script of a check of `policy`, with a cost per limit if `costs`.
pub(crate) fn script_for_check(policy: &Policy, costs: bool) -> &'static LuaScript {
    by_signature(
        Signature::of(policy.limits())
            .with_penalty(policy.penalty_box().is_some())
            .with_costs(costs),
    )
}

/// The script of checks of `policy` whose every cost lands (`Commit::Always`): the always
/// variant of its limits' signature, whatever its penalty box (which plays no part). Not for a
/// concurrency limit (`validate` refuses it first).
pub(crate) fn script_for_always(policy: &Policy) -> &'static LuaScript {
    by_signature(Signature::of(policy.limits()).with_always(true))
}

fn by_signature(signature: Signature) -> &'static LuaScript {
    if let Some(algorithm) = signature.single() {
        return SINGLE[position(algorithm)].get_or_init(|| LuaScript::new(signature));
    }
    if let Some(script) = read(&MIXES).get(&signature) {
        return script;
    }
    let mut mixes = MIXES
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    mixes
        .entry(signature)
        .or_insert_with(|| LuaScript::new(signature))
}

/// The script (of one decision or a batch) whose SHA1 is `hash`, if this process has made it.
pub(crate) fn by_hash(hash: &str) -> Option<&'static redis::Script> {
    let singles = SINGLE.iter().filter_map(|s| s.get().copied());
    let mixes: Vec<&'static LuaScript> = read(&MIXES).values().copied().collect();
    singles
        .chain(mixes)
        .flat_map(|s| [Some(&s.script), Some(&s.batch), s.charge.get()])
        .flatten()
        .chain([
            super::refund::script(),
            super::reserve::script(),
            super::poll::script(),
        ])
        .find(|s| s.get_hash() == hash)
}

/// The scripts a store has loaded ahead, so each is loaded once per store.
#[derive(Debug, Default)]
pub(crate) struct Prepared(std::sync::Mutex<Vec<&'static LuaScript>>);

impl Prepared {
    /// Notes `script` as loaded; false if it was already.
    pub(crate) fn insert(&self, script: &'static LuaScript) -> bool {
        let mut loaded = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if loaded.iter().any(|s| std::ptr::eq(*s, script)) {
            return false;
        }
        loaded.push(script);
        true
    }

    /// Forgets `script` (its load failed).
    pub(crate) fn remove(&self, script: &'static LuaScript) {
        let mut loaded = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        loaded.retain(|s| !std::ptr::eq(*s, script));
    }
}

/// The map, even if a thread panicked while holding it (entries are inserted whole).
fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn one_script_per_signature_found_again_by_hash() {
        let a = [Limit::gcra(5, Duration::from_secs(1)).unwrap()];
        let b = [Limit::gcra(50, Duration::from_secs(60)).unwrap()];
        let mix = [
            Limit::gcra(5, Duration::from_secs(1)).unwrap(),
            Limit::sliding_log(50, Duration::from_secs(60)).unwrap(),
        ];
        assert!(std::ptr::eq(script_for(&a), script_for(&b)));
        assert!(std::ptr::eq(script_for(&mix), script_for(&mix)));
        assert!(!std::ptr::eq(script_for(&a), script_for(&mix)));
        for limits in [&a[..], &mix[..]] {
            let script = script_for(limits);
            for made in [&script.script, &script.batch, script.charge()] {
                assert!(std::ptr::eq(by_hash(made.get_hash()).unwrap(), made));
            }
        }
        let policy = Policy::new("p", mix).unwrap();
        let always = script_for_always(&policy);
        assert!(!std::ptr::eq(always, script_for_check(&policy, true)));
        assert!(std::ptr::eq(
            always,
            script_for_always(&policy.penalty(Duration::from_secs(9)).unwrap())
        ));
        for made in [&always.script, &always.batch] {
            assert!(std::ptr::eq(by_hash(made.get_hash()).unwrap(), made));
        }
        assert!(by_hash("0000000000000000000000000000000000000000").is_none());
    }
}
