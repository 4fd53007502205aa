//! The secrets base generator (Kuma 2.7 `SecretsProxyGenerator`): the two SDS secrets a DPP of an
//! mTLS mesh needs, named by [`identity_secret_name`] and [`ca_secret_name`] (which the inbound
//! and outbound mTLS contexts reference). The certificates come from the caller (the zone CP's
//! CA), so [`crate::generate::generate`] does not call it: the zone CP adds the secrets to the
//! snapshot it serves.

use crate::names::{ca_secret_name, identity_secret_name};

/// The two SDS secrets of `mesh` as Kuma's secrets generator serves them:
/// [`identity_secret_name`] holding the DPP's certificate chain and private key (PEM, inline),
/// and [`ca_secret_name`] holding the mesh CA bundle as a validation context.
pub fn mesh_secrets(
    mesh: &str,
    certificate_chain_pem: &[u8],
    private_key_pem: &[u8],
    ca_pem: &[u8],
) -> [envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret; 2] {
    use envoy_types::pb::envoy::config::core::v3::{data_source, DataSource};
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        secret, CertificateValidationContext, Secret, TlsCertificate,
    };
    let inline = |bytes: &[u8]| {
        Some(DataSource {
            specifier: Some(data_source::Specifier::InlineBytes(bytes.to_vec())),
            ..Default::default()
        })
    };
    [
        Secret {
            name: identity_secret_name(mesh),
            r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
                certificate_chain: inline(certificate_chain_pem),
                private_key: inline(private_key_pem),
                ..Default::default()
            })),
        },
        Secret {
            name: ca_secret_name(mesh),
            r#type: Some(secret::Type::ValidationContext(
                CertificateValidationContext {
                    trusted_ca: inline(ca_pem),
                    ..Default::default()
                },
            )),
        },
    ]
}
