//! Envoy's rate limit service (RLS v3): `envoy.service.ratelimit.v3.RateLimitService`, whose
//! one call `ShouldRateLimit` a gateway (Envoy, Istio, Envoy Gateway, Contour, ...) makes per
//! request, answered from any [`Store`](crate::store::Store).

pub mod config;
pub mod proto;
