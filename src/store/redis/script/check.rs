//! One check's arguments, kept as they are until the check is sent: then its own `EVALSHA`
//! is written if it goes alone, or its share of its batch's (`batch`), never both.

use redis::Cmd;

use super::args::{push_always_args, push_keys, push_limit_args, same_limit_args};
use super::call::{always_command, script_command};
use super::clock::Clock;
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
    /// The time the check is decided at (Redis `TIME` but in the crate's tests), read from
    /// the store when the check was made.
    pub(crate) clock: Clock,
    /// A concurrency limit's lease id: the script's last argument (`lua/concurrency.lua`).
    pub(crate) lease: Option<String>,
    /// Every cost lands (`Commit::Always`, with `costs`): the always script's keys and
    /// arguments, without the penalty box and the penalty (`always.rs`).
    pub(crate) always: bool,
}

impl CheckArgs {
    /// The check's own `EVALSHA`.
    pub(crate) fn command(&self, prefix: &str) -> Cmd {
        if self.always {
            let costs = self.costs.as_deref().unwrap_or_default();
            return always_command(prefix, &self.policy, &self.key, costs, self.clock);
        }
        let mut command = script_command(
            prefix,
            &self.policy,
            &self.key,
            (self.cost, self.costs.as_deref()),
            self.clock,
        );
        if let Some(lease) = &self.lease {
            command.arg(lease.as_str());
        }
        command
    }

    /// Writes the check's keys into its batch's command: one per limit, and the penalty box's
    /// if it has one and reads it.
    pub(crate) fn push_keys(&self, command: &mut Cmd, prefix: &str) {
        let boxed = !self.always && self.policy.penalty_us() > 0;
        push_keys(command, prefix, &self.policy, &self.key, boxed);
    }

    /// Writes the arguments of the check's limits after its time and cost, as its own call
    /// does: a run's in its batch.
    pub(crate) fn push_limit_args(&self, command: &mut Cmd) {
        if self.always {
            let costs = self.costs.as_deref().unwrap_or_default();
            push_always_args(command, &self.policy, costs, self.clock);
        } else {
            push_limit_args(command, &self.policy, self.costs.as_deref(), self.clock);
        }
    }

    /// Whether `other` writes the time, cost and limits' arguments `self` does (one run of a
    /// batch holds them once).
    pub(crate) fn shares_run(&self, other: &CheckArgs) -> bool {
        self.clock == other.clock
            && self.cost == other.cost
            && self.costs == other.costs
            && self.always == other.always
            && same_limit_args(&self.policy, &other.policy)
    }
}
