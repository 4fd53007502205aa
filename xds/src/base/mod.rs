//! The base generators, run by [`crate::generate::generate`] before any policy plugin, in Kuma
//! 2.7's `default-proxy` profile order (`pkg/xds/generator/proxy_template.go:79-93`):
//! [`transparent`] (the passthrough listeners and clusters of a transparent proxy), [`inbound`],
//! [`outbound`] (with [`external`], the clusters of ExternalServices), [`eds`] (the
//! endpoints of the outbound clusters, served over ADS), [`direct_access`] (a transparent
//! proxy's listeners to other DPPs' IP:ports), then [`dns`] (the `kuma:dns` listener); and
//! [`secrets`], whose SDS secrets the caller adds; [`admin`] (the mTLS admin listener, run when
//! the caller gives the proxy's admin port and certificates). They build Kuma's shapes with no policy in
//! them; `common` holds the Envoy shapes inbound and outbound share. They import only leaf
//! modules (names, util, context, snapshot), never the plugins or the pipeline.

pub mod admin;
pub(crate) mod common;
pub mod direct_access;
pub mod dns;
pub mod eds;
pub mod external;
pub mod inbound;
pub mod outbound;
pub mod secrets;
pub mod transparent;
