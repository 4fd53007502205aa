//! Inter-CP (issue 36; Kuma 2.7's `pkg/intercp`): calls between the replicas of one Global.
//!
//! With several replicas on one PostgreSQL, a zone's KDS streams are on one replica (its zone
//! lease, [`crate::replicas`]), and so is the zone's `InspectSync` stream every inspect call
//! goes down. A replica asked about a zone it does not hold forwards the call to the replica
//! that does ([`client`]: the hub's [`crate::inspect::hub::Forwarder`]), whose inter-CP server
//! ([`server`], `proto/umbra/kds/v1/intercp.proto`) calls the zone over its own stream and
//! streams the frames back. The caller sees the same [`Call`](crate::inspect::hub::Call) as
//! for a local zone: same deadline, same partial frames, same
//! [`CallError`](crate::inspect::hub::CallError)s (carried as gRPC statuses, [`calls`]).
//!
//! - **Catalog**: each replica registers its advertised inter-CP address
//!   (`--inter-cp-advertise-address`, default `--inter-cp-addr`) as `inter_cp` in
//!   `cp_replicas`; the zone leases name the holder, and so its address
//!   ([`crate::replicas::ZoneHold::Held`]).
//! - **mTLS only** ([`tls`]): the replicas keep one CA in their store
//!   ([`umbra_pki::inter_cp`]); each issues itself a certificate for its advertised host at
//!   start. The server requires a client certificate from that CA, the client verifies the
//!   server against the CA and the host it dials. There is no plaintext inter-CP listener.
//! - **No loops**: the server answers from its own zone streams only
//!   ([`crate::inspect::hub::InspectHub::call_local`]).
//!
//! A Global alone (the memory store) has no inter-CP server and forwards nothing.

pub mod calls;
pub mod client;
pub mod server;
pub mod tls;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::inspect::hub::InspectHub;
use crate::replicas::Coordinator;
use crate::store::Store;
use crate::zones::ZoneRegistry;

/// Kuma's inter-CP port, the default of `--inter-cp-addr`.
pub const DEFAULT_PORT: u16 = 5682;

/// Describe this module's metrics ([`calls::INTER_CP_CALLS`]).
pub fn describe() {
    metrics::describe_counter!(
        calls::INTER_CP_CALLS,
        "Inspect calls forwarded to the Global replica holding the zone, by outcome"
    );
}

/// `--inter-cp-advertise-address`: the host (an IP address or a DNS name) and, optionally,
/// the port other replicas reach this one's inter-CP server at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advertised {
    /// The host, without brackets for an IPv6 address; the certificate names it.
    pub host: String,
    /// The port (`None`: the listening port).
    pub port: Option<u16>,
}

impl Advertised {
    /// `host:port` as other replicas dial it (IPv6 in brackets), `port` when none was given.
    pub fn address(&self, port: u16) -> String {
        let port = self.port.unwrap_or(port);
        if self.host.contains(':') {
            format!("[{}]:{port}", self.host)
        } else {
            format!("{}:{port}", self.host)
        }
    }
}

/// Value parser of `--inter-cp-advertise-address`: `host`, `host:port`, `ip`, `ip:port` or
/// `[ipv6]:port`; the host is an IP address that is not unspecified (`0.0.0.0`, `::`: not an
/// address to reach) or a DNS name.
///
/// # Errors
/// Anything else, with what is expected.
pub fn advertise_address(text: &str) -> Result<Advertised, String> {
    const FORM: &str =
        "expected host or host:port (an IP address or a DNS name other replicas reach this one at)";
    let (host, port) = if let Ok(addr) = text.parse::<SocketAddr>() {
        (addr.ip().to_string(), Some(addr.port()))
    } else if let Ok(ip) = text.parse::<IpAddr>() {
        (ip.to_string(), None)
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => {
                let port = port
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| format!("port {port:?}: {FORM}"))?;
                (host.to_owned(), Some(port))
            }
            None => (text.to_owned(), None),
        }
    };
    if let Ok(ip) = host.parse::<IpAddr>() {
        if ip.is_unspecified() {
            return Err(format!(
                "{ip} is not an address other replicas can reach; {FORM}"
            ));
        }
    } else {
        umbra_runtime::flags::host_name(&host).map_err(|e| format!("{host:?}: {e}; {FORM}"))?;
    }
    if port == Some(0) {
        return Err(format!("port 0: {FORM}"));
    }
    Ok(Advertised { host, port })
}

/// What this replica advertises for listening address `listen`: `advertise`, else the
/// listening address itself.
///
/// # Errors
/// Without `advertise`, a listening address on an unspecified IP (`0.0.0.0`, `::`): the
/// message names `--inter-cp-advertise-address`.
pub fn advertised(
    listen: SocketAddr,
    advertise: Option<&Advertised>,
) -> Result<Advertised, String> {
    match advertise {
        Some(a) => Ok(a.clone()),
        None if listen.ip().is_unspecified() => Err(format!(
            "--inter-cp-advertise-address: needed when --inter-cp-addr listens on {listen}: other replicas must be told an address they can reach this one at"
        )),
        None => Ok(Advertised {
            host: listen.ip().to_string(),
            port: None,
        }),
    }
}

/// This replica's inter-CP listener, bound before it registers (so it registers the port it
/// got), and the address it advertises.
#[derive(Debug)]
pub struct InterCp {
    listener: tokio::net::TcpListener,
    advertised: Advertised,
    address: String,
}

impl InterCp {
    /// Bind `listen` (`None`: a free port on 127.0.0.1) and advertise `advertise` (default:
    /// the bound address).
    ///
    /// # Errors
    /// The address cannot be bound, or is unspecified without `advertise` ([`advertised`]).
    pub fn bind(
        listen: Option<SocketAddr>,
        advertise: Option<&Advertised>,
    ) -> anyhow::Result<Self> {
        let listen = listen.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
        let advertised = advertised(listen, advertise).map_err(anyhow::Error::msg)?;
        let listener = umbra_runtime::process::listen(listen)
            .map_err(|e| anyhow::anyhow!("--inter-cp-addr {listen}: {e}"))?;
        let address = advertised.address(listener.local_addr()?.port());
        Ok(InterCp {
            listener,
            advertised,
            address,
        })
    }

    /// `host:port` other replicas dial (what this replica registers as `inter_cp`).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Issue this replica's certificate from the CA in `store` (created there when none), set
    /// `hub` to forward calls for zones held elsewhere ([`client::InterCpClient`]), and return
    /// the server, answering from `hub`'s own zone streams (`zones`: what this replica knows
    /// of them), until `stop` turns `true`.
    ///
    /// # Errors
    /// The CA cannot be read or created, or the certificate issued.
    pub async fn start(
        self,
        store: &dyn Store,
        hub: Arc<InspectHub>,
        zones: Arc<ZoneRegistry>,
        coordinator: Arc<dyn Coordinator>,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> anyhow::Result<impl Future<Output = anyhow::Result<()>> + Send + 'static> {
        let tls = tls::InterCpTls::load(store, &self.advertised.host).await?;
        hub.forward_with(Arc::new(client::InterCpClient::new(
            coordinator,
            tls.client(),
        )));
        tracing::info!(listen = %self.listener.local_addr()?, advertised = %self.address, "inter-CP server listening (mTLS)");
        Ok(server::serve(
            self.listener,
            server::InterCpServer::new(hub, zones),
            tls.server(),
            stop,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertised_addresses_are_hosts_other_replicas_can_reach() {
        let ok = |t: &str| advertise_address(t).unwrap().address(DEFAULT_PORT);
        assert_eq!(ok("10.0.0.7"), "10.0.0.7:5682");
        assert_eq!(ok("10.0.0.7:7000"), "10.0.0.7:7000");
        assert_eq!(ok("global-2.internal"), "global-2.internal:5682");
        assert_eq!(ok("global-2:7000"), "global-2:7000");
        assert_eq!(ok("fd00::7"), "[fd00::7]:5682");
        assert_eq!(ok("[fd00::7]:7000"), "[fd00::7]:7000");
        for bad in [
            "0.0.0.0",
            "0.0.0.0:5682",
            "::",
            "[::]:5682",
            "",
            "global 2",
            "global-2:port",
            "global-2:0",
            "https://global-2:5682",
        ] {
            assert!(advertise_address(bad).is_err(), "{bad:?} accepted");
        }
        let listen: SocketAddr = "127.0.0.1:5682".parse().unwrap();
        assert_eq!(
            advertised(listen, None).unwrap().address(5682),
            "127.0.0.1:5682"
        );
        let any: SocketAddr = "0.0.0.0:5682".parse().unwrap();
        assert!(advertised(any, None)
            .unwrap_err()
            .starts_with("--inter-cp-advertise-address"));
        let given = advertise_address("global-2").unwrap();
        assert_eq!(advertised(any, Some(&given)).unwrap(), given);
    }
}
