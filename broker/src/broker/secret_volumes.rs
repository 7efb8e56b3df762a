//! Secret volumes (`batkube run --mount-secret NAMESPACE/NAME=DIR`): what a
//! kubelet does for a pod that mounts a Secret, for a program run beside the
//! scheduler. Each key of the Secret's `data` is a file of `DIR` holding its
//! decoded value, rewritten (a new file renamed over the old one, so that a
//! reader never sees half of it) whenever the Secret changes, and removed
//! with its key. Kueue's internal cert controller writes its webhook
//! server's certificates into a Secret and waits for them to appear in its
//! certificate directory, as the Secret volume of its Deployment makes them
//! appear on a cluster.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use base64::Engine;
use fakeapi::{Change, EventType};
use serde_json::Value;

use super::Broker;

/// One Secret mounted at a directory.
#[derive(Debug, Clone, PartialEq)]
pub struct SecretMount {
    pub namespace: String,
    pub name: String,
    pub dir: PathBuf,
}

impl SecretMount {
    /// `NAMESPACE/NAME=DIR`.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "--mount-secret {spec:?}: expected NAMESPACE/NAME=DIR (for example \
                 kueue-system/kueue-webhook-server-cert=/tmp/kueue-certs)"
            )
        };
        let (secret, dir) = spec.split_once('=').ok_or_else(bad)?;
        let (namespace, name) = secret.split_once('/').ok_or_else(bad)?;
        if namespace.is_empty() || name.is_empty() || dir.is_empty() {
            return Err(bad());
        }
        Ok(SecretMount {
            namespace: namespace.into(),
            name: name.into(),
            dir: dir.into(),
        })
    }

    /// Makes the directory (a kubelet mounts an empty volume for a Secret
    /// that has no data yet).
    pub fn prepare(&self) -> Result<(), String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| {
            format!(
                "--mount-secret {}/{}: cannot make {}: {e}",
                self.namespace,
                self.name,
                self.dir.display()
            )
        })
    }

    /// Writes the Secret's data as files, and removes the files of keys it
    /// no longer has; returns the keys written.
    fn write(&self, secret: Option<&Value>) -> Result<Vec<String>, String> {
        let data = secret
            .and_then(|s| s["data"].as_object())
            .cloned()
            .unwrap_or_default();
        let mut keys = BTreeSet::new();
        for (key, value) in &data {
            // Keys are checked by the API (no '/', not '.' or '..').
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(value.as_str().unwrap_or(""))
                .map_err(|e| format!("key {key}: not base64: {e}"))?;
            let tmp = self.dir.join(format!("..{key}.tmp"));
            std::fs::write(&tmp, &bytes)
                .and_then(|()| std::fs::rename(&tmp, self.dir.join(key)))
                .map_err(|e| format!("writing {}: {e}", self.dir.join(key).display()))?;
            keys.insert(key.clone());
        }
        let written: BTreeSet<String> = std::fs::read_dir(&self.dir)
            .map_err(|e| format!("reading {}: {e}", self.dir.display()))?
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with(".."))
            .collect();
        for gone in written.difference(&keys) {
            let _ = std::fs::remove_file(self.dir.join(gone));
        }
        Ok(keys.into_iter().collect())
    }

    fn is(&self, ch: &Change) -> bool {
        ch.resource.group.is_empty()
            && ch.resource.plural == "secrets"
            && ch.name == self.name
            && ch.namespace == self.namespace
    }

    fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Broker {
    /// Mounts `mounts` from now on, with what their Secrets hold already.
    pub fn mount_secrets(&mut self, mounts: Vec<SecretMount>) -> Result<(), String> {
        for m in &mounts {
            m.prepare()?;
            let current = self.store.get("secrets", Some(&m.namespace), &m.name).ok();
            m.write(current.as_ref())
                .map_err(|e| format!("--mount-secret {}/{}: {e}", m.namespace, m.name))?;
        }
        self.secret_mounts = mounts;
        Ok(())
    }

    /// A change to a mounted Secret: its files follow it.
    pub(super) fn secret_changed(&mut self, ch: &Change) {
        let Some(m) = self.secret_mounts.iter().find(|m| m.is(ch)) else {
            return;
        };
        let secret = (ch.kind != EventType::Deleted).then_some(&*ch.object);
        match m.write(secret) {
            Ok(keys) => tracing::info!(
                secret = %format!("{}/{}", m.namespace, m.name),
                dir = %m.dir().display(),
                ?keys,
                "the Secret's volume follows it"
            ),
            Err(e) => {
                let message = format!("--mount-secret {}/{}: {e}", m.namespace, m.name);
                tracing::warn!("{message}");
                self.warnings.push(message);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_parse_and_name_the_flag_when_bad() {
        assert_eq!(
            SecretMount::parse("kueue-system/cert=/tmp/x").unwrap(),
            SecretMount {
                namespace: "kueue-system".into(),
                name: "cert".into(),
                dir: "/tmp/x".into()
            }
        );
        for bad in ["cert=/tmp/x", "ns/cert", "/cert=/tmp", "ns/=/tmp", "ns/c="] {
            let e = SecretMount::parse(bad).unwrap_err();
            assert!(
                e.contains("--mount-secret") && e.contains("NAMESPACE/NAME=DIR"),
                "{e}"
            );
        }
    }

    #[test]
    fn files_follow_the_secrets_data() {
        let dir = tempfile::tempdir().unwrap();
        let m = SecretMount::parse(&format!("ns/s={}", dir.path().join("v").display())).unwrap();
        m.prepare().unwrap();
        assert_eq!(m.write(None).unwrap(), Vec::<String>::new());
        let s = serde_json::json!({"data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5"}});
        assert_eq!(m.write(Some(&s)).unwrap(), ["tls.crt", "tls.key"]);
        assert_eq!(std::fs::read(m.dir().join("tls.crt")).unwrap(), b"cert");
        let s = serde_json::json!({"data": {"tls.crt": "bmV3"}});
        m.write(Some(&s)).unwrap();
        assert_eq!(std::fs::read(m.dir().join("tls.crt")).unwrap(), b"new");
        assert!(
            !m.dir().join("tls.key").exists(),
            "a removed key's file goes"
        );
    }
}
