//! Typed errors: configuration mistakes found at build time, and store failures at run time.

use std::time::Duration;

/// A configuration that cannot be enforced. Every fallible constructor of the crate returns it,
/// before any request is served; nothing panics on configuration.
///
/// ```
/// use redlimit::{ConfigError, Policy};
/// let err = Policy::new("p", []).unwrap_err();
/// assert!(matches!(err, ConfigError::NoLimits(_)));
/// assert_eq!(err.to_string(), "policy `p` has no limits");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A limit whose numbers cannot be enforced exactly.
    #[error("invalid limit `{limit}`: {reason}")]
    InvalidLimit {
        /// The limit, as displayed.
        limit: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An override that does not fit its policy: not one rate per limit of the policy, a
    /// line that is not `N/DURATION`, or a rate the policy's algorithm cannot enforce.
    #[error("invalid override for policy `{policy}`: {reason}")]
    InvalidOverride {
        /// The policy's name.
        policy: String,
        /// What is wrong with it, in one line.
        reason: String,
    },
    /// A calendar (for [`Limit::calendar`](crate::Limit::calendar)) whose anchor does not fit
    /// its unit, or whose time zone the IANA database does not know.
    #[error("invalid calendar `{calendar}`: {reason}")]
    InvalidCalendar {
        /// The calendar, as given.
        calendar: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A policy without limits.
    #[error("policy `{0}` has no limits")]
    NoLimits(String),
    /// A policy with more than [`MAX_LIMITS`](crate::MAX_LIMITS) limits.
    #[error("policy `{0}` has more than {max} limits", max = crate::MAX_LIMITS)]
    TooManyLimits(String),
    /// A penalty box shorter than 1 ms or longer than a limit's longest period
    /// ([`Policy::penalty`](crate::Policy::penalty)).
    #[error("invalid penalty `{0}`: use 1 ms to about a year")]
    InvalidPenalty(String),
    /// A policy name that is empty, longer than 64 bytes, or not made of `A-Z a-z 0-9 . _ - /`.
    #[error("invalid policy name `{0}`: use 1 to 64 of A-Z a-z 0-9 . _ - /")]
    InvalidPolicyName(String),
    /// A key prefix that is empty, longer than 64 bytes, or not made of `A-Z a-z 0-9 . _ - : /`.
    #[error("invalid key prefix `{0}`: use 1 to 64 of A-Z a-z 0-9 . _ - : /")]
    InvalidPrefix(String),
    /// An algorithm name that is not one of `fixed-window`, `sliding-window`, `sliding-log`,
    /// `token-bucket`, `gcra`.
    #[error(
        "unknown algorithm `{0}`: expected fixed-window, sliding-window, sliding-log, token-bucket or gcra"
    )]
    UnknownAlgorithm(String),
    /// A duration not of the form `<integer><ms|s|m|h|d>`.
    #[error("invalid duration `{0}`: expected an integer followed by ms, s, m, h or d")]
    InvalidDuration(String),
    /// A rate not of the form `N/DURATION`.
    #[error("invalid rate `{0}`: expected N/DURATION, e.g. 5/3s or 1000/1h")]
    InvalidRate(String),
    /// A store-error mode other than `open`, `closed`, `local` or `local:N`.
    #[error("unknown store-error mode `{0}`: expected open, closed, local or local:N (N >= 1)")]
    UnknownStoreErrorMode(String),
    /// A setting's text that is none of its values ([`HeaderStyle`](crate::layer::HeaderStyle),
    /// [`Shadow`](crate::layer::Shadow), [`MissingKey`](crate::layer::MissingKey),
    /// [`GrpcStatus`](crate::layer::GrpcStatus), [`CircuitBreaker`](crate::layer::CircuitBreaker)).
    #[error("invalid {setting} `{value}`: expected {expected}")]
    InvalidSetting {
        /// Which setting.
        setting: &'static str,
        /// The text, as given.
        value: String,
        /// The values it takes.
        expected: &'static str,
    },
    /// A trusted proxy range that is not an address or a CIDR, or that would trust every
    /// address (`/0`).
    #[error("invalid trusted proxy range `{range}`: {reason}")]
    InvalidRange {
        /// The range, as given.
        range: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A grouping prefix length outside `1..=32` (IPv4) or `1..=128` (IPv6).
    #[error("invalid IPv{version} prefix length {len}: expected 1 to {max}", max = if *version == 4 { 32 } else { 128 })]
    InvalidPrefixLength {
        /// 4 or 6.
        version: u8,
        /// The length given.
        len: u8,
    },
    /// A route pattern that is not `[METHOD] /path` or `[METHOD] /prefix*`.
    #[error("invalid route `{route}`: {reason}")]
    InvalidRoute {
        /// The pattern, as given.
        route: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A key given to a layer builder without a policy of its own
    /// ([`RateLimitLayer::builder_per_route`](crate::RateLimitLayer::builder_per_route)): its
    /// rules bring their own keys, so the key would key nothing.
    #[error("a key for a layer without a policy of its own: give each rule its key (Rule::key)")]
    KeyWithoutPolicy,
    /// [`refund_if`](crate::layer::RateLimitBuilder::refund_if) over a store that cannot give
    /// units back ([`Store::refunds`](crate::store::Store::refunds) is `None`): the refunds
    /// would silently do nothing. Names the store's kind.
    #[error("refund_if over a `{0}` store, which cannot give units back")]
    RefundsUnsupported(&'static str),
    /// A header name that is not a valid HTTP header name.
    #[error("invalid header name `{0}`")]
    InvalidHeaderName(String),
    /// A key (a JWT secret, a verification key) that cannot be used safely.
    #[error("invalid key: {0}")]
    InvalidKey(&'static str),
    /// A `rediss://` store built with the `tls` feature while rustls has no process-default
    /// crypto provider and redlimit compiled in none: install one with
    /// `rustls::crypto::CryptoProvider::install_default` before building the store, or enable
    /// the `tls-ring` feature.
    #[error(
        "rediss:// needs a rustls crypto provider: install one with CryptoProvider::install_default before building the store, or enable redlimit's `tls-ring` feature"
    )]
    NoCryptoProvider,
    /// A Redis URL or connection setting the client rejected. The text never contains
    /// credentials.
    #[error("invalid Redis configuration: {0}")]
    Redis(String),
    /// A local-first setting out of range (an interval under 1 ms, admission marks not
    /// `0 < low <= high`, an early-sync share not in `(0, 1]`).
    #[error("invalid local-first setting: {0}")]
    InvalidLocalFirst(String),
    /// A key spec (`ip`, `header:NAME`, `route+ip`, ...) that
    /// [`key::parse_spec`](crate::key::parse_spec) cannot read.
    #[error("invalid key spec `{spec}`: {reason}")]
    InvalidKeySpec {
        /// The spec, as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A config file (feature `config`) that does not parse or does not validate: the line
    /// and the field at fault, and why.
    #[error("line {line}: {field}: {reason}")]
    InFile {
        /// The 1-based line of the fault.
        line: usize,
        /// The field at fault (`policy.limits`, `route.policy`, ...), or `toml` for syntax.
        field: String,
        /// What is wrong, in one line.
        reason: String,
    },
    /// A config file (feature `config`) with no rule: no `[[route]]` and no `[default]`, so a
    /// layer built or reloaded from it would limit nothing. An empty or half-written file (a
    /// deploy that truncates, then writes) reads this way; a file that means it says
    /// `allow_no_rules = true`.
    #[error(
        "the file has no rules (no [[route]], no [default]) and would limit nothing: \
             refused (a truncated or half-written file?); write `allow_no_rules = true` if \
             that is meant"
    )]
    NoRules,
    /// An admin token (feature `admin`) that is empty or not printable ASCII without spaces.
    #[error("invalid admin token: {0}")]
    InvalidAdminToken(&'static str),
    /// A config file (or a secret's file) that could not be read.
    #[error("cannot read `{path}`: {reason}")]
    ReadFile {
        /// The file's path.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
}

/// A boxed error from a store's backend, kept as the [`source`](std::error::Error::source) of a
/// [`StoreError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a store could not decide. The layer decides a timeout in memory and turns every other
/// one into its failure policy (deciding in memory by default); it never reaches the client as
/// a 5xx from the layer itself (only [`OnStoreError::Closed`](crate::layer::OnStoreError::Closed)
/// answers 503, on purpose).
///
/// The backend's own error (e.g. a `redis::RedisError`) is kept as the
/// [`source`](std::error::Error::source); branch on the kind with [`StoreError::is_timeout`],
/// [`StoreError::is_connection`] and [`StoreError::is_script`]. Messages never contain
/// credentials: URLs are shown as host and port only.
///
/// ```
/// use std::time::Duration;
/// use redlimit::StoreError;
/// let err = StoreError::Timeout(Duration::from_millis(100));
/// assert_eq!(err.to_string(), "the store did not answer within 100ms");
/// assert!(err.is_timeout());
///
/// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
/// let err = StoreError::connection(io);
/// assert!(err.is_connection());
/// assert_eq!(std::error::Error::source(&err).unwrap().to_string(), "refused");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The circuit breaker is open after repeated failures: the store was not called.
    #[error("the store is failing; circuit open, not called")]
    CircuitOpen,
    /// As many store calls as allowed are in flight (the bound of the RLS's
    /// `max_store_calls`): the store was not called. The layer decides such a request in memory and never shows this error.
    #[error("{0} store calls in flight already; not called")]
    Overloaded(usize),
    /// No answer within the deadline. The call is never replayed: it may have run.
    #[error("the store did not answer within {0:?}")]
    Timeout(Duration),
    /// The store could not be reached: no connection, a lost connection, a failed handshake
    /// or authentication. The call did not run, or may have run if the connection broke
    /// after it was sent; either way it is not replayed.
    #[error("could not reach the store")]
    Connection(#[source] BoxError),
    /// The store was reached and answered the command with an error (a script error, `BUSY`,
    /// `OOM`, `READONLY`, ...).
    #[error("the store refused or failed the command")]
    Script(#[source] BoxError),
    /// The server answered something the scripts never return, or a [`Store`](crate::store::Store)
    /// built a decision that breaks its contract.
    #[error("unexpected reply from the store: {0}")]
    UnexpectedReply(String),
    /// The store's clock lies outside the calendar windows the client computed from its own
    /// clock (the previous, current and next window of a
    /// [`Limit::calendar`](crate::Limit::calendar)): the two clocks are more than a window
    /// apart, and the store refused to guess which window it is.
    #[error("the store's clock is outside the calendar windows this client computed: {0}")]
    ClockSkew(String),
    /// The store was configured wrongly (a bad URL or prefix).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store does not offer this operation (a [`Store`](crate::store::Store) of your own
    /// that does not implement [`inspect`](crate::store::Admin::inspect) or
    /// [`reset`](crate::store::Admin::reset)).
    #[error("the store does not support {0}")]
    Unsupported(&'static str),
}

impl StoreError {
    /// A connection failure caused by `source`.
    ///
    /// ```
    /// let err = redlimit::StoreError::connection(std::io::Error::other("reset"));
    /// assert!(err.is_connection());
    /// ```
    pub fn connection(source: impl Into<BoxError>) -> Self {
        StoreError::Connection(source.into())
    }

    /// A command the store answered with an error, caused by `source`.
    ///
    /// ```
    /// let err = redlimit::StoreError::script(std::io::Error::other("BUSY"));
    /// assert!(err.is_script());
    /// ```
    pub fn script(source: impl Into<BoxError>) -> Self {
        StoreError::Script(source.into())
    }

    /// Whether the store did not answer in time: the layer's deadline passed, or the
    /// connection gave up waiting for the reply (a connection error caused by a timeout, such
    /// as redis-rs's response timeout). Either way the store may be slow rather than gone.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::StoreError;
    /// assert!(StoreError::Timeout(Duration::from_millis(5)).is_timeout());
    /// let waited = std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out");
    /// assert!(StoreError::connection(waited).is_timeout());
    /// assert!(!StoreError::connection("refused").is_timeout());
    /// ```
    pub fn is_timeout(&self) -> bool {
        match self {
            StoreError::Timeout(_) => true,
            StoreError::Connection(source) => timed_out(source.as_ref()),
            _ => false,
        }
    }

    /// Whether the store could not be reached.
    ///
    /// ```
    /// assert!(!redlimit::StoreError::CircuitOpen.is_connection());
    /// ```
    pub fn is_connection(&self) -> bool {
        matches!(self, StoreError::Connection(_))
    }

    /// Whether the store answered the command with an error.
    ///
    /// ```
    /// assert!(!redlimit::StoreError::CircuitOpen.is_script());
    /// ```
    pub fn is_script(&self) -> bool {
        matches!(self, StoreError::Script(_))
    }

    /// Whether the circuit breaker answered without calling the store.
    ///
    /// ```
    /// assert!(redlimit::StoreError::CircuitOpen.is_circuit_open());
    /// ```
    pub fn is_circuit_open(&self) -> bool {
        matches!(self, StoreError::CircuitOpen)
    }

    /// Whether the store was not called because too many calls were in flight.
    ///
    /// ```
    /// assert!(redlimit::StoreError::Overloaded(256).is_overloaded());
    /// ```
    pub fn is_overloaded(&self) -> bool {
        matches!(self, StoreError::Overloaded(_))
    }

    /// Whether the store does not offer the operation.
    ///
    /// ```
    /// assert!(redlimit::StoreError::Unsupported("inspect").is_unsupported());
    /// ```
    pub fn is_unsupported(&self) -> bool {
        matches!(self, StoreError::Unsupported(_))
    }
}

/// Shows an error with its chain of sources (`a: b: c`), for log lines.
pub(crate) struct Chain<'a>(pub(crate) &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(error) = source {
            write!(f, ": {error}")?;
            source = error.source();
        }
        Ok(())
    }
}

/// Whether a connection error's source says it timed out.
fn timed_out(source: &(dyn std::error::Error + 'static)) -> bool {
    #[cfg(feature = "redis")]
    if let Some(redis) = source.downcast_ref::<redis::RedisError>() {
        return redis.is_timeout();
    }
    source
        .downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
}
