//! The base generators, run by [`crate::generate::generate`] before any policy plugin, in Kuma
//! 2.7's `default-proxy` profile order (`pkg/xds/generator/proxy_template.go`): [`inbound`],
//! [`outbound`] (with [`external`], the clusters of ExternalServices), then [`eds`] (the
//! endpoints of the outbound clusters, served over ADS); and
//! [`secrets`], whose SDS secrets the caller adds; [`admin`] (the mTLS admin listener, run when
//! the caller gives the proxy's admin port and certificates). They build Kuma's shapes with no policy in
//! them; `common` holds the Envoy shapes inbound and outbound share. They import only leaf
//! modules (names, util, context, snapshot), never the plugins or the pipeline.

pub mod admin;
mod common;
pub mod eds;
pub mod external;
pub mod inbound;
pub mod outbound;
pub mod secrets;
