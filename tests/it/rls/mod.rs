//! The Envoy rate limit service (`redlimit::rls`): its generated code, and the service driven
//! over gRPC by a client of the generated stubs.

mod config;
mod failure_modes;
mod proto_current;
mod service;
mod service_edges;
