//! Many instances, one limit: exactness under concurrency and at a network's distance,
//! batching, every deployment (standalone, Cluster, Sentinel), and resets reaching every
//! replica.

#[cfg(feature = "redis")]
mod always_batches;
#[cfg(feature = "redis")]
mod batching;
#[cfg(all(feature = "axum", feature = "redis"))]
mod cluster_shards;
#[cfg(feature = "redis")]
mod deployments;
#[cfg(all(feature = "axum", feature = "redis"))]
mod distance;
#[cfg(all(feature = "axum", feature = "redis"))]
mod exact_under_load;
#[cfg(feature = "redis")]
mod linger;
#[cfg(feature = "redis")]
mod pipeline_window;
mod proxy_link;
#[cfg(all(feature = "axum", feature = "redis"))]
mod resets;
