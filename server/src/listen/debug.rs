//! The debug listener (`DEBUG_PORT`, 6070): `GET /rlconfig`, the config as loaded, in the Go
//! service's text form, then one line per domain with its failure mode
//! (`DOMAIN: on_store_error=MODE`, ours).

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use redlimit::rls::RateLimitService;

/// `/rlconfig`.
pub(crate) fn router(service: RateLimitService) -> Router {
    Router::new().route("/rlconfig", get(rlconfig).with_state(service))
}

async fn rlconfig(State(service): State<RateLimitService>) -> String {
    let config = service.config();
    let mut text = config.dump();
    for domain in config.domains() {
        let name = domain.name();
        let mode = service.failure_mode(name);
        text.push_str(&format!("{name}: on_store_error={mode}\n"));
    }
    text
}
