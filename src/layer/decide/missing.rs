//! A request without a key: the [`MissingKey`] setting keys it by the peer's IP, lets it
//! through or answers it. A server that records no peer address is misconfigured, and by
//! default says so: `500` (gRPC `INTERNAL`) with a [`KeyMissing`], an `error` log and a count.

use http::StatusCode;
use http::request::Parts;

use super::{Decider, Start, Verdict};
use crate::key::{Key, KeyExtractor, PeerIp};
use crate::layer::key_missing::KeyMissing;
use crate::layer::meters::Undecided;
use crate::layer::rule::Rule;
use crate::layer::settings::MissingKey;
use crate::response::grpc::{self, Framing};

/// What the `500` to a request without a key or a peer address says.
const NO_PEER: &str = "rate limiting is misconfigured: the request has no key and the server \
                       recorded no peer address; serve with connect info (axum: \
                       into_make_service_with_connect_info::<SocketAddr>()) or choose \
                       MissingKey::PeerIpOrAllow";

impl Decider {
    /// The key of a request its rule's extractor found none for, by the layer's
    /// [`MissingKey`] setting; else how the request goes on without one.
    // Returned to `start`, which returns the `Start` as it is: boxing it would allocate.
    #[allow(clippy::result_large_err)]
    #[cold]
    #[inline(never)]
    pub(super) fn keyless(&self, rule_id: usize, rule: &Rule, parts: &Parts) -> Result<Key, Start> {
        let missing = self.config.missing_key;
        let grpc = Framing::of(&parts.headers);
        // Shadow mode answers nothing for lack of a key either.
        let shadow = self.shadow(rule_id).is_on();
        match missing {
            MissingKey::PeerIp | MissingKey::PeerIpOrAllow => {
                if let Some(key) = PeerIp.extract(parts) {
                    return Ok(key);
                }
            }
            MissingKey::Reject(status) if !shadow => {
                let detail = "missing rate-limit key";
                let response = match grpc {
                    Some(framing) => grpc::status(framing, grpc::code_for(status), detail, None),
                    None => self.error(status, detail),
                };
                return Err(Start::Decided(Verdict::Respond(response)));
            }
            _ => {}
        }
        self.meters.undecided(rule_id, Undecided::NoKey);
        let policy = rule.policy.name();
        match missing {
            MissingKey::PeerIp => {
                if self.keyless_log.should_warn() {
                    let answer = if shadow {
                        "letting it through (shadow mode)"
                    } else {
                        "answering 500"
                    };
                    tracing::error!(
                        policy,
                        "request has no rate-limit key and the server recorded no peer address \
                         (serve with connect info, or choose MissingKey::PeerIpOrAllow); {answer}"
                    );
                }
                if shadow {
                    return Err(Start::Unlimited);
                }
                let mut response = match grpc {
                    Some(framing) => grpc::status(framing, grpc::INTERNAL, NO_PEER, None),
                    None => self.error(StatusCode::INTERNAL_SERVER_ERROR, NO_PEER),
                };
                let missing = KeyMissing::new(rule.policy.name_arc());
                response.extensions_mut().insert(missing);
                Err(Start::Decided(Verdict::Respond(response)))
            }
            MissingKey::PeerIpOrAllow => {
                if self.keyless_log.should_warn() {
                    tracing::warn!(
                        policy,
                        "request not rate limited: no key and no peer address (serve with \
                         connect info)"
                    );
                }
                Err(Start::Unlimited)
            }
            _ => Err(Start::Unlimited),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use http::StatusCode;

    use super::super::Start;
    use super::super::testing::{decider, keyed, name, parts, policy, proceeds, responds};
    use crate::layer::{KeyMissing, MissingKey, RejectBody, Shadow};
    use crate::store::MemoryStore;

    fn no_key() -> http::request::Parts {
        parts("GET", "/", &[])
    }

    fn from_peer() -> http::request::Parts {
        let mut parts = no_key();
        parts
            .extensions
            .insert("203.0.113.7:5555".parse::<SocketAddr>().unwrap());
        parts
    }

    fn grpc_call() -> http::request::Parts {
        parts(
            "POST",
            "/pkg.Svc/Call",
            &[("content-type", "application/grpc")],
        )
    }

    /// A limit of 1 admits the peer once, then denies it under its IP.
    fn assert_keyed_by_the_peer(d: &super::Decider) {
        proceeds(d.start(&from_peer()));
        let denied = responds(d.start(&from_peer()));
        let decision = denied.extensions().get::<crate::Decision>().unwrap();
        let key = decision.denied_key().map(crate::Key::as_str);
        assert_eq!(key, Some("ip:203.0.113.7"));
    }

    #[test]
    fn by_default_the_peer_keys_it_and_without_a_peer_it_is_a_500() {
        let peer = decider(keyed(MemoryStore::new(), policy("p", 1)));
        assert_keyed_by_the_peer(&peer);

        let response = responds(peer.start(&no_key()));
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(
            std::str::from_utf8(response.body())
                .unwrap()
                .contains("into_make_service_with_connect_info"),
            "{response:?}"
        );
        let missing = response.extensions().get::<KeyMissing>().unwrap();
        assert_eq!(missing.policy(), "p");

        let grpc = responds(peer.start(&grpc_call()));
        assert_eq!(grpc.status(), StatusCode::OK);
        assert_eq!(grpc.headers()["grpc-status"], "13");
        assert!(grpc.extensions().get::<KeyMissing>().is_some());

        // In the layer's body style.
        let problems =
            keyed(MemoryStore::new(), policy("p", 1)).reject_body(RejectBody::ProblemJson);
        let response = responds(decider(problems).start(&no_key()));
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json"
        );
        let problem: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains("no peer address"), "{problem}");
        assert!(response.extensions().get::<KeyMissing>().is_some());
    }

    #[test]
    fn the_quiet_settings_and_shadow_mode_let_it_through() {
        let or_allow = MissingKey::PeerIpOrAllow;
        let d = decider(keyed(MemoryStore::new(), policy("p", 1)).on_missing_key(or_allow));
        assert_keyed_by_the_peer(&d);
        for _ in 0..3 {
            let start = d.start(&no_key());
            assert!(matches!(start, Start::Unlimited), "{}", name(&start));
        }

        let allow =
            decider(keyed(MemoryStore::new(), policy("p", 1)).on_missing_key(MissingKey::Allow));
        for request in [no_key(), from_peer(), from_peer()] {
            let start = allow.start(&request);
            assert!(matches!(start, Start::Unlimited), "{}", name(&start));
        }

        let reject = MissingKey::Reject(StatusCode::UNAUTHORIZED);
        for missing in [MissingKey::PeerIp, reject] {
            let shadowed = keyed(MemoryStore::new(), policy("p", 1)).on_missing_key(missing);
            let shadowed = decider(shadowed.shadow(Shadow::On));
            let start = shadowed.start(&no_key());
            assert!(
                matches!(start, Start::Unlimited),
                "{missing}: {}",
                name(&start)
            );
        }
    }

    #[test]
    fn reject_answers_its_status_with_or_without_a_peer() {
        let reject = MissingKey::Reject(StatusCode::UNAUTHORIZED);
        let strict = decider(keyed(MemoryStore::new(), policy("p", 1)).on_missing_key(reject));
        for request in [no_key(), from_peer()] {
            let response = responds(strict.start(&request));
            assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
            assert!(response.extensions().get::<KeyMissing>().is_none());
        }
        let response = responds(strict.start(&grpc_call()));
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["grpc-status"], "16");
    }
}
