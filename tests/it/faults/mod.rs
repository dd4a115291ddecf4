//! Redis misbehaving: killed, frozen, black-holed, refusing, flooded; the layer keeps
//! deciding and resumes limiting by Redis when it is back.

#[cfg(feature = "redis")]
mod failure;
#[cfg(all(feature = "axum", feature = "jwt", feature = "redis"))]
mod flood;
#[cfg(all(feature = "axum", feature = "redis"))]
mod healing;
#[cfg(all(feature = "axum", feature = "redis"))]
mod mid_run;
