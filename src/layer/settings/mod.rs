//! The layer's settings: one type per file, re-exported by [`layer`](crate::layer) with the
//! settings it shares with the other fronts ([`failure`](crate::failure), [`response`](crate::response)).

mod grpc_status;
mod missing_key;
mod reject_body;
mod shadow;

pub use crate::failure::CircuitBreaker;
pub use crate::failure::OnStoreError;
pub use crate::response::HeaderStyle;
pub use grpc_status::GrpcStatus;
pub use missing_key::MissingKey;
pub use reject_body::RejectBody;
pub use shadow::Shadow;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value's text parses back to it: one grammar, written and read by the library.
    #[test]
    fn every_setting_round_trips_through_its_text() {
        let modes = [
            OnStoreError::Open,
            OnStoreError::Closed,
            OnStoreError::local(),
            OnStoreError::Local { instances: 7 },
        ];
        for mode in modes {
            assert_eq!(mode.to_string().parse::<OnStoreError>().unwrap(), mode);
        }
        let styles = [
            HeaderStyle::XRateLimit,
            HeaderStyle::Ietf,
            HeaderStyle::Both,
            HeaderStyle::None,
        ];
        for style in styles {
            assert_eq!(style.to_string().parse::<HeaderStyle>().unwrap(), style);
        }
        for body in [RejectBody::Text, RejectBody::ProblemJson] {
            assert_eq!(body.to_string().parse::<RejectBody>().unwrap(), body);
        }
        for shadow in [Shadow::Off, Shadow::On, Shadow::OnWithHeaders] {
            assert_eq!(shadow.to_string().parse::<Shadow>().unwrap(), shadow);
        }
        for status in [GrpcStatus::ResourceExhausted, GrpcStatus::Unavailable] {
            assert_eq!(status.to_string().parse::<GrpcStatus>().unwrap(), status);
        }
        let answers = [
            MissingKey::PeerIp,
            MissingKey::PeerIpOrAllow,
            MissingKey::Allow,
            MissingKey::Reject(http::StatusCode::UNAUTHORIZED),
        ];
        for missing in answers {
            assert_eq!(missing.to_string().parse::<MissingKey>().unwrap(), missing);
        }
        for bad in [
            "local:",
            "local:0",
            "local:+2",
            "local:1.5",
            "local: 2",
            "Open",
        ] {
            assert!(bad.parse::<OnStoreError>().is_err(), "{bad}");
        }
        let breakers = [
            CircuitBreaker::new(),
            CircuitBreaker::disabled(),
            CircuitBreaker::new()
                .window(std::time::Duration::from_millis(2500))
                .min_calls(3)
                .failure_rate(0.125)
                .cool_down(std::time::Duration::from_micros(1500)),
        ];
        for breaker in breakers {
            assert_eq!(
                breaker.to_string().parse::<CircuitBreaker>().unwrap(),
                breaker
            );
        }
        for bad in [
            "",
            "window",
            "window=",
            "min-calls=x",
            "failure-rate=2",
            "speed=1",
        ] {
            assert!(bad.parse::<CircuitBreaker>().is_err(), "{bad}");
        }
        for bad in [
            "reject",
            "reject:200",
            "reject:99",
            "reject:+429",
            "deny",
            "peer-ip-or",
            "peer-ip:allow",
        ] {
            assert!(bad.parse::<MissingKey>().is_err(), "{bad}");
        }
    }
}
