//! The service [`AcquireLayer`](super::AcquireLayer) makes, and its response future.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tower_service::Service;

use super::Limiter;
use super::layer::{Cost, Estimate, RealCost, RequestKey};
use crate::error::BoxError;

/// A client service whose requests each wait for a permit of a [`Limiter`] before they go
/// to the inner service: [`AcquireLayer`](super::AcquireLayer).
///
/// `poll_ready` is the inner service's: the request's key is only known in `call`, so the
/// reservation is made there (one store call), and the returned future waits for the slot,
/// then calls the inner service. `call` takes the inner service that was polled ready and
/// leaves a clone in its place (the clone-and-swap idiom), so the readiness the caller was
/// given (a `ConcurrencyLimit` permit, a `Buffer` slot) is held by the waiting request: a
/// concurrency limit below this layer bounds the waiting requests too, and Tower's
/// backpressure reaches the caller. Errors are boxed: the inner service's, or an
/// [`AcquireError`](super::AcquireError). With [`settle_with`](Self::settle_with), the permit
/// is settled from the response before it is handed on.
///
/// ```
/// # use std::time::Duration;
/// use redlimit::limiter::{Acquire, Global, Limiter, OneEach};
/// # use redlimit::{store::MemoryStore, Limit, Policy};
/// use tower::{Service, ServiceExt};
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(2, Duration::from_secs(1)).unwrap()]).unwrap());
/// let inner = tower::service_fn(|n: u32| async move { Ok::<_, std::convert::Infallible>(n * 2) });
/// let mut service = Acquire::new(inner, limiter, Global, OneEach, Duration::from_secs(5));
/// assert_eq!(service.ready().await.unwrap().call(21).await.unwrap(), 42);
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct Acquire<S, K, C, R = Estimate> {
    inner: S,
    limiter: Limiter,
    key: K,
    cost: C,
    real_cost: R,
    max_wait: Duration,
}

impl<S, K, C> Acquire<S, K, C> {
    /// Wraps `inner`: each request waits at most `max_wait` for a permit of `limiter`, keyed
    /// by `key` and costing `cost`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::limiter::{Acquire, Global, Limiter, OneEach};
    /// # use redlimit::{store::MemoryStore, Limit, Policy};
    /// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(2, Duration::from_secs(1))?])?);
    /// let service = Acquire::new(tower::service_fn(|()| async { Ok::<_, std::io::Error>(()) }), limiter, Global, OneEach, Duration::from_secs(1));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn new(inner: S, limiter: Limiter, key: K, cost: C, max_wait: Duration) -> Self {
        Acquire {
            inner,
            limiter,
            key,
            cost,
            real_cost: Estimate,
            max_wait,
        }
    }
}

impl<S, K, C, R> Acquire<S, K, C, R> {
    /// Settles each permit from the response
    /// ([`AcquireLayer::settle_with`](super::AcquireLayer::settle_with) says how).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::limiter::{Acquire, Global, Limiter};
    /// # use redlimit::{store::MemoryStore, Limit, Policy};
    /// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(100, Duration::from_secs(1))?])?);
    /// let inner = tower::service_fn(|n: u64| async move { Ok::<_, std::io::Error>(n) });
    /// let service = Acquire::new(inner, limiter, Global, |n: &u64| *n, Duration::from_secs(1))
    ///     .settle_with(|used: &u64| Some(*used / 2));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn settle_with<R2>(self, real_cost: R2) -> Acquire<S, K, C, R2> {
        Acquire {
            inner: self.inner,
            limiter: self.limiter,
            key: self.key,
            cost: self.cost,
            real_cost,
            max_wait: self.max_wait,
        }
    }

    /// The inner service.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::limiter::{Acquire, Global, Limiter, OneEach};
    /// # use redlimit::{store::MemoryStore, Limit, Policy};
    /// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(2, Duration::from_secs(1))?])?);
    /// let service = Acquire::new(7u8, limiter, Global, OneEach, Duration::ZERO);
    /// assert_eq!(*service.get_ref(), 7);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::limiter::{Acquire, Global, Limiter, OneEach};
    /// # use redlimit::{store::MemoryStore, Limit, Policy};
    /// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(2, Duration::from_secs(1))?])?);
    /// let mut service = Acquire::new(7u8, limiter, Global, OneEach, Duration::ZERO);
    /// *service.get_mut() = 8;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::limiter::{Acquire, Global, Limiter, OneEach};
    /// # use redlimit::{store::MemoryStore, Limit, Policy};
    /// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(2, Duration::from_secs(1))?])?);
    /// assert_eq!(Acquire::new(7u8, limiter, Global, OneEach, Duration::ZERO).into_inner(), 7);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

/// The response future of [`Acquire`]: the wait for the permit, then the inner call.
///
/// ```
/// # use std::time::Duration;
/// use redlimit::limiter::{Acquire, Global, Limiter, OneEach, ResponseFuture};
/// # use redlimit::{store::MemoryStore, Limit, Policy};
/// use tower::Service;
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// # let limiter = Limiter::new(MemoryStore::new(), Policy::new("p", [Limit::gcra(2, Duration::from_secs(1)).unwrap()]).unwrap());
/// let inner = tower::service_fn(|n: u32| async move { Ok::<_, std::convert::Infallible>(n + 1) });
/// let mut service = Acquire::new(inner, limiter, Global, OneEach, Duration::from_secs(1));
/// let future: ResponseFuture<u32> = service.call(1);
/// assert_eq!(future.await.unwrap(), 2);
/// # });
/// ```
pub struct ResponseFuture<T> {
    inner: Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send + 'static>>,
}

impl<T> std::fmt::Debug for ResponseFuture<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<T> Future for ResponseFuture<T> {
    type Output = Result<T, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<S, K, C, R, Req> Service<Req> for Acquire<S, K, C, R>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    S::Response: Send + 'static,
    K: RequestKey<Req>,
    C: Cost<Req>,
    R: RealCost<S::Response> + Clone + Send + 'static,
    Req: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        // The service polled ready goes into the future; its clone stays for the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let permit = self.limiter.acquire_timeout(
            self.key.key(&request),
            self.cost.cost(&request),
            self.max_wait,
        );
        let real_cost = self.real_cost.clone();
        let deadline = self.limiter.shared.deadline();
        ResponseFuture {
            inner: Box::pin(async move {
                let permit = permit.await?;
                let response = inner.call(request).await.map_err(Into::into)?;
                if let Some(real) = real_cost.real_cost(&response) {
                    settle(permit, real, deadline).await;
                }
                Ok(response)
            }),
        }
    }
}

/// Settles `permit` at `real` on a task of its own, waiting for it at most `deadline` (a store
/// that does not answer must not hold the response); a failure is logged.
async fn settle(permit: super::Permit, real: u64, deadline: Duration) {
    let settling = async move {
        if let Err(err) = permit.settle(real).await {
            tracing::warn!(%err, "settling a permit from its response failed");
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            let _ = tokio::time::timeout(deadline, runtime.spawn(settling)).await;
        }
        Err(_) => settling.await,
    }
}
