//! The registered claims a verified token must satisfy (RFC 7519 §4.1): `exp` (required),
//! `nbf`, and `iss` / `aud` when configured.

use serde_json::{Map, Value};

use super::JwtError;

/// The default allowance for clock skew, in seconds.
pub(super) const DEFAULT_LEEWAY: u64 = 30;

/// The most [`Rules::leeway`] may be, in seconds.
pub(super) const MAX_LEEWAY: u64 = 3600;

/// What the claims of a verified token are held to.
#[derive(Debug, Clone)]
pub(super) struct Rules {
    /// Seconds `exp` and `nbf` may be off.
    pub(super) leeway: u64,
    /// Accepted issuers; empty: `iss` is not checked.
    pub(super) issuers: Vec<String>,
    /// Accepted audiences; empty: `aud` is not checked.
    pub(super) audiences: Vec<String>,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            leeway: DEFAULT_LEEWAY,
            issuers: Vec::new(),
            audiences: Vec::new(),
        }
    }
}

/// A NumericDate (seconds since the epoch, possibly fractional), or why not.
fn date(claims: &Map<String, Value>, name: &'static str) -> Result<Option<f64>, JwtError> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => n.as_f64().map(Some).ok_or(JwtError::Claim(name)),
        Some(_) => Err(JwtError::Claim(name)),
    }
}

impl Rules {
    /// Whether `claims` hold at `now` (Unix seconds).
    pub(super) fn check(&self, claims: &Map<String, Value>, now: u64) -> Result<(), JwtError> {
        let (now, leeway) = (now as f64, self.leeway as f64);
        let exp = date(claims, "exp")?.ok_or(JwtError::Claim("exp"))?;
        if exp + leeway < now {
            return Err(JwtError::Expired);
        }
        if let Some(nbf) = date(claims, "nbf")?
            && nbf - leeway > now
        {
            return Err(JwtError::NotYetValid);
        }
        if !self.issuers.is_empty() {
            match claims.get("iss") {
                Some(Value::String(iss)) if self.issuers.contains(iss) => {}
                _ => return Err(JwtError::Claim("iss")),
            }
        }
        if !self.audiences.is_empty() {
            let accepted =
                |aud: &Value| matches!(aud, Value::String(a) if self.audiences.contains(a));
            // RFC 7519 §4.1.3: one audience as a string, or several as an array.
            let ok = match claims.get("aud") {
                Some(Value::Array(auds)) => auds.iter().any(accepted),
                Some(aud) => accepted(aud),
                None => false,
            };
            if !ok {
                return Err(JwtError::Claim("aud"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: u64 = 1_700_000_000;

    fn check(rules: &Rules, claims: Value) -> Result<(), JwtError> {
        rules.check(claims.as_object().unwrap(), NOW)
    }

    #[test]
    fn exp_and_nbf_with_leeway() {
        let rules = Rules::default();
        let now = NOW as f64;
        assert_eq!(check(&rules, json!({"exp": NOW + 1})), Ok(()));
        assert_eq!(
            check(&rules, json!({"exp": NOW - 30})),
            Ok(()),
            "within leeway"
        );
        assert_eq!(
            check(&rules, json!({"exp": now - 30.5})),
            Err(JwtError::Expired)
        );
        assert_eq!(
            check(&rules, json!({"exp": NOW - 31})),
            Err(JwtError::Expired)
        );
        assert_eq!(check(&rules, json!({"exp": -1})), Err(JwtError::Expired));
        assert_eq!(check(&rules, json!({"exp": 1e300})), Ok(()));
        assert_eq!(check(&rules, json!({})), Err(JwtError::Claim("exp")));
        assert_eq!(
            check(&rules, json!({"exp": "9999999999"})),
            Err(JwtError::Claim("exp"))
        );
        assert_eq!(
            check(&rules, json!({"exp": null})),
            Err(JwtError::Claim("exp"))
        );
        let exp = NOW + 600;
        assert_eq!(check(&rules, json!({"exp": exp, "nbf": NOW + 30})), Ok(()));
        assert_eq!(
            check(&rules, json!({"exp": exp, "nbf": NOW + 31})),
            Err(JwtError::NotYetValid)
        );
        assert_eq!(
            check(&rules, json!({"exp": exp, "nbf": [1]})),
            Err(JwtError::Claim("nbf"))
        );
        let strict = Rules {
            leeway: 0,
            ..Rules::default()
        };
        assert_eq!(check(&strict, json!({"exp": NOW})), Ok(()));
        assert_eq!(
            check(&strict, json!({"exp": NOW - 1})),
            Err(JwtError::Expired)
        );
    }

    #[test]
    fn issuer_and_audience_only_when_configured() {
        let exp = NOW + 600;
        let open = Rules::default();
        assert_eq!(
            check(&open, json!({"exp": exp, "iss": 1, "aud": {}})),
            Ok(())
        );
        let rules = Rules {
            issuers: vec!["https://a".into(), "https://b".into()],
            audiences: vec!["api".into()],
            ..Rules::default()
        };
        let ok =
            |iss: Value, aud: Value| check(&rules, json!({"exp": exp, "iss": iss, "aud": aud}));
        assert_eq!(ok(json!("https://b"), json!("api")), Ok(()));
        assert_eq!(ok(json!("https://a"), json!(["web", "api"])), Ok(()));
        assert_eq!(
            ok(json!("https://c"), json!("api")),
            Err(JwtError::Claim("iss"))
        );
        assert_eq!(
            ok(json!(["https://a"]), json!("api")),
            Err(JwtError::Claim("iss"))
        );
        assert_eq!(
            ok(json!("https://a"), json!("web")),
            Err(JwtError::Claim("aud"))
        );
        assert_eq!(
            ok(json!("https://a"), json!(["web"])),
            Err(JwtError::Claim("aud"))
        );
        assert_eq!(
            ok(json!("https://a"), json!([["api"]])),
            Err(JwtError::Claim("aud"))
        );
        assert_eq!(
            ok(json!("https://a"), json!([])),
            Err(JwtError::Claim("aud"))
        );
        assert_eq!(
            check(&rules, json!({"exp": exp, "aud": "api"})),
            Err(JwtError::Claim("iss"))
        );
        assert_eq!(
            check(&rules, json!({"exp": exp, "iss": "https://a"})),
            Err(JwtError::Claim("aud"))
        );
    }
}
