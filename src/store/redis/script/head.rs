//! The head of every script of a signature: `lua/prelude.lua` (the contract: the keys, the
//! time, the cost), then the file of each algorithm the signature uses, once, in the order of
//! the algorithms' table.

use super::signature::Signature;
use crate::algorithm::TABLE;

/// The head of every script: its contract, the time, the cost.
pub(super) const PRELUDE: &str = include_str!("../../../../lua/prelude.lua");

/// The prelude and the file of each algorithm `signature` uses: the head of a check, a batch
/// and a peek script alike.
pub(super) fn head(signature: Signature) -> String {
    let mut lua = String::from(PRELUDE);
    for row in &TABLE {
        if signature.uses(row.algorithm) {
            lua.push('\n');
            lua.push_str(row.lua_file);
        }
    }
    lua.push('\n');
    lua
}
