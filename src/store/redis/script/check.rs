//! One check's arguments, kept as they are until the check is sent: then its own `EVALSHA`
//! is written if it goes alone, or its share of its batch's (`batch`), never both.

use redis::Cmd;

use super::call::{same_limit_args, script_command};
use crate::key::Key;
use crate::policy::Policy;

/// What one check sends: its policy (with its override applied), key and cost.
pub(crate) struct CheckArgs {
    pub(crate) policy: Policy,
    pub(crate) key: Key,
    pub(crate) cost: u64,
    /// A cost per limit (`LimitCosts`), passed after the limits' other arguments; `cost` is
    /// then the largest of them.
    pub(crate) costs: Option<Box<[u64]>>,
    /// Replaces Redis `TIME` (tests only).
    pub(crate) now_us: Option<u64>,
    /// A concurrency limit's lease id: the script's last argument (`lua/concurrency.lua`).
    pub(crate) lease: Option<String>,
}

impl CheckArgs {
    /// The check's own `EVALSHA`.
    pub(crate) fn command(&self, prefix: &str) -> Cmd {
        let mut command = script_command(
            prefix,
            &self.policy,
            &self.key,
            (self.cost, self.costs.as_deref()),
            self.now_us,
        );
        if let Some(lease) = &self.lease {
            command.arg(lease.as_str());
        }
        command
    }

    /// Whether `other` writes the time, cost and limits' arguments `self` does (one run of a
    /// batch holds them once).
    pub(crate) fn shares_run(&self, other: &CheckArgs) -> bool {
        self.now_us == other.now_us
            && self.cost == other.cost
            && self.costs == other.costs
            && same_limit_args(&self.policy, &other.policy)
    }
}
