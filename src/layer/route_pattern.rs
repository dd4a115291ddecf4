//! Which requests a route rule applies to: `[METHOD] PATH`.

use http::Method;
use http::request::Parts;

use crate::error::ConfigError;
use crate::key::matched_route;

/// `[METHOD] PATH`: `POST /login`, `/v1/*`, `/grpc.health.v1.Health/Check`.
///
/// A path ending in `*` matches every URI path with that prefix. Any other path matches the
/// route the request matched in axum (`/users/{id}`, as written in the router) or, outside
/// axum, the URI path exactly (for tonic, `/package.Service/Method`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RoutePattern {
    method: Option<Method>,
    path: Path,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Path {
    Exact(String),
    Prefix(String),
}

impl RoutePattern {
    pub(crate) fn parse(text: &str) -> Result<Self, ConfigError> {
        let bad = |reason: &'static str| ConfigError::InvalidRoute {
            route: text.to_owned(),
            reason,
        };
        let (method, path) = match text.trim().split_once(' ') {
            Some((method, path)) => {
                let method =
                    Method::from_bytes(method.as_bytes()).map_err(|_| bad("invalid method"))?;
                (Some(method), path.trim())
            }
            None => (None, text.trim()),
        };
        if !path.starts_with('/') {
            return Err(bad("the path must start with /"));
        }
        if path.contains(char::is_whitespace) {
            return Err(bad("the path must not contain spaces"));
        }
        let path = match path.strip_suffix('*') {
            Some(prefix) if !prefix.contains('*') => Path::Prefix(prefix.to_owned()),
            Some(_) => return Err(bad("only one trailing * is allowed")),
            None => Path::Exact(path.to_owned()),
        };
        Ok(RoutePattern { method, path })
    }

    pub(crate) fn matches(&self, parts: &Parts) -> bool {
        if self.method.as_ref().is_some_and(|m| *m != parts.method) {
            return false;
        }
        match &self.path {
            Path::Prefix(prefix) => parts.uri.path().starts_with(prefix.as_str()),
            Path::Exact(path) => {
                matched_route(parts).is_some_and(|r| r == path) || parts.uri.path() == path
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: &str, path: &str) -> Parts {
        http::Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap()
            .into_parts()
            .0
    }

    #[test]
    fn methods_exact_paths_and_prefixes() {
        let login = RoutePattern::parse("POST /login").unwrap();
        assert!(login.matches(&parts("POST", "/login")));
        assert!(!login.matches(&parts("GET", "/login")));
        assert!(!login.matches(&parts("POST", "/login/x")));
        let v1 = RoutePattern::parse("/v1/*").unwrap();
        assert!(v1.matches(&parts("GET", "/v1/users")));
        assert!(v1.matches(&parts("DELETE", "/v1/")));
        assert!(!v1.matches(&parts("GET", "/v2/users")));
        let grpc = RoutePattern::parse("/grpc.health.v1.Health/*").unwrap();
        assert!(grpc.matches(&parts("POST", "/grpc.health.v1.Health/Check")));
    }

    #[test]
    fn rejects_malformed_patterns() {
        for bad in ["login", "P@ST /x", "/a/*/b*", "GET  ", "/a b"] {
            assert!(RoutePattern::parse(bad).is_err(), "{bad}");
        }
    }
}
