//! The client side as a Tower layer: each request waits for its permit, then goes to the
//! inner service (a hyper or reqwest client, a tonic `Channel`, any `tower::Service`).

use std::time::Duration;

use tower_layer::Layer;

use super::{Acquire, Limiter};
use crate::key::Key;

/// Wraps a client service so that each request first waits its turn under a
/// [`Limiter`]: keyed per request by a closure (per upstream host, per tenant, or one key
/// for everything), it delays requests instead of refusing them. A request whose slot is
/// further than the limiter's [`max_wait`](Limiter::max_wait) fails with
/// [`AcquireError::TooLong`](super::AcquireError::TooLong) (boxed, as the service's error).
///
/// ```
/// use std::time::Duration;
/// use redlimit::limiter::{AcquireLayer, Limiter};
/// use redlimit::store::MemoryStore;
/// use redlimit::{Key, Limit, Policy};
/// use tower::{Service, ServiceBuilder, ServiceExt};
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let policy = Policy::new("crawler", [Limit::gcra(2, Duration::from_secs(1)).unwrap()]).unwrap();
/// let limiter = Limiter::new(MemoryStore::new(), policy);
/// let mut client = ServiceBuilder::new()
///     .layer(AcquireLayer::new(limiter, |url: &String| Key::new(url.split('/').nth(2).unwrap_or(""))))
///     .service_fn(|url: String| async move { Ok::<_, std::convert::Infallible>(url.len()) });
/// let len = client.ready().await.unwrap().call("https://example.com/a".to_owned()).await.unwrap();
/// assert_eq!(len, 21);
/// # });
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct AcquireLayer<K, C = OneEach, R = Estimate> {
    limiter: Limiter,
    key: K,
    cost: C,
    real_cost: R,
    max_wait: Option<Duration>,
}

/// The default cost of a request: 1.
///
/// ```
/// use redlimit::limiter::OneEach;
/// let _ = OneEach;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct OneEach;

/// A request's cost: `OneEach` (1), or a closure of the request.
///
/// ```
/// use redlimit::limiter::Cost;
/// let by_len = |body: &String| body.len() as u64;
/// assert_eq!(by_len.cost(&"abc".to_owned()), 3);
/// ```
pub trait Cost<Req> {
    /// The units `request` costs.
    ///
    /// ```
    /// use redlimit::limiter::{Cost, OneEach};
    /// assert_eq!(OneEach.cost(&"anything"), 1);
    /// ```
    fn cost(&self, request: &Req) -> u64;
}

impl<Req> Cost<Req> for OneEach {
    fn cost(&self, _: &Req) -> u64 {
        1
    }
}

impl<Req, F: Fn(&Req) -> u64> Cost<Req> for F {
    fn cost(&self, request: &Req) -> u64 {
        self(request)
    }
}

impl<K> AcquireLayer<K> {
    /// Each request waits under `limiter`, keyed by `key` (a closure of the request, such as
    /// [`per_host`](super::per_host)), costing 1.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::limiter::{AcquireLayer, Limiter, per_host};
    /// # use redlimit::{store::MemoryStore, Limit, Policy};
    /// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(2, Duration::from_secs(1))?])?);
    /// let layer = AcquireLayer::new(limiter, per_host::<String>);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn new(limiter: Limiter, key: K) -> Self {
        AcquireLayer {
            limiter,
            key,
            cost: OneEach,
            real_cost: Estimate,
            max_wait: None,
        }
    }
}

impl AcquireLayer<Global> {
    /// Every request under one key, whatever it is: `global`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::limiter::{AcquireLayer, Limiter};
    /// # use redlimit::{store::MemoryStore, Limit, Policy};
    /// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(2, Duration::from_secs(1))?])?);
    /// let layer = AcquireLayer::global(limiter);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn global(limiter: Limiter) -> Self {
        AcquireLayer::new(limiter, Global)
    }
}

/// The key of every request under [`AcquireLayer::global`]: `global`.
///
/// ```
/// use redlimit::limiter::{Global, RequestKey};
/// assert_eq!(Global.key(&()).as_str(), "global");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Global;

/// A request's key: [`Global`], or a closure of the request.
///
/// ```
/// use redlimit::Key;
/// use redlimit::limiter::RequestKey;
/// let by_tenant = |job: &(u32, String)| Key::new(format!("tenant:{}", job.0));
/// assert_eq!(by_tenant.key(&(7, "report".into())).as_str(), "tenant:7");
/// ```
pub trait RequestKey<Req> {
    /// The key `request` is limited under.
    ///
    /// ```
    /// use redlimit::limiter::{Global, RequestKey};
    /// assert_eq!(Global.key(&42).as_str(), "global");
    /// ```
    fn key(&self, request: &Req) -> Key;
}

impl<Req> RequestKey<Req> for Global {
    fn key(&self, _: &Req) -> Key {
        Key::new("global")
    }
}

impl<Req, F: Fn(&Req) -> Key> RequestKey<Req> for F {
    fn key(&self, request: &Req) -> Key {
        self(request)
    }
}

impl<K, C, R> AcquireLayer<K, C, R> {
    /// Each request costs what `cost` says (bytes, tokens, rows...): for a cost known only
    /// afterwards, an estimate, corrected by [`settle_with`](Self::settle_with).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::limiter::{AcquireLayer, Limiter};
    /// # use redlimit::{store::MemoryStore, Limit, Policy};
    /// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(1000, Duration::from_secs(1))?])?);
    /// let layer = AcquireLayer::global(limiter).cost(|body: &Vec<u8>| body.len() as u64);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn cost<C2>(self, cost: C2) -> AcquireLayer<K, C2, R> {
        AcquireLayer {
            limiter: self.limiter,
            key: self.key,
            cost,
            real_cost: self.real_cost,
            max_wait: self.max_wait,
        }
    }

    /// Settles each request's permit from its response: `real_cost` reads what the call
    /// really cost (the tokens an LLM API reports it used) and the difference from the
    /// [`cost`](Self::cost) reserved is refunded or charged, as [`Permit::settle`](super::Permit::settle) does, in
    /// one store call, before the response is handed on (waiting at most the limiter's
    /// [`store_deadline`](super::LimiterBuilder::store_deadline); a settle not done by then
    /// finishes on its own task). `None` keeps the estimate; so does an error of the inner
    /// service (the units stay spent). A failed settle is logged, never the request's error:
    /// the response was had.
    ///
    /// The hook sees the inner service's response: to read a cost from an HTTP body, put the
    /// layer over a service that decodes it (`ServiceBuilder::new().layer(acquire)
    /// .and_then(decode)`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::limiter::{AcquireLayer, Limiter};
    /// use redlimit::store::{ManualClock, MemoryStore};
    /// use redlimit::{Limit, Policy};
    /// use tower::{Service, ServiceBuilder, ServiceExt};
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// struct Completion { text: String, tokens_used: u64 }
    /// let policy = Policy::new("llm", [Limit::gcra(1_000, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let limiter = Limiter::new(MemoryStore::with_clock(ManualClock::new(1 << 40)), policy);
    /// let mut llm = ServiceBuilder::new()
    ///     .layer(
    ///         AcquireLayer::global(limiter.clone())
    ///             .cost(|prompt: &String| 4 * prompt.len() as u64) // the estimate
    ///             .settle_with(|done: &Completion| Some(done.tokens_used)), // the real cost
    ///     )
    ///     .service_fn(|prompt: String| async move {
    ///         Ok::<_, std::convert::Infallible>(Completion { text: prompt, tokens_used: 900 })
    ///     });
    /// let prompt = "x".repeat(100); // 400 tokens reserved
    /// let done = llm.ready().await.unwrap().call(prompt).await.unwrap();
    /// assert_eq!(done.text.len(), 100);
    /// // 900 tokens spent: 100 of the 1 000 are left.
    /// assert!(limiter.try_acquire("global", 101).await.is_err());
    /// assert!(limiter.try_acquire("global", 100).await.is_ok());
    /// # });
    /// ```
    pub fn settle_with<R2>(self, real_cost: R2) -> AcquireLayer<K, C, R2> {
        AcquireLayer {
            limiter: self.limiter,
            key: self.key,
            cost: self.cost,
            real_cost,
            max_wait: self.max_wait,
        }
    }

    /// The longest a request waits for its slot (the limiter's
    /// [`max_wait`](Limiter::max_wait) by default).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::limiter::{AcquireLayer, Limiter};
    /// # use redlimit::{store::MemoryStore, Limit, Policy};
    /// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(2, Duration::from_secs(1))?])?);
    /// let layer = AcquireLayer::global(limiter).max_wait(Duration::from_secs(3));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = Some(max_wait);
        self
    }
}

impl<S, K: Clone, C: Clone, R: Clone> Layer<S> for AcquireLayer<K, C, R> {
    type Service = Acquire<S, K, C, R>;

    fn layer(&self, inner: S) -> Self::Service {
        let max_wait = self.max_wait.unwrap_or(self.limiter.max_wait());
        Acquire::new(
            inner,
            self.limiter.clone(),
            self.key.clone(),
            self.cost.clone(),
            max_wait,
        )
        .settle_with(self.real_cost.clone())
    }
}

/// The default of [`AcquireLayer::settle_with`]: the estimate stands, nothing is settled.
///
/// ```
/// use redlimit::limiter::{Estimate, RealCost};
/// assert_eq!(Estimate.real_cost(&"any response"), None);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Estimate;

/// What a call really cost, read from its response ([`AcquireLayer::settle_with`]):
/// [`Estimate`] (keep the reserved cost), or a closure of the response.
///
/// ```
/// use redlimit::limiter::RealCost;
/// let from_header = |response: &http::Response<()>| -> Option<u64> {
///     response.headers().get("x-tokens-used")?.to_str().ok()?.parse().ok()
/// };
/// let response = http::Response::builder().header("x-tokens-used", "312").body(()).unwrap();
/// assert_eq!(from_header.real_cost(&response), Some(312));
/// ```
pub trait RealCost<Resp> {
    /// The units the call that answered `response` really cost; `None` keeps the estimate.
    ///
    /// ```
    /// use redlimit::limiter::{Estimate, RealCost};
    /// assert_eq!(Estimate.real_cost(&()), None);
    /// ```
    fn real_cost(&self, response: &Resp) -> Option<u64>;
}

impl<Resp> RealCost<Resp> for Estimate {
    fn real_cost(&self, _: &Resp) -> Option<u64> {
        None
    }
}

impl<Resp, F: Fn(&Resp) -> Option<u64>> RealCost<Resp> for F {
    fn real_cost(&self, response: &Resp) -> Option<u64> {
        self(response)
    }
}

/// The key of an HTTP request's upstream host (its URI's host, else its `Host` header), as
/// `host:NAME`: one quota per upstream. Made for [`AcquireLayer::new`]; generic over the
/// request type through [`UpstreamHost`].
///
/// ```
/// use redlimit::limiter::per_host;
/// let request = http::Request::get("https://api.example.com/v1/charges").body(()).unwrap();
/// assert_eq!(per_host(&request).as_str(), "host:api.example.com");
/// ```
pub fn per_host<R: UpstreamHost>(request: &R) -> Key {
    Key::new(format!("host:{}", request.upstream_host()))
}

/// A request that names its upstream host ([`per_host`]).
///
/// ```
/// use redlimit::limiter::UpstreamHost;
/// assert_eq!("https://a.example/x".to_owned().upstream_host(), "a.example");
/// ```
pub trait UpstreamHost {
    /// The host the request goes to (empty if it names none).
    ///
    /// ```
    /// use redlimit::limiter::UpstreamHost;
    /// let request = http::Request::get("/x").header("host", "b.example:8080").body(()).unwrap();
    /// assert_eq!(request.upstream_host(), "b.example");
    /// ```
    fn upstream_host(&self) -> String;
}

impl<B> UpstreamHost for http::Request<B> {
    fn upstream_host(&self) -> String {
        if let Some(host) = self.uri().host() {
            return host.to_owned();
        }
        self.headers()
            .get(http::header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(|h| h.split(':').next().unwrap_or(h).to_owned())
            .unwrap_or_default()
    }
}

impl UpstreamHost for String {
    fn upstream_host(&self) -> String {
        self.parse::<http::Uri>()
            .ok()
            .and_then(|u| u.host().map(str::to_owned))
            .unwrap_or_default()
    }
}
