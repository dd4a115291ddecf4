//! Property tests: the memory store and the Lua scripts decide alike; the key parsers hold
//! their laws.

mod client_names;
#[cfg(feature = "redis")]
mod differential;
#[cfg(feature = "jwt")]
mod keys_proptest;
