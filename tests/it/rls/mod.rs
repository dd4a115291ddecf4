//! The Envoy rate limit service (`redlimit::rls`): its generated code, and the service driven
//! over gRPC by a client of the generated stubs; a fleet of services on local-first stores
//! (`local_first`).

#[cfg(feature = "admin")]
mod admin;
mod calendar;
mod config;
mod every_hit;
mod failure_modes;
mod go_semantics;
mod local_first;
mod per_second;
#[cfg(feature = "admin")]
mod per_second_admin;
mod proto_current;
mod service;
mod service_edges;
mod slots;
