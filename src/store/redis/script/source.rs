//! The Lua text of one script: `lua/prelude.lua` (the contract), the file of each algorithm
//! the signature uses, once, in the order of [`Algorithm::ALL`], then the tail written for the
//! signature's limits.

use super::signature::Signature;
use super::tail::tail;
use crate::limit::Algorithm;

/// The head of every script: its contract, the time, the cost.
pub(super) const PRELUDE: &str = include_str!("../../../../lua/prelude.lua");

/// The Lua file of one algorithm (its twin in `src/algorithm/` shares its name).
pub(super) fn algorithm_file(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::FixedWindow => include_str!("../../../../lua/fixed_window.lua"),
        Algorithm::SlidingWindow => include_str!("../../../../lua/sliding_window.lua"),
        Algorithm::SlidingLog => include_str!("../../../../lua/sliding_log.lua"),
        Algorithm::TokenBucket => include_str!("../../../../lua/token_bucket.lua"),
        Algorithm::Gcra => include_str!("../../../../lua/gcra.lua"),
    }
}

/// The whole script for `signature`.
pub(super) fn source(signature: Signature) -> String {
    let mut lua = String::from(PRELUDE);
    for algorithm in Algorithm::ALL {
        if signature.uses(algorithm) {
            lua.push('\n');
            lua.push_str(algorithm_file(algorithm));
        }
    }
    lua.push('\n');
    lua.push_str(&tail(signature));
    lua
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Limit;
    use std::time::Duration;

    fn signature(algorithms: &[Algorithm]) -> Signature {
        let limits: Vec<Limit> = algorithms
            .iter()
            .map(|a| Limit::new(*a, 10, Duration::from_secs(1)).unwrap())
            .collect();
        Signature::of(&limits)
    }

    #[test]
    fn holds_the_prelude_and_only_the_algorithms_used() {
        let lua = source(signature(&[Algorithm::Gcra]));
        assert!(lua.starts_with(PRELUDE));
        assert!(lua.contains(algorithm_file(Algorithm::Gcra)));
        for other in &Algorithm::ALL[..4] {
            assert!(!lua.contains(algorithm_file(*other)), "{other}");
        }
    }

    #[test]
    fn each_algorithm_once_whatever_the_number_of_its_limits() {
        let lua = source(signature(&[
            Algorithm::SlidingLog,
            Algorithm::Gcra,
            Algorithm::SlidingLog,
            Algorithm::Gcra,
        ]));
        for algorithm in [Algorithm::SlidingLog, Algorithm::Gcra] {
            assert_eq!(lua.matches(algorithm_file(algorithm)).count(), 1);
        }
    }
}
