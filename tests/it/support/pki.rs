//! A private CA and a server certificate it signed, for the TLS tests (a Redis serving
//! `rediss://`, tonic servers serving TLS).

use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};

/// A private CA's certificate (PEM), and a certificate for `127.0.0.1` and `localhost` it
/// signed, with its key.
pub(crate) struct Pki {
    pub(crate) ca: String,
    pub(crate) cert: rcgen::Certificate,
    pub(crate) key: KeyPair,
    /// The CA, to sign more certificates with ([`Pki::leaf`]).
    pub(crate) issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    /// A certificate for `names` signed by this CA, for a client (`ClientAuth`) or a server:
    /// its PEM and its key's.
    pub(crate) fn leaf(&self, names: &[&str], client: bool) -> (String, String) {
        let mut params =
            CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
                .unwrap();
        // rcgen names every certificate alike by default: a leaf named as its CA looks
        // self-signed to OpenSSL (Redis's), which then refuses it as of an unknown CA.
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(
            rcgen::DnType::CommonName,
            names.first().copied().unwrap_or("leaf"),
        );
        params.extended_key_usages = vec![if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

pub(crate) fn pki() -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    Pki {
        ca: ca.pem(),
        cert,
        key,
        issuer,
    }
}
