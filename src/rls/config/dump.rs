//! The text of the Go service's debug endpoint `/rlconfig` (`rateLimitConfigImpl.Dump`).

use std::fmt::Write as _;

use super::RlsConfig;

/// One line per rule: `<full key>: unit=<UNIT> requests_per_unit=<n>, shadow_mode: <bool>,
/// quota_mode: <bool>`; an unlimited rule shows `unit=UNKNOWN` and the `requests_per_unit`
/// written beside it (0 when none). Rules
/// with several limits (ours) get a line per limit, and our extensions follow when they are
/// not the defaults (` algorithm=gcra unit_multiplier=5`, then ` calendar=15T00:00
/// Europe/Berlin` for a calendar window).
pub(crate) fn dump(config: &RlsConfig) -> String {
    let mut out = String::new();
    for domain in config.domains() {
        for rule in domain.rules() {
            let head = |out: &mut String, unit: &str, rpu: u32| {
                let _ = write!(
                    out,
                    "{}: unit={unit} requests_per_unit={rpu}, shadow_mode: {}, quota_mode: {}",
                    rule.full_key(),
                    rule.shadow_mode(),
                    rule.quota_mode()
                );
            };
            if rule.limits().is_empty() {
                head(&mut out, "UNKNOWN", rule.unlimited_requests_per_unit);
                out.push('\n');
            }
            for limit in rule.limits() {
                head(&mut out, limit.unit().name(), limit.requests_per_unit());
                if !limit.is_plain() {
                    let _ = write!(
                        out,
                        " algorithm={} unit_multiplier={}",
                        limit.algorithm(),
                        limit.unit_multiplier()
                    );
                }
                if let Some(calendar) = limit.calendar() {
                    let _ = write!(
                        out,
                        " calendar={} {}",
                        calendar.anchor(),
                        calendar.time_zone()
                    );
                }
                out.push('\n');
            }
        }
    }
    out
}
