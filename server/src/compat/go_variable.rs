//! One variable of the Go service ([`GoVariable`]) and what it does here ([`Support`]): the
//! rows of [`GO_VARIABLES`](super::GO_VARIABLES).

/// What a variable of the Go service does in this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Support {
    /// Read and honoured, with the same meaning.
    Honoured,
    /// Read, with a meaning that differs; the text says how.
    Differs(&'static str),
    /// Accepted but without effect here; the text says why. Set, it is named in a warning.
    NoEffect(&'static str),
    /// Not supported; the text says what to use instead. Set, it is named in a warning.
    Unsupported(&'static str),
}

/// One variable of the Go service: its name, its default there, and what it does here.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GoVariable {
    pub(crate) name: &'static str,
    #[cfg_attr(not(test), allow(dead_code))] // read by the migration guide's table
    pub(crate) default: &'static str,
    pub(crate) support: Support,
}

pub(super) const fn var(name: &'static str, default: &'static str, support: Support) -> GoVariable {
    GoVariable {
        name,
        default,
        support,
    }
}
