//! The builder's TLS settings (feature `tls`): the authority, the client certificate, and
//! whether the host name is checked.

use super::RedisStoreBuilder;

impl RedisStoreBuilder {
    /// Trusts this PEM root certificate (e.g. a private CA) for `rediss://` connections, instead
    /// of the public web roots.
    ///
    /// TLS uses rustls's process-default crypto provider: yours if you installed one before
    /// building the store, else `ring` with the `tls-ring` feature, else building fails with
    /// [`ConfigError::NoCryptoProvider`](crate::ConfigError::NoCryptoProvider)
    /// (`docs/guide/stores.md`).
    ///
    /// ```no_run
    /// # fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let ca = std::fs::read("ca.pem")?;
    /// let store = redlimit::store::RedisStore::builder("rediss://redis.internal:6380")
    ///     .tls_root_certificate(ca)
    ///     .connect_lazy()?;
    /// # Ok(()) }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_root_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.root_certificate = Some(pem.into());
        self
    }

    /// Presents this client certificate (PEM: the certificate, then any intermediates) and
    /// its PEM private key to `rediss://` servers that ask for one (Redis's
    /// `tls-auth-clients yes`: mutual TLS). A malformed PEM fails building the store.
    ///
    /// ```no_run
    /// # fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = redlimit::store::RedisStore::builder("rediss://redis.internal:6380")
    ///     .tls_root_certificate(std::fs::read("ca.pem")?)
    ///     .tls_client_certificate(std::fs::read("client.pem")?, std::fs::read("client.key")?)
    ///     .connect_lazy()?;
    /// # Ok(()) }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_client_certificate(
        mut self,
        certificate_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.client_certificate = Some((certificate_pem.into(), key_pem.into()));
        self
    }

    /// Accepts a `rediss://` server's certificate whatever names it holds (default off):
    /// the chain is still verified, to [`tls_root_certificate`](Self::tls_root_certificate)'s
    /// authority or the public roots, with its validity dates and server-auth usage, but not
    /// the host name the URL dials. For Redis reached by an address its certificate does not
    /// name (an IP, a Kubernetes service); any certificate of the authority then passes, so
    /// keep the authority private. (envoyproxy/ratelimit's
    /// `REDIS_TLS_SKIP_HOSTNAME_VERIFICATION`.)
    ///
    /// ```
    /// let builder = redlimit::store::RedisStore::builder("rediss://10.0.0.5:6380")
    ///     .tls_skip_hostname_verification(true);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_skip_hostname_verification(mut self, skip: bool) -> Self {
        self.tls.skip_hostname_verification = skip;
        self
    }
}
