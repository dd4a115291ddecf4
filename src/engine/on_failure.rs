//! [`OnFailure`]: the engine's failure modes, one for every front. The layer's
//! [`OnStoreError`] and the RLS's `FailureMode` are its public faces.

use crate::failure::OnStoreError;

/// What a rule's decisions are when the store fails (or, under
/// [`Late::ByMode`](super::Late::ByMode), is late, silent or overloaded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnFailure {
    /// Allowed, unlimited (a decision whose source is `FailOpen`).
    Open,
    /// Denied (a decision whose source is `FailClosed`).
    Closed,
    /// Decided in memory at this instance's share: each count divided by `instances`.
    Local { instances: u32 },
    /// No decision: the front answers that the store is unavailable (the RLS's `error`,
    /// gRPC `UNAVAILABLE`; the limiter's `fail_on_store_error`).
    Unavailable,
}

impl OnFailure {
    /// How many instances share the limits in memory (1 unless local).
    pub(crate) fn instances(self) -> u32 {
        match self {
            OnFailure::Local { instances } => instances,
            _ => 1,
        }
    }
}

impl From<OnStoreError> for OnFailure {
    fn from(mode: OnStoreError) -> Self {
        match mode {
            OnStoreError::Open => OnFailure::Open,
            OnStoreError::Closed => OnFailure::Closed,
            OnStoreError::Local { instances } => OnFailure::Local { instances },
        }
    }
}
