//! Object storage in the real etcd, the way kube-apiserver's etcd3 storage does it (minus
//! protobuf): one JSON object per key under `/registry/<resource>/[<namespace>/]<name>`, stored
//! without `metadata.resourceVersion`, which is filled in on every read from the key's
//! mod revision. Creates and updates are etcd transactions that compare the key's create or mod
//! revision, so concurrent writers get real conflicts.
//!
//! This module owns the etcd client and the key layout; it must not know about HTTP, users or
//! Status bodies. Every call is bounded by the call timeout.

use std::future::Future;
use std::time::Duration;

use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, GetOptions, Identity, TlsOptions, Txn,
    TxnOp,
};
use serde_json::Value;

/// Why a storage call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoreError {
    /// etcd answered with an error; the message is etcd's (e.g. `etcdserver: leader changed`).
    Etcd(String),
    /// The call did not finish within the call timeout.
    Timeout,
    /// The stored value is not a JSON object.
    Corrupt(String),
}

/// Why the store could not connect at start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    /// No connection to any endpoint within the connect timeout.
    #[error("no connection within {0:?}")]
    Timeout(Duration),
    /// The etcd client refused (TLS material, endpoints).
    #[error("{0}")]
    Client(#[from] etcd_client::Error),
    /// Connected, but the first read failed.
    #[error("first read: {0:?}")]
    FirstRead(StoreError),
}

/// A stored object and its mod revision.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub(crate) obj: Value,
    pub(crate) mod_revision: i64,
}

/// The etcd-backed object store.
#[derive(Clone)]
pub(crate) struct Store {
    client: Client,
    timeout: Duration,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Connects with mTLS and checks that etcd answers.
    pub(crate) async fn connect(
        endpoints: &[String],
        ca_pem: &[u8],
        cert_pem: &[u8],
        key_pem: &[u8],
        connect_timeout: Duration,
        timeout: Duration,
    ) -> Result<Store, ConnectError> {
        let tls = TlsOptions::new()
            .ca_certificate(Certificate::from_pem(ca_pem))
            .identity(Identity::from_pem(cert_pem, key_pem));
        let opts = ConnectOptions::new()
            .with_tls(tls)
            .with_connect_timeout(connect_timeout)
            .with_timeout(timeout);
        let client =
            match tokio::time::timeout(connect_timeout, Client::connect(endpoints, Some(opts)))
                .await
            {
                Err(_) => return Err(ConnectError::Timeout(connect_timeout)),
                Ok(Err(e)) => return Err(e.into()),
                Ok(Ok(c)) => c,
            };
        let store = Store { client, timeout };
        store
            .get("/registry/health-check-of-the-standin")
            .await
            .map_err(ConnectError::FirstRead)?;
        Ok(store)
    }

    /// Runs one etcd call within the call timeout, re-issuing it the way kube-apiserver's etcd
    /// client (clientv3's retry interceptor) does: a read that meets gRPC Unavailable (a member
    /// gone, `leader changed`) is retried; a write only when it cannot have been sent (no
    /// connection to any member). Retries are 25 ms apart, as clientv3's
    /// `defaultBackoffWaitBetween`.
    async fn call<T, F, Fut>(&self, repeatable: bool, mut f: F) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            match tokio::time::timeout_at(deadline, f()).await {
                Err(_) => return Err(StoreError::Timeout),
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) => {
                    let again = tokio::time::Instant::now() + RETRY_WAIT;
                    if again < deadline && safe_to_retry(&e, repeatable) {
                        tokio::time::sleep_until(again).await;
                        continue;
                    }
                    return Err(StoreError::Etcd(etcd_message(&e)));
                }
            }
        }
    }

    /// The object at `key`, if any.
    pub(crate) async fn get(&self, key: &str) -> Result<Option<Stored>, StoreError> {
        let kv = self.client.kv_client();
        let resp = self
            .call(true, || {
                let mut kv = kv.clone();
                async move { kv.get(key, None).await }
            })
            .await?;
        match resp.kvs().first() {
            None => Ok(None),
            Some(kv) => Ok(Some(decode(key, kv.value(), kv.mod_revision())?)),
        }
    }

    /// Every object under `prefix`, in key order, and the store revision of the read.
    pub(crate) async fn list(&self, prefix: &str) -> Result<(Vec<Stored>, i64), StoreError> {
        let kv = self.client.kv_client();
        let resp = self
            .call(true, || {
                let mut kv = kv.clone();
                async move { kv.get(prefix, Some(GetOptions::new().with_prefix())).await }
            })
            .await?;
        let rev = resp.header().map_or(0, |h| h.revision());
        let mut out = Vec::with_capacity(resp.kvs().len());
        for kv in resp.kvs() {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            out.push(decode(&key, kv.value(), kv.mod_revision())?);
        }
        Ok((out, rev))
    }

    /// Writes `obj` at `key` if the key does not exist. Returns the new mod revision, or `None`
    /// when the key exists.
    pub(crate) async fn create(&self, key: &str, obj: &Value) -> Result<Option<i64>, StoreError> {
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, encode(obj), None)]);
        self.txn(txn).await
    }

    /// Replaces the object at `key` if its mod revision is still `expected`. Returns the new mod
    /// revision, or `None` when the key changed (or vanished) since.
    pub(crate) async fn update(
        &self,
        key: &str,
        obj: &Value,
        expected: i64,
    ) -> Result<Option<i64>, StoreError> {
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, expected)])
            .and_then([TxnOp::put(key, encode(obj), None)]);
        self.txn(txn).await
    }

    /// Deletes `key` if its mod revision is still `expected`. Returns whether it did.
    pub(crate) async fn delete(&self, key: &str, expected: i64) -> Result<bool, StoreError> {
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, expected)])
            .and_then([TxnOp::delete(key, None)]);
        Ok(self.txn(txn).await?.is_some())
    }

    async fn txn(&self, txn: Txn) -> Result<Option<i64>, StoreError> {
        let kv = self.client.kv_client();
        let resp = self
            .call(false, || {
                let (mut kv, txn) = (kv.clone(), txn.clone());
                async move { kv.txn(txn).await }
            })
            .await?;
        if resp.succeeded() {
            // A put's key gets the revision of the transaction that wrote it.
            Ok(Some(resp.header().map_or(0, |h| h.revision())))
        } else {
            Ok(None)
        }
    }
}

/// What kube-apiserver stores: the object without its resourceVersion.
fn encode(obj: &Value) -> Vec<u8> {
    let mut obj = obj.clone();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        meta.remove("selfLink");
    }
    serde_json::to_vec(&obj).unwrap_or_default()
}

fn decode(key: &str, value: &[u8], mod_revision: i64) -> Result<Stored, StoreError> {
    let mut obj: Value = serde_json::from_slice(value)
        .map_err(|e| StoreError::Corrupt(format!("{key}: not JSON: {e}")))?;
    let meta = obj
        .as_object_mut()
        .ok_or_else(|| StoreError::Corrupt(format!("{key}: not a JSON object")))?
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(
            "resourceVersion".into(),
            Value::String(mod_revision.to_string()),
        );
    }
    Ok(Stored { obj, mod_revision })
}

/// Wait between two tries of one etcd call (clientv3 `defaultBackoffWaitBetween`).
const RETRY_WAIT: Duration = Duration::from_millis(25);

/// clientv3's `isSafeRetryImmutableRPC` / `isSafeRetryMutableRPC`: reads retry on Unavailable;
/// writes only when no connection carried them.
fn safe_to_retry(e: &etcd_client::Error, repeatable: bool) -> bool {
    let not_sent = |m: &str| {
        let m = m.to_ascii_lowercase();
        m.contains("tcp connect error")
            || m.contains("connection refused")
            || m.contains("error trying to connect")
            || m.contains("no address available")
            || m.contains("no connection available")
    };
    match e {
        etcd_client::Error::GRpcStatus(s) if s.code() == tonic::Code::Unavailable => {
            repeatable || not_sent(s.message())
        }
        etcd_client::Error::TransportError(t) => repeatable || not_sent(&t.to_string()),
        _ => false,
    }
}

/// The error text kube-apiserver passes on: etcd's own for its server errors (clientv3 maps
/// them to `rpctypes` errors: `etcdserver: leader changed`), Go's gRPC text for the rest
/// (`rpc error: code = Unavailable desc = ...`).
fn etcd_message(e: &etcd_client::Error) -> String {
    match e {
        etcd_client::Error::GRpcStatus(s) if s.message().starts_with("etcdserver:") => {
            s.message().to_string()
        }
        etcd_client::Error::GRpcStatus(s) => {
            format!("rpc error: code = {:?} desc = {}", s.code(), s.message())
        }
        etcd_client::Error::TransportError(t) => {
            format!("rpc error: code = Unavailable desc = {t}")
        }
        other => other.to_string(),
    }
}
