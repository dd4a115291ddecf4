//! Where the instances of a fleet meet: each bucket's demand per server instance, exchanged
//! through Redis once per sync interval (`lua/rlqs_sync.lua`), or no one (a lone instance).

use std::time::Duration;

#[cfg(feature = "redis")]
use crate::store::RedisStore;

/// One live instance's entry for a bucket, as the fleet's store answered it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Peer {
    pub(crate) instance: String,
    /// Requests per second its clients asked for (admitted or not).
    pub(crate) demand: f64,
    /// Requests per second its clients admitted (measured, or as expected where not yet).
    pub(crate) admitted: f64,
}

/// The fleet's store.
#[derive(Clone, Debug)]
pub(crate) enum Fleet {
    /// No store: this instance holds every bucket's whole quota.
    Alone,
    /// A Redis (standalone, Cluster or Sentinel) every instance of the fleet syncs with.
    #[cfg(feature = "redis")]
    Redis(RedisStore),
}

#[cfg(feature = "redis")]
static SYNC: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(SYNC_SOURCE));
#[cfg(feature = "redis")]
const SYNC_SOURCE: &str = include_str!("../../lua/rlqs_sync.lua");

impl Fleet {
    /// Reports `demand` and `admitted` (requests per second) of this `instance` for the
    /// bucket `bucket` (its digest), to live `ttl`, and answers every live instance's, this
    /// one's included. Alone, this instance is the fleet.
    pub(crate) async fn sync(
        &self,
        bucket: &str,
        instance: &str,
        demand: f64,
        admitted: f64,
        ttl: Duration,
    ) -> Result<Vec<Peer>, String> {
        match self {
            Fleet::Alone => {
                let _ = (bucket, ttl);
                Ok(vec![Peer {
                    instance: instance.to_owned(),
                    demand,
                    admitted,
                }])
            }
            #[cfg(feature = "redis")]
            Fleet::Redis(redis) => {
                let key = format!("{}:rlqs:{bucket}", redis.prefix());
                let rate = |r: f64| format!("{:.6}", if r.is_finite() { r.max(0.0) } else { 0.0 });
                let (demand, admitted) = (rate(demand), rate(admitted));
                let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
                let build = |first: &str, script: &str| {
                    let mut cmd = redis::cmd(first);
                    cmd.arg(script)
                        .arg(1)
                        .arg(&key)
                        .arg(instance)
                        .arg(&demand)
                        .arg(&admitted)
                        .arg(ttl_ms);
                    cmd
                };
                let value =
                    crate::store::local_first::run_script(redis, &SYNC, SYNC_SOURCE, build).await?;
                let flat: Vec<String> =
                    redis::from_redis_value(value).map_err(|e| e.to_string())?;
                decode(&flat).ok_or_else(|| format!("an unexpected RLQS sync reply: {flat:?}"))
            }
        }
    }
}

/// The script's reply: the time, then (id, demand, admitted) per live instance.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
fn decode(flat: &[String]) -> Option<Vec<Peer>> {
    let (_now, rest) = flat.split_first()?;
    if rest.len() % 3 != 0 {
        return None;
    }
    rest.chunks(3)
        .map(|entry| {
            let rate =
                |text: &str| Some(text.parse::<f64>().ok().filter(|d| d.is_finite())?.max(0.0));
            Some(Peer {
                instance: entry[0].clone(),
                demand: rate(&entry[1])?,
                admitted: rate(&entry[2])?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_decode_or_are_refused() {
        let s = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            decode(&s(&["1", "a", "2.5", "3", "b", "0.000000", "0.5"])),
            Some(vec![
                Peer {
                    instance: "a".into(),
                    demand: 2.5,
                    admitted: 3.0,
                },
                Peer {
                    instance: "b".into(),
                    demand: 0.0,
                    admitted: 0.5,
                },
            ])
        );
        assert_eq!(decode(&s(&["1", "a", "2.5"])), None);
        assert_eq!(decode(&s(&["1", "a", "nan", "0"])), None);
        assert_eq!(decode(&s(&["1", "a", "1", "x"])), None);
        assert_eq!(decode(&[]), None);
    }
}
