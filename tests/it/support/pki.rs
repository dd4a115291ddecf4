//! A private CA and a server certificate it signed, for the TLS tests (a Redis serving
//! `rediss://`, tonic servers serving TLS).

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

/// A private CA's certificate (PEM), and a certificate for `127.0.0.1` and `localhost` it
/// signed, with its key.
pub(crate) struct Pki {
    pub(crate) ca: String,
    pub(crate) cert: rcgen::Certificate,
    pub(crate) key: KeyPair,
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
    }
}
