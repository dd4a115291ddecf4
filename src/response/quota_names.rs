//! The names of a decision's quota policies, as the IETF fields (`RateLimit-Policy`) give
//! them: what a problem body's `violated-policies` and a gRPC `ErrorInfo` repeat, so a client
//! can match them.

use std::fmt;

use crate::decision::Decision;

/// The name of limit `index` of the decision's policy: the policy's name for a policy of one
/// limit (`"api"`), else `"{policy}-{index + 1}"` (`"api-1"`, `"api-2"`, ...), as
/// `RateLimit-Policy` names its items.
pub(crate) struct QuotaName<'a> {
    policy: &'a str,
    index: Option<usize>,
}

impl fmt::Display for QuotaName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            None => f.write_str(self.policy),
            Some(index) => write!(f, "{}-{}", self.policy, index + 1),
        }
    }
}

/// The names of the limits that denied `decision`, in the policy's order: every one of them,
/// not only the one [`Decision::denied_by`] picks.
pub(crate) fn violated(decision: &Decision) -> impl Iterator<Item = QuotaName<'_>> {
    let several = decision.limits().len() > 1;
    decision
        .limits()
        .iter()
        .enumerate()
        .filter(|(_, state)| !state.is_allowed())
        .map(move |(index, _)| QuotaName {
            policy: decision.policy(),
            index: several.then_some(index),
        })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::response::HeaderStyle;
    use crate::response::headers::render as render_headers;
    use crate::{Limit, LimitState, Policy};

    fn names(decision: &Decision) -> Vec<String> {
        violated(decision).map(|name| name.to_string()).collect()
    }

    /// The item names of `RateLimit-Policy`, for the names here to be checked against them.
    fn header_items(decision: &Decision) -> Vec<String> {
        let headers = render_headers(decision, HeaderStyle::Ietf);
        headers["ratelimit-policy"]
            .to_str()
            .unwrap()
            .split(", ")
            .map(|item| item.split(';').next().unwrap().trim_matches('"').to_owned())
            .collect()
    }

    #[test]
    fn a_single_limit_is_the_policy_and_several_are_numbered_like_the_header() {
        let minute = Limit::gcra(10, Duration::from_secs(60)).unwrap();
        let one = Policy::new("login", [minute]).unwrap();
        let denied = LimitState::denied(minute, 0, Duration::from_secs(60), Duration::from_secs(6));
        let decision = Decision::new(&one, SystemTime::now(), [denied]).unwrap();
        assert_eq!(names(&decision), ["login"]);
        assert_eq!(header_items(&decision), ["login"]);

        let hour = Limit::fixed_window(100, Duration::from_secs(3600)).unwrap();
        let day = Limit::sliding_window(1000, Duration::from_secs(86_400)).unwrap();
        let three = Policy::new("api/v1", [minute, hour, day]).unwrap();
        let decision = Decision::new(
            &three,
            SystemTime::now(),
            [
                LimitState::denied(minute, 0, Duration::from_secs(60), Duration::from_secs(6)),
                LimitState::allowed(hour, 40, Duration::from_secs(3600)),
                LimitState::denied(day, 0, Duration::from_secs(9), Duration::from_secs(9)),
            ],
        )
        .unwrap();
        assert_eq!(names(&decision), ["api/v1-1", "api/v1-3"]);
        let items = header_items(&decision);
        assert_eq!(items, ["api/v1-1", "api/v1-2", "api/v1-3"]);
        assert!(names(&decision).iter().all(|name| items.contains(name)));
    }

    #[test]
    fn an_allowed_decision_violates_nothing() {
        let limit = Limit::gcra(10, Duration::from_secs(60)).unwrap();
        let policy = Policy::new("p", [limit]).unwrap();
        let state = LimitState::allowed(limit, 9, Duration::from_secs(6));
        let decision = Decision::new(&policy, SystemTime::now(), [state]).unwrap();
        assert!(names(&decision).is_empty());
    }
}
