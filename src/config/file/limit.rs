//! One limit of a policy in the file: `{ algorithm, rate }`, or a calendar window
//! `{ algorithm = "fixed-window", rate = "N/UNIT", calendar = { time_zone, anchor } }`.

use serde::Deserialize;
use toml::Spanned;

use crate::calendar::{Calendar, Unit};
use crate::error::ConfigError;
use crate::limit::{Algorithm, Limit};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimit {
    pub(super) algorithm: Spanned<String>,
    pub(super) rate: Spanned<String>,
    pub(super) key: Option<Spanned<String>>,
    pub(super) calendar: Option<Spanned<RawCalendar>>,
}

/// Where a calendar window's windows start: `time_zone` (IANA; UTC when absent) and `anchor`
/// (the unit's default when absent; [`Calendar::parse`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCalendar {
    time_zone: Option<String>,
    anchor: Option<String>,
}

impl RawLimit {
    /// The limit, or the field at fault (its offset in the text and name) and why.
    pub(super) fn limit(&self) -> Result<Limit, (usize, &'static str, String)> {
        let algorithm: Algorithm = self.algorithm.get_ref().parse().map_err(|e| {
            let start = self.algorithm.span().start;
            (start, "policy.limits.algorithm", format!("{e}"))
        })?;
        let rate = |e: ConfigError| (self.rate.span().start, "policy.limits.rate", e.to_string());
        let Some(calendar) = &self.calendar else {
            if algorithm == Algorithm::Calendar {
                let reason = "a calendar window needs its `calendar = { time_zone, anchor }`";
                return Err((
                    self.algorithm.span().start,
                    "policy.limits.algorithm",
                    reason.to_owned(),
                ));
            }
            return Limit::parse(algorithm, self.rate.get_ref()).map_err(rate);
        };
        if !matches!(algorithm, Algorithm::FixedWindow | Algorithm::Calendar) {
            let reason = format!(
                "only fixed windows follow a calendar, not {algorithm}: a sliding window, log, \
                 token bucket or GCRA limits any span of its period, wherever it starts"
            );
            return Err((calendar.span().start, "policy.limits.calendar", reason));
        }
        let (count, unit) = self
            .rate
            .get_ref()
            .split_once('/')
            .and_then(|(n, unit)| Some((n.parse::<u64>().ok()?, unit.parse::<Unit>().ok()?)))
            .ok_or_else(|| {
                let reason = format!(
                    "`{}`: a calendar window's rate is N/day, N/week, N/month or N/year",
                    self.rate.get_ref()
                );
                (self.rate.span().start, "policy.limits.rate", reason)
            })?;
        let raw = calendar.get_ref();
        let zone = raw.time_zone.as_deref().unwrap_or("UTC");
        let at_calendar = |e: ConfigError| {
            (
                calendar.span().start,
                "policy.limits.calendar",
                e.to_string(),
            )
        };
        let calendar = Calendar::parse(unit, raw.anchor.as_deref(), zone).map_err(at_calendar)?;
        Limit::calendar(count, calendar).map_err(rate)
    }
}
