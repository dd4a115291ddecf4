//! Every answer the admin endpoints give instead of a result: a status and a JSON body naming
//! the error with a stable code.

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use http::header::{HeaderValue, WWW_AUTHENTICATE};
use serde::Serialize;

use crate::error::{ConfigError, StoreError};

/// Why an admin request got no result. Each answers with its status and
/// `{"error": CODE, "message": TEXT}` (the code a stable word, the message one line for a
/// person); nothing an admin request sends makes the router panic or answer a bare 500.
///
/// | variant | status | `error` |
/// |---|---|---|
/// | [`Unauthorized`](Self::Unauthorized) | 401 | `unauthorized` |
/// | [`InvalidToken`](Self::InvalidToken) | 401 | `invalid_token` |
/// | [`BadRequest`](Self::BadRequest) | 400 (or the body's 413/415) | `bad_request` |
/// | [`BadKey`](Self::BadKey) | 400 | `bad_key` |
/// | [`BadClient`](Self::BadClient) | 400 | `bad_client` |
/// | [`BadOverride`](Self::BadOverride) | 400 | `bad_override` |
/// | [`NoSuchPolicy`](Self::NoSuchPolicy) | 404 | `no_such_policy` |
/// | [`NoOverride`](Self::NoOverride) | 404 | `no_override` |
/// | [`NoSuchDomain`](Self::NoSuchDomain) | 404 | `no_such_domain` |
/// | [`NoRule`](Self::NoRule) | 404 | `no_rule` |
/// | [`BadDescriptor`](Self::BadDescriptor) | 400 | `bad_descriptor` |
/// | [`NotFound`](Self::NotFound) | 404 | `not_found` |
/// | [`MethodNotAllowed`](Self::MethodNotAllowed) | 405 | `method_not_allowed` |
/// | [`Unsupported`](Self::Unsupported) | 503 | `unsupported` |
/// | [`Store`](Self::Store) | 503 | `store_unavailable` |
///
/// ```
/// use axum::response::IntoResponse;
/// use redlimit::admin::AdminError;
/// let error = AdminError::NoSuchPolicy("api".into());
/// assert_eq!(error.code(), "no_such_policy");
/// assert_eq!(error.into_response().status(), 404);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdminError {
    /// No `Authorization: Bearer TOKEN` header.
    Unauthorized,
    /// A bearer token that is not the admin token.
    InvalidToken,
    /// A request the endpoint cannot read (a path or body that does not parse, a body too
    /// large or not JSON): its status and why.
    BadRequest(StatusCode, String),
    /// A key no extractor makes (empty, too long, badly encoded).
    BadKey,
    /// A client named by `SPEC=VALUE` that names no key of the policy: a bad spec or value,
    /// or a spec no rule of the policy keys on. Why.
    BadClient(String),
    /// An override that does not fit the policy: why.
    BadOverride(String),
    /// No rule in force has a policy of this name.
    NoSuchPolicy(String),
    /// The key has no override under the policy.
    NoOverride,
    /// No domain of this name in the rate limit service's configuration
    /// ([`rls::admin`](crate::rls::admin), feature `rls`).
    NoSuchDomain(String),
    /// No rule of the domain applies to the descriptor (or one that counts nothing:
    /// `unlimited`, for an override).
    NoRule(String),
    /// A descriptor the query does not name well (`KEY=VALUE` pairs joined with `&`): why.
    BadDescriptor(String),
    /// No admin endpoint at this path (on either router: the layer's or the rate limit
    /// service's).
    NotFound,
    /// The path exists, but not for this method.
    MethodNotAllowed,
    /// The store (the layer's, or the rate limit service's) lacks the power the endpoint
    /// needs ([`StoreError::Unsupported`]): which one.
    Unsupported(&'static str),
    /// The store failed: why (never credentials; see [`StoreError`]).
    Store(String),
}

impl AdminError {
    /// The status the error answers with.
    ///
    /// ```
    /// use redlimit::admin::AdminError;
    /// assert_eq!(AdminError::Unsupported("inspect").status(), 503);
    /// assert_eq!(AdminError::BadKey.status(), 400);
    /// ```
    pub fn status(&self) -> StatusCode {
        match self {
            AdminError::Unauthorized | AdminError::InvalidToken => StatusCode::UNAUTHORIZED,
            AdminError::BadRequest(status, _) => *status,
            AdminError::BadKey
            | AdminError::BadClient(_)
            | AdminError::BadOverride(_)
            | AdminError::BadDescriptor(_) => StatusCode::BAD_REQUEST,
            AdminError::NoSuchPolicy(_)
            | AdminError::NoOverride
            | AdminError::NoSuchDomain(_)
            | AdminError::NoRule(_)
            | AdminError::NotFound => StatusCode::NOT_FOUND,
            AdminError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            AdminError::Unsupported(_) | AdminError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The stable word in the body's `error` field.
    ///
    /// ```
    /// use redlimit::admin::AdminError;
    /// assert_eq!(AdminError::InvalidToken.code(), "invalid_token");
    /// ```
    pub fn code(&self) -> &'static str {
        match self {
            AdminError::Unauthorized => "unauthorized",
            AdminError::InvalidToken => "invalid_token",
            AdminError::BadRequest(..) => "bad_request",
            AdminError::BadKey => "bad_key",
            AdminError::BadClient(_) => "bad_client",
            AdminError::BadOverride(_) => "bad_override",
            AdminError::NoSuchPolicy(_) => "no_such_policy",
            AdminError::NoOverride => "no_override",
            AdminError::NoSuchDomain(_) => "no_such_domain",
            AdminError::NoRule(_) => "no_rule",
            AdminError::BadDescriptor(_) => "bad_descriptor",
            AdminError::NotFound => "not_found",
            AdminError::MethodNotAllowed => "method_not_allowed",
            AdminError::Unsupported(_) => "unsupported",
            AdminError::Store(_) => "store_unavailable",
        }
    }

    /// The body's `message`: one line for a person.
    ///
    /// ```
    /// use redlimit::admin::AdminError;
    /// assert_eq!(AdminError::NoSuchPolicy("api".into()).message(), "no policy named `api`");
    /// ```
    pub fn message(&self) -> String {
        match self {
            AdminError::Unauthorized => "an Authorization: Bearer TOKEN header is required".into(),
            AdminError::InvalidToken => "wrong bearer token".into(),
            AdminError::BadRequest(_, why) => one_line(why),
            AdminError::BadKey => "bad key: expected the key's text as the extractor makes it \
                                   (e.g. ip:127.0.0.1), percent-encoded, or the client as \
                                   SPEC=VALUE (e.g. header:x-api-key=sk_live_123)"
                .into(),
            AdminError::BadClient(why) => one_line(why),
            AdminError::BadOverride(why) => one_line(why),
            AdminError::NoSuchPolicy(policy) => format!("no policy named `{}`", name(policy)),
            AdminError::NoOverride => "no override for this key".into(),
            AdminError::NoSuchDomain(domain) => format!("no domain named `{}`", name(domain)),
            AdminError::NoRule(why) => one_line(why),
            AdminError::BadDescriptor(why) => format!("bad descriptor: {}", one_line(why)),
            AdminError::NotFound => "no such admin endpoint: the layer's are under /keys/ and \
                                     /overrides/, the rate limit service's under /rls/{domain}/"
                .into(),
            AdminError::MethodNotAllowed => "method not allowed on this endpoint".into(),
            AdminError::Unsupported(power) => {
                format!("the store cannot {power}")
            }
            AdminError::Store(why) => format!("store: {}", one_line(why)),
        }
    }
}

impl From<StoreError> for AdminError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unsupported(power) => AdminError::Unsupported(power),
            StoreError::Config(e @ ConfigError::InvalidOverride { .. }) => {
                AdminError::BadOverride(e.to_string())
            }
            other => AdminError::Store(other.to_string()),
        }
    }
}

impl std::fmt::Display for AdminError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code(), self.message())
    }
}

impl std::error::Error for AdminError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_short_line() {
        let long = format!("bad path: {}\n{}", "x".repeat(10_000), "y");
        let message = AdminError::BadRequest(StatusCode::BAD_REQUEST, long).message();
        assert_eq!(message.chars().count(), 201, "{message}");
        assert!(!message.contains('\n'));
        let policy = AdminError::NoSuchPolicy("p".repeat(1000)).message();
        assert!(policy.len() < 120, "{policy}");
        assert_eq!(clip("héllo", 2), "hé…");
        assert_eq!(clip("hé", 2), "hé");
    }
}

#[derive(Serialize)]
struct Body {
    error: &'static str,
    message: String,
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        let body = Body {
            error: self.code(),
            message: self.message(),
        };
        let mut response = (self.status(), Json(body)).into_response();
        let challenge = match self {
            AdminError::Unauthorized => Some("Bearer"),
            AdminError::InvalidToken => Some("Bearer error=\"invalid_token\""),
            _ => None,
        };
        if let Some(challenge) = challenge {
            response
                .headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        }
        response
    }
}

/// The text on one line, however it was written, and cut short: a reason that quotes a
/// hostile path or body does not send it back at full length.
fn one_line(text: &str) -> String {
    clip(&text.split_whitespace().collect::<Vec<_>>().join(" "), 200)
}

/// A name echoed back, cut short.
fn name(name: &str) -> String {
    clip(name, 80)
}

/// `text`'s first `max` characters, and `…` if there were more.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}
