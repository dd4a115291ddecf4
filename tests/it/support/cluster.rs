//! A Redis Cluster of three masters, each with a replica, on free loopback ports.

use std::process::Command;
use std::time::{Duration, Instant};

use super::redis_server::RedisServer;

/// Six `redis-server` processes in cluster mode, joined with `redis-cli --cluster create`.
pub(crate) struct RedisCluster {
    pub(crate) nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts the nodes, creates the cluster and waits until every node reports it healthy.
    pub(crate) fn start() -> Self {
        let nodes: Vec<RedisServer> = (0..6)
            .map(|_| {
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "{dir}/nodes.conf",
                    "--cluster-node-timeout",
                    "1500",
                    // A replica may take over however long it was out of touch.
                    "--cluster-replica-validity-factor",
                    "0",
                ])
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("run redis-cli (installed with redis-server)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = RedisCluster { nodes };
        assert!(
            cluster.wait_healthy(Duration::from_secs(30)),
            "cluster never became healthy"
        );
        cluster
    }

    /// The seed URLs of every node.
    pub(crate) fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// Whether every running node says `cluster_state:ok` and knows three masters that serve
    /// all slots, before the deadline.
    pub(crate) fn wait_healthy(&self, deadline: Duration) -> bool {
        let end = Instant::now() + deadline;
        loop {
            let healthy = self.nodes.iter().filter(|n| n.pid().is_some()).all(|n| {
                let info: Result<String, _> = redis::Client::open(n.url())
                    .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(300)))
                    .and_then(|mut c| redis::cmd("CLUSTER").arg("INFO").query(&mut c));
                info.is_ok_and(|i| {
                    i.contains("cluster_state:ok") && i.contains("cluster_slots_ok:16384")
                })
            });
            if healthy {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether every replica reports its link to its master up, before the deadline.
    pub(crate) fn wait_replicas_synced(&self, deadline: Duration) -> bool {
        let end = Instant::now() + deadline;
        loop {
            let synced = self.nodes.iter().filter(|n| n.pid().is_some()).all(|n| {
                let info: String = redis::cmd("INFO")
                    .arg("replication")
                    .query(&mut n.connection())
                    .unwrap_or_default();
                info.contains("role:master") || info.contains("master_link_status:up")
            });
            if synced {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The index of the node serving `slot` as master.
    pub(crate) fn master_of(&self, slot: u16) -> usize {
        let mut conn = self
            .nodes
            .iter()
            .find(|n| n.pid().is_some())
            .unwrap()
            .connection();
        let slots: redis::Value = redis::cmd("CLUSTER").arg("SLOTS").query(&mut conn).unwrap();
        let redis::Value::Array(ranges) = slots else {
            panic!("CLUSTER SLOTS: {slots:?}")
        };
        for range in ranges {
            let redis::Value::Array(parts) = range else {
                continue;
            };
            let (redis::Value::Int(lo), redis::Value::Int(hi), redis::Value::Array(master)) =
                (&parts[0], &parts[1], &parts[2])
            else {
                continue;
            };
            if (*lo..=*hi).contains(&i64::from(slot)) {
                let redis::Value::Int(port) = master[1] else {
                    panic!("port")
                };
                return self
                    .nodes
                    .iter()
                    .position(|n| i64::from(n.port()) == port)
                    .unwrap();
            }
        }
        panic!("no master for slot {slot}");
    }

    /// Makes node `index` announce `port` (a proxy in front of it) to clients, keeping its
    /// cluster bus where it is, and waits until the other nodes' slot maps say so: clients
    /// then reach that node only through the proxy.
    pub(crate) fn announce_port(&self, index: usize, port: u16) {
        let node = &self.nodes[index];
        let bus = node.port() + 10_000;
        for (name, value) in [
            ("cluster-announce-bus-port", bus),
            ("cluster-announce-port", port),
        ] {
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg(name)
                .arg(value)
                .query(&mut node.connection())
                .expect("CONFIG SET cluster-announce-*");
        }
        let end = Instant::now() + Duration::from_secs(30);
        let needle = format!(":{port}@{bus}");
        loop {
            let seen = self.nodes.iter().filter(|n| n.pid().is_some()).all(|n| {
                let nodes: String = redis::cmd("CLUSTER")
                    .arg("NODES")
                    .query(&mut n.connection())
                    .unwrap_or_default();
                nodes.contains(&needle)
            });
            if seen {
                return;
            }
            assert!(
                Instant::now() < end,
                "the cluster never learned port {port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
