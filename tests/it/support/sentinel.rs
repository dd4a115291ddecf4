//! A master, a replica and three Sentinels watching them, on free loopback ports.

use std::time::{Duration, Instant};

use super::redis_server::RedisServer;

/// The name the Sentinels know the master by.
pub(crate) const MASTER_NAME: &str = "redlimit-test";

pub(crate) struct SentinelSet {
    pub(crate) master: RedisServer,
    pub(crate) replica: RedisServer,
    pub(crate) sentinels: Vec<RedisServer>,
}

impl SentinelSet {
    /// Starts the set and waits until every Sentinel knows the master and its replica.
    pub(crate) fn start() -> Self {
        let master = RedisServer::start();
        let replica_of = master.port().to_string();
        let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &replica_of]);
        let config = format!(
            "sentinel monitor {MASTER_NAME} 127.0.0.1 {} 2\n\
             sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
             sentinel failover-timeout {MASTER_NAME} 4000\n\
             sentinel parallel-syncs {MASTER_NAME} 1\n",
            master.port()
        );
        let sentinels = (0..3)
            .map(|_| RedisServer::start_sentinel(&config))
            .collect();
        let set = SentinelSet {
            master,
            replica,
            sentinels,
        };
        let end = Instant::now() + Duration::from_secs(30);
        while Instant::now() < end {
            if set
                .sentinels
                .iter()
                .all(|s| set.known_replicas(s) >= 1 && set.known_sentinels(s) >= 2)
            {
                return set;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("sentinels never saw the replica and each other");
    }

    fn known_replicas(&self, sentinel: &RedisServer) -> usize {
        redis::cmd("SENTINEL")
            .arg("REPLICAS")
            .arg(MASTER_NAME)
            .query::<Vec<redis::Value>>(&mut sentinel.connection())
            .map_or(0, |r| r.len())
    }

    fn known_sentinels(&self, sentinel: &RedisServer) -> usize {
        redis::cmd("SENTINEL")
            .arg("SENTINELS")
            .arg(MASTER_NAME)
            .query::<Vec<redis::Value>>(&mut sentinel.connection())
            .map_or(0, |r| r.len())
    }

    /// The Sentinels' URLs.
    pub(crate) fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The port the first answering Sentinel names as master.
    pub(crate) fn master_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|s| {
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(MASTER_NAME)
                .query::<(String, u16)>(&mut s.connection())
                .ok()
                .map(|(_, port)| port)
        })
    }
}
