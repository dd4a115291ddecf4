//! The layer's own responses: a denial (429 or a gRPC status, with the rate-limit headers) and
//! fail closed (503 or gRPC `UNAVAILABLE`, never 429).

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Response, StatusCode};

use super::Decider;
use crate::decision::Decision;
use crate::layer::grpc;
use crate::layer::headers::RateHeaders;

impl Decider {
    /// The denial: a gRPC status for gRPC calls (the custom rejection applies to the others),
    /// 429 otherwise; the rate-limit headers (gRPC metadata) on both, and the decision in the
    /// response's extensions for the layers outside.
    pub(super) fn reject(&self, decision: Decision, grpc: bool) -> Response<Bytes> {
        let config = &*self.config;
        let mut response = match &config.rejection {
            _ if grpc => grpc::status(
                config.grpc_status.code(),
                &grpc::denial_message(&decision),
                Some(&decision),
            ),
            Some(custom) => custom(&decision),
            None if decision.exceeds_capacity() => text(
                StatusCode::TOO_MANY_REQUESTS,
                "request cost exceeds the rate limit\n",
            ),
            None => text(StatusCode::TOO_MANY_REQUESTS, "Too Many Requests\n"),
        };
        RateHeaders::of(&decision, config.headers).write_missing(response.headers_mut());
        response.extensions_mut().insert(decision);
        response
    }

    /// Fail closed: 503, or gRPC `UNAVAILABLE`; never 429, the client did nothing wrong.
    pub(super) fn unavailable(&self, grpc: bool) -> Response<Bytes> {
        if grpc {
            grpc::status(grpc::UNAVAILABLE, "rate limiter unavailable", None)
        } else {
            text(
                StatusCode::SERVICE_UNAVAILABLE,
                "rate limiter unavailable\n",
            )
        }
    }
}

/// A plain-text response.
pub(super) fn text(status: StatusCode, body: &'static str) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from_static(body.as_bytes()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use http::{Response, StatusCode};

    use super::super::testing::{decider, keyed, parts, policy, proceeds, responds, with_key};
    use crate::decision::Decision;
    use crate::layer::GrpcStatus;
    use crate::store::MemoryStore;

    fn grpc_call() -> http::request::Parts {
        parts(
            "POST",
            "/pkg.Svc/Call",
            &[("x-api-key", "k"), ("content-type", "application/grpc")],
        )
    }

    #[test]
    fn a_denial_is_429_with_headers_and_the_decision() {
        let d = decider(keyed(MemoryStore::new(), policy("p", 1)));
        proceeds(d.start(&with_key("k")));
        let response = responds(d.start(&with_key("k")));
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.body().as_ref(), b"Too Many Requests\n");
        assert_eq!(response.headers()["x-ratelimit-limit"], "1");
        assert_eq!(response.headers()["x-ratelimit-remaining"], "0");
        assert!(response.headers().contains_key("retry-after"));
        assert!(!response
            .extensions()
            .get::<Decision>()
            .unwrap()
            .is_allowed());
    }

    #[test]
    fn a_cost_no_limit_allows_is_said_so() {
        let d =
            decider(keyed(MemoryStore::new(), policy("p", 1)).cost(|_: &http::request::Parts| 2));
        let response = responds(d.start(&with_key("k")));
        assert_eq!(
            response.body().as_ref(),
            b"request cost exceeds the rate limit\n"
        );
        assert!(!response.headers().contains_key("retry-after"));
    }

    #[test]
    fn grpc_calls_get_a_grpc_status_and_the_custom_rejection_is_for_the_others() {
        let custom = |_: &Decision| {
            let mut response = Response::new(bytes::Bytes::from_static(b"slow down"));
            *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
            response
        };
        let builder = keyed(MemoryStore::new(), policy("p", 1)).on_rejection(custom);
        let d = decider(builder.grpc_status(GrpcStatus::Unavailable));
        proceeds(d.start(&with_key("k")));
        let http = responds(d.start(&with_key("k")));
        assert_eq!(http.body().as_ref(), b"slow down");
        assert_eq!(
            http.headers()["x-ratelimit-remaining"],
            "0",
            "headers added"
        );
        let grpc = responds(d.start(&grpc_call()));
        assert_eq!(grpc.status(), StatusCode::OK);
        assert_eq!(grpc.headers()["grpc-status"], "14");
        assert!(grpc.extensions().get::<Decision>().is_some());
    }

    #[test]
    fn unavailable_is_503_or_grpc_unavailable() {
        let d = decider(keyed(MemoryStore::new(), policy("p", 1)));
        let http = d.unavailable(false);
        assert_eq!(http.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(http.headers()["content-type"], "text/plain; charset=utf-8");
        let grpc = d.unavailable(true);
        assert_eq!(grpc.status(), StatusCode::OK);
        assert_eq!(grpc.headers()["grpc-status"], "14");
    }
}
