//! `GRPC_CLIENT_TLS_SAN`: a client certificate that chains to `GRPC_CLIENT_TLS_CACERT` must
//! also be valid for this name, as the Go service's `verifyClient` asks (Go's
//! `x509.Certificate.Verify` with `DNSName`: a DNS name matched against the certificate's DNS
//! names, wildcards included, or an IP address against its IP addresses).

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, Error, SignatureScheme};

/// A client verifier that also asks for a name.
#[derive(Debug)]
pub(crate) struct NamedClient {
    chain: Arc<dyn ClientCertVerifier>,
    name: ServerName<'static>,
}

impl NamedClient {
    /// `chain` verifies the chain; this, then, the name.
    pub(crate) fn new(chain: Arc<dyn ClientCertVerifier>, name: ServerName<'static>) -> Self {
        NamedClient { chain, name }
    }
}

impl ClientCertVerifier for NamedClient {
    fn offer_client_auth(&self) -> bool {
        self.chain.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.chain.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.chain.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        let verified = self
            .chain
            .verify_client_cert(end_entity, intermediates, now)?;
        let cert = webpki::EndEntityCert::try_from(end_entity)
            .map_err(|_| Error::InvalidCertificate(CertificateError::BadEncoding))?;
        match cert.verify_is_valid_for_subject_name(&self.name) {
            Ok(()) => Ok(verified),
            Err(_) => {
                tracing::warn!(
                    "a gRPC client's certificate is not valid for GRPC_CLIENT_TLS_SAN ({}): refused",
                    self.name.to_str()
                );
                Err(Error::InvalidCertificate(CertificateError::NotValidForName))
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.chain.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.chain.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chain.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{
        BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };
    use rustls::RootCertStore;
    use rustls::server::WebPkiClientVerifier;

    use super::*;

    /// A CA, and a client certificate for `sans` it signed.
    fn chain(sans: &[&str]) -> (CertificateDer<'static>, CertificateDer<'static>) {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_key = KeyPair::generate().unwrap();
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        let mut leaf =
            CertificateParams::new(sans.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
                .unwrap();
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = leaf
            .signed_by(&KeyPair::generate().unwrap(), &issuer)
            .unwrap();
        (ca_cert.der().clone(), cert.der().clone())
    }

    fn verify(sans: &[&str], wanted: &str) -> Result<(), Error> {
        let (ca, cert) = chain(sans);
        let mut roots = RootCertStore::empty();
        roots.add(ca).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        let name = ServerName::try_from(wanted.to_owned()).unwrap();
        NamedClient::new(chain, name)
            .verify_client_cert(&cert, &[], UnixTime::now())
            .map(|_| ())
    }

    #[test]
    fn the_name_matches_as_gos_verify_hostname_does() {
        assert!(verify(&["envoy.client.test"], "envoy.client.test").is_ok());
        assert!(verify(&["ENVOY.client.test"], "envoy.client.TEST").is_ok());
        assert!(verify(&["*.client.test"], "envoy.client.test").is_ok());
        assert!(verify(&["*.client.test"], "a.envoy.client.test").is_err());
        assert!(verify(&["10.0.0.7"], "10.0.0.7").is_ok());
        assert!(verify(&["intruder.test"], "envoy.client.test").is_err());
        assert!(verify(&["10.0.0.8"], "10.0.0.7").is_err());
    }
}
