//! `--admin-bind` / `--admin-token`: admin endpoints on a listener of their own, every one
//! behind a bearer token. Each concern is a module adding its routes to [`router`] (`keys`:
//! inspect and reset a key; `overrides`: a key's own rates).

mod keys;
mod overrides;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use redlimit::layer::Handle;
use redlimit::RateLimitLayer;
use serde_json::json;

/// What every admin handler reaches: the handle of the layer that serves the requests (so a
/// reset also clears its deny cache).
#[derive(Clone)]
pub(crate) struct Admin {
    pub(crate) handle: Handle,
}

/// Every admin route, behind `token`; anything else answers 404 in JSON (after the token check,
/// so the endpoints cannot be probed without it).
pub(crate) fn router(layer: RateLimitLayer, token: String) -> Router {
    Router::new()
        .merge(keys::routes())
        .merge(overrides::routes())
        .fallback(|| async {
            error(
                StatusCode::NOT_FOUND,
                "no such admin endpoint: try /keys/{policy}/{key} or /overrides/{policy}/{key}",
            )
        })
        .with_state(Admin {
            handle: layer.handle(),
        })
        .layer(middleware::from_fn_with_state(token, require_token))
}

/// 401 unless the request carries `Authorization: Bearer TOKEN`.
async fn require_token(State(token): State<String>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(given) if same(given.as_bytes(), token.as_bytes()) => next.run(request).await,
        _ => {
            let mut response = error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token");
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            response
        }
    }
}

/// Compares without stopping at the first difference, so the time taken does not tell how much
/// of a guess was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A JSON error: `{"error": message}`.
pub(crate) fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_whole_tokens() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secret2"));
        assert!(!same(b"", b"x"));
    }
}
