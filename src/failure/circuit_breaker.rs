//! The circuit breaker's settings: when to stop calling a failing store, and for how long.

use std::time::Duration;

/// When to stop calling a failing store, and for how long.
///
/// The breaker counts the store's calls over a sliding `window` (default 10 s). It opens when
/// the window holds at least `min_calls` calls (default 20) and at least `failure_rate` of
/// them failed (default 0.5). Errors always count as failures; calls that missed the deadline
/// count only while no call in the window succeeded, since a store that answers some calls in
/// time is slow (overloaded), not gone. It also opens at once, at any request rate, when a call
/// passes its deadline with nothing in its domain answered since the call was sent and a
/// [`Store::probe`](crate::store::Store::probe) (Redis: a `PING` on a connection of its own)
/// gets no answer within two deadlines either. While open, for `cool_down` (default 1 s),
/// requests do not touch the store and get the failure policy's answer at once. Then one probe
/// tries the store (in the background where the store can be probed, else as the call of one
/// request): success closes the breaker (with a fresh window), failure opens it again.
///
/// ```
/// use std::time::Duration;
/// use redlimit::failure::CircuitBreaker;
/// let breaker = CircuitBreaker::new()
///     .window(Duration::from_secs(5))
///     .min_calls(50)
///     .failure_rate(0.8)
///     .cool_down(Duration::from_millis(500));
/// assert_ne!(breaker, CircuitBreaker::new());
/// assert_eq!(CircuitBreaker::default(), CircuitBreaker::new());
/// assert!(CircuitBreaker::disabled().is_disabled());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CircuitBreaker {
    pub(crate) window: Duration,
    pub(crate) min_calls: u32,
    /// The failure rate that opens the breaker, in thousandths (1 to 1000).
    pub(crate) failure_permille: u32,
    pub(crate) cool_down: Duration,
    pub(crate) disabled: bool,
}

/// The sliding window is this many buckets: old calls leave it a tenth at a time.
pub(crate) const BUCKETS: usize = 10;

/// How many breakers a front keeps: a store's failure domains are folded onto these (a Redis
/// Cluster's 16 384 slots in ranges of 128, so a shard's slots share few breakers with
/// another's).
pub(crate) const DOMAINS: usize = 128;

impl CircuitBreaker {
    /// The default breaker: opens when at least half of at least 20 calls within 10 s failed,
    /// for 1 s.
    ///
    /// ```
    /// let breaker = redlimit::failure::CircuitBreaker::new();
    /// assert!(!breaker.is_disabled());
    /// ```
    pub fn new() -> Self {
        CircuitBreaker {
            window: Duration::from_secs(10),
            min_calls: 20,
            failure_permille: 500,
            cool_down: Duration::from_secs(1),
            disabled: false,
        }
    }

    /// The span of recent calls the failure rate is taken over (at least 10 ms).
    ///
    /// ```
    /// let breaker = redlimit::failure::CircuitBreaker::new().window(std::time::Duration::from_secs(30));
    /// ```
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window.max(Duration::from_millis(BUCKETS as u64));
        self
    }

    /// The fewest calls in the window before the breaker may open (at least 1): a handful of
    /// failures at low traffic says little.
    ///
    /// ```
    /// let breaker = redlimit::failure::CircuitBreaker::new().min_calls(5);
    /// ```
    pub fn min_calls(mut self, calls: u32) -> Self {
        self.min_calls = calls.max(1);
        self
    }

    /// The share of failed calls in the window that opens the breaker, from 0.001 to 1 (a
    /// value outside, or NaN, is clamped; NaN keeps the current rate).
    ///
    /// ```
    /// let breaker = redlimit::failure::CircuitBreaker::new().failure_rate(1.0); // only when every call fails
    /// ```
    pub fn failure_rate(mut self, rate: f64) -> Self {
        if !rate.is_nan() {
            self.failure_permille = (rate * 1000.0).round().clamp(1.0, 1000.0) as u32;
        }
        self
    }

    /// How long the breaker stays open before it lets a probe through.
    ///
    /// ```
    /// let breaker = redlimit::failure::CircuitBreaker::new().cool_down(std::time::Duration::from_secs(2));
    /// ```
    pub fn cool_down(mut self, cool_down: Duration) -> Self {
        self.cool_down = cool_down;
        self
    }

    /// Never opens: every request tries the store (and may wait up to the deadline).
    ///
    /// ```
    /// assert!(redlimit::failure::CircuitBreaker::disabled().is_disabled());
    /// ```
    pub fn disabled() -> Self {
        CircuitBreaker {
            disabled: true,
            ..CircuitBreaker::new()
        }
    }

    /// Whether this breaker never opens.
    ///
    /// ```
    /// assert!(!redlimit::failure::CircuitBreaker::default().is_disabled());
    /// ```
    pub fn is_disabled(&self) -> bool {
        self.disabled
    }

    /// Opens on any failure or timeout, for `cool_down` (the limiter's: a store that failed
    /// once is left alone for a while, then one call tries it).
    pub(crate) fn on_any_failure(cool_down: Duration) -> Self {
        CircuitBreaker {
            min_calls: 1,
            // Every failure is enough, whatever succeeded before it in the window.
            failure_permille: 0,
            cool_down,
            ..CircuitBreaker::new()
        }
    }

    pub(crate) fn cool_down_value(&self) -> Duration {
        self.cool_down
    }

    pub(crate) fn bucket_ms(&self) -> u64 {
        (self.window.as_millis() as u64 / BUCKETS as u64).max(1)
    }
}

impl Default for CircuitBreaker {
    fn default() -> Self {
        CircuitBreaker::new()
    }
}

/// `disabled`, or the settings that differ from the defaults as `name=value` pairs joined
/// with commas: `window=5s,min-calls=50,failure-rate=0.8,cool-down=500ms` (durations in
/// [`redlimit::duration`](crate::duration)'s grammar); `default` for the defaults. `Display`
/// writes every setting.
///
/// ```
/// use std::time::Duration;
/// use redlimit::failure::CircuitBreaker;
/// let breaker: CircuitBreaker = "min-calls=5,cool-down=2s".parse()?;
/// assert_eq!(breaker, CircuitBreaker::new().min_calls(5).cool_down(Duration::from_secs(2)));
/// assert_eq!(breaker.to_string(), "window=10s,min-calls=5,failure-rate=0.5,cool-down=2s");
/// assert_eq!(breaker.to_string().parse::<CircuitBreaker>()?, breaker);
/// assert!("disabled".parse::<CircuitBreaker>()?.is_disabled());
/// assert!("window=soon".parse::<CircuitBreaker>().is_err());
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
impl std::str::FromStr for CircuitBreaker {
    type Err = crate::ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || crate::ConfigError::InvalidSetting {
            setting: "circuit breaker",
            value: s.to_owned(),
            expected: "disabled, default, or window=DURATION, min-calls=N, failure-rate=R \
                       (0.001 to 1), cool-down=DURATION joined with commas",
        };
        match s {
            "disabled" => return Ok(CircuitBreaker::disabled()),
            "default" => return Ok(CircuitBreaker::new()),
            _ => {}
        }
        s.split(',')
            .try_fold(CircuitBreaker::new(), |breaker, pair| {
                let (name, value) = pair.split_once('=').ok_or_else(invalid)?;
                let duration = || crate::duration::parse(value).map_err(|_| invalid());
                match name {
                    "window" => Ok(breaker.window(duration()?)),
                    "cool-down" => Ok(breaker.cool_down(duration()?)),
                    "min-calls" => Ok(breaker.min_calls(value.parse().map_err(|_| invalid())?)),
                    "failure-rate" => match value.parse::<f64>() {
                        Ok(rate) if (0.001..=1.0).contains(&rate) => Ok(breaker.failure_rate(rate)),
                        _ => Err(invalid()),
                    },
                    _ => Err(invalid()),
                }
            })
    }
}

impl std::fmt::Display for CircuitBreaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.disabled {
            return f.write_str("disabled");
        }
        write!(
            f,
            "window={},min-calls={},failure-rate={},cool-down={}",
            crate::duration::format(self.window),
            self.min_calls,
            f64::from(self.failure_permille) / 1000.0,
            crate::duration::format(self.cool_down)
        )
    }
}
