//! The Envoy rate limit service (`redlimit::rls`): its generated code, and the service driven
//! over gRPC by a client of the generated stubs.

#[cfg(feature = "admin")]
mod admin;
mod config;
mod failure_modes;
mod proto_current;
mod service;
mod service_edges;
