//! Following a JWKS file: re-read when its bytes change, the keys in force kept when the new
//! document does not load.

use std::time::Duration;

use super::{JwksError, JwksVerifier, read};

/// A task re-reading a [`JwksVerifier`]'s file; dropping it stops the task (the keys in force
/// stay).
///
/// ```no_run
/// # async fn run() -> Result<(), redlimit::key::JwksError> {
/// use std::time::Duration;
/// use redlimit::key::{Jwt, JwksVerifier};
///
/// let jwks = JwksVerifier::from_file("/etc/redlimit/jwks.json")?;
/// let _watch = jwks.watch(Duration::from_secs(5))?; // keep it as long as the keys are used
/// let key = Jwt::new(jwks);
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "dropping the watch stops following the file"]
pub struct JwksWatch {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for JwksWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl JwksVerifier {
    /// Re-reads the file every `every` (at least 100 ms) on the current Tokio runtime, and
    /// puts its keys in force when its bytes changed and it loads; a document that does not
    /// load is logged (`warn`) and the keys in force stay until a good one comes.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), redlimit::key::JwksError> {
    /// # let jwks = redlimit::key::JwksVerifier::from_file("/etc/redlimit/jwks.json")?;
    /// let watch = jwks.watch(std::time::Duration::from_secs(5))?;
    /// # Ok(()) }
    /// ```
    pub fn watch(&self, every: Duration) -> Result<JwksWatch, JwksError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| JwksError::Watch("not on a Tokio runtime"))?;
        let path = self
            .inner
            .path
            .clone()
            .ok_or(JwksError::Watch("the keys were not read from a file"))?;
        let verifier = self.clone();
        let every = every.max(Duration::from_millis(100));
        let task = runtime.spawn(async move {
            // The last document seen, loaded or not: a broken one is reported once, not at
            // every poll. Compared with the document in force at first, not with the file as
            // this task first finds it (it may start after the file changed).
            let mut seen: Option<Vec<u8>> = None;
            let mut unreadable = false;
            loop {
                tokio::time::sleep(every).await;
                let bytes = match read(&path) {
                    Ok(bytes) => bytes,
                    Err(error) => {
                        if !unreadable {
                            tracing::warn!(%error, "jwks: the file cannot be read; the keys in force stay");
                        }
                        unreadable = true;
                        continue;
                    }
                };
                unreadable = false;
                let in_force = *verifier.inner.keys.load().document == *bytes;
                if in_force || seen.as_deref() == Some(bytes.as_slice()) {
                    continue;
                }
                match verifier.reload_from(&bytes) {
                    Ok(count) => {
                        tracing::info!(path = %path.display(), keys = count, "jwks: keys reloaded");
                    }
                    Err(error) => {
                        tracing::warn!(%error, path = %path.display(), "jwks: the new document does not load; the keys in force stay");
                    }
                }
                seen = Some(bytes);
            }
        });
        Ok(JwksWatch { task })
    }
}
