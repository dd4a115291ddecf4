//! The debug listener (`DEBUG_PORT`, 6070): `GET /rlconfig`, the config as loaded, in the Go
//! service's text form.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use redlimit::rls::RateLimitService;

/// `/rlconfig`.
pub(crate) fn router(service: RateLimitService) -> Router {
    Router::new().route("/rlconfig", get(rlconfig).with_state(service))
}

async fn rlconfig(State(service): State<RateLimitService>) -> String {
    service.config().dump()
}
