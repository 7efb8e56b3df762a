//! Manifests installed before a run: CustomResourceDefinitions (a gang
//! scheduler's PodGroup) and any object to create with them, read from
//! the user's files as `kubectl apply -f` reads them.
//!
//! [`load_manifests`] takes a file or a directory (its `.yaml`, `.yml` and
//! `.json` files in name order), multi-document YAML or JSON, and flattens
//! `List` kinds; [`Store::install_manifests`] creates the CRDs first, then
//! the rest. Every error names the file, the document (counted from 1 in
//! its file) and the reason, so a bad manifest is refused before the run.

use crate::error::ApiError;
use crate::store::{Origin, Store};
use serde::Deserialize;
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};

/// One object read from a manifest file.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    pub file: PathBuf,
    /// Position of its document in the file, counted from 1 (the items of
    /// a `List` share their document's).
    pub document: usize,
    pub object: Value,
}

/// A manifest that cannot be read or installed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct ManifestError {
    pub file: PathBuf,
    /// The document, counted from 1; `None` when the file itself is at fault.
    pub document: Option<usize>,
    pub reason: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.document {
            Some(d) => write!(
                f,
                "{}: document {d} (counting from 1): {}",
                self.file.display(),
                self.reason
            ),
            None => write!(f, "{}: {}", self.file.display(), self.reason),
        }
    }
}

fn err(file: &Path, document: Option<usize>, reason: impl Into<String>) -> ManifestError {
    ManifestError {
        file: file.to_path_buf(),
        document,
        reason: reason.into(),
    }
}

fn is_manifest(p: &Path) -> bool {
    matches!(
        p.extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("yaml" | "yml" | "json")
    )
}

/// Reads the manifests of a file, or of every `.yaml`, `.yml` and `.json`
/// file of a directory (not its subdirectories) in name order.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("manifests-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// std::fs::write(dir.join("crd.yaml"), fakeapi::COSCHEDULING_PODGROUP_CRD).unwrap();
/// std::fs::write(
///     dir.join("groups.yaml"),
///     "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g1}\nspec: {minMember: 2}\n",
/// )
/// .unwrap();
/// let manifests = fakeapi::load_manifests(&dir).unwrap();
/// let store = fakeapi::Store::new();
/// store.install_manifests(&manifests).unwrap();
/// assert!(store.get("podgroups.scheduling.x-k8s.io", Some("default"), "g1").is_ok());
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn load_manifests(path: &Path) -> Result<Vec<Manifest>, ManifestError> {
    let meta = std::fs::metadata(path).map_err(|e| err(path, None, format!("cannot read: {e}")))?;
    if !meta.is_dir() {
        return load_file(path);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| err(path, None, format!("cannot list the directory: {e}")))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && is_manifest(p))
        .collect();
    if files.is_empty() {
        return Err(err(
            path,
            None,
            "no .yaml, .yml or .json file in this directory",
        ));
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        out.extend(load_file(&f)?);
    }
    Ok(out)
}

fn load_file(path: &Path) -> Result<Vec<Manifest>, ManifestError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| err(path, None, format!("cannot read: {e}")))?;
    let json = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let mut docs: Vec<(usize, Value)> = Vec::new();
    if json {
        let stream = serde_json::Deserializer::from_str(&text).into_iter::<Value>();
        for (i, doc) in stream.enumerate() {
            let doc = doc.map_err(|e| err(path, Some(i + 1), format!("not valid JSON: {e}")))?;
            docs.push((i + 1, doc));
        }
    } else {
        for (i, doc) in serde_yaml::Deserializer::from_str(&text).enumerate() {
            let v = Value::deserialize(doc)
                .map_err(|e| err(path, Some(i + 1), format!("not valid YAML: {e}")))?;
            docs.push((i + 1, v));
        }
    }
    let mut out = Vec::new();
    for (n, doc) in docs {
        if doc.is_null() {
            continue; // an empty document (a leading or trailing `---`)
        }
        check_object(&doc).map_err(|r| err(path, Some(n), r))?;
        let kind = doc["kind"].as_str().unwrap_or("");
        match doc.get("items") {
            Some(items) if kind.ends_with("List") => {
                let items = items.as_array().ok_or_else(|| {
                    err(
                        path,
                        Some(n),
                        format!("the items of this {kind} are not a list"),
                    )
                })?;
                for (j, item) in items.iter().enumerate() {
                    check_object(item)
                        .map_err(|r| err(path, Some(n), format!("item {j} of the {kind}: {r}")))?;
                    out.push(Manifest {
                        file: path.to_path_buf(),
                        document: n,
                        object: item.clone(),
                    });
                }
            }
            _ => out.push(Manifest {
                file: path.to_path_buf(),
                document: n,
                object: doc,
            }),
        }
    }
    Ok(out)
}

/// What every manifest needs: an object with `apiVersion` and `kind`.
fn check_object(doc: &Value) -> Result<(), String> {
    let Some(m) = doc.as_object() else {
        return Err(format!(
            "expected an object with apiVersion and kind, got {doc}"
        ));
    };
    for f in ["apiVersion", "kind"] {
        match m.get(f) {
            Some(Value::String(s)) if !s.is_empty() => {}
            Some(other) => return Err(format!("{f} must be a non-empty string, got {other}")),
            None => return Err(format!("{f} is missing")),
        }
    }
    Ok(())
}

fn is_crd(m: &Manifest) -> bool {
    m.object["kind"] == "CustomResourceDefinition"
        && m.object["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("apiextensions.k8s.io/"))
}

impl Store {
    /// Creates the objects of `manifests` through the Rust API: the
    /// CustomResourceDefinitions first (each established at once), then
    /// the others in order, so a file may hold a CRD and objects of its
    /// kind in any order. Stops at the first refusal, naming its file and
    /// document. Returns the created objects.
    pub fn install_manifests(&self, manifests: &[Manifest]) -> Result<Vec<Value>, ManifestError> {
        let (crds, rest): (Vec<&Manifest>, Vec<&Manifest>) =
            manifests.iter().partition(|m| is_crd(m));
        let mut created = Vec::new();
        for m in crds.into_iter().chain(rest) {
            let at = |e: String| err(&m.file, Some(m.document), e);
            if m.object["apiVersion"] != "apiextensions.k8s.io/v1" && is_crd(m) {
                return Err(at(format!(
                    "{} is not served: write CustomResourceDefinitions in apiextensions.k8s.io/v1",
                    m.object["apiVersion"]
                )));
            }
            let api_version = m.object["apiVersion"].as_str().unwrap_or("");
            let kind = m.object["kind"].as_str().unwrap_or("");
            let info = self.resource_for_kind(api_version, kind).ok_or_else(|| {
                at(format!(
                    "the API does not serve kind {kind:?} in {api_version:?} (is its CustomResourceDefinition installed?)"
                ))
            })?;
            let served = self
                .served_for(info)
                .map_err(|e: ApiError| at(e.to_string()))?;
            let namespace = m.object["metadata"]["namespace"].as_str();
            let obj = self
                .create_in(&served, namespace, m.object.clone(), Origin::Api, false)
                .map_err(|e| at(e.to_string()))?;
            created.push((*obj.value).clone());
        }
        Ok(created)
    }
}

/// Checks `manifests` by installing them in a scratch store: the refusals
/// [`Store::install_manifests`] would meet on a fresh store, before the run.
pub fn check_manifests(manifests: &[Manifest]) -> Result<(), ManifestError> {
    Store::new().install_manifests(manifests).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("fakeapi-manifest-{name}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn files_documents_lists_and_order() {
        let d = dir("ok");
        std::fs::write(
            d.join("b.yaml"),
            "---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: a}}\n- {apiVersion: v1, kind: Namespace, metadata: {name: b}}\n---\n",
        )
        .unwrap();
        std::fs::write(
            d.join("a.json"),
            r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}"#,
        )
        .unwrap();
        std::fs::write(d.join("notes.txt"), "ignored").unwrap();
        let m = load_manifests(&d).unwrap();
        let names: Vec<(&str, usize)> = m
            .iter()
            .map(|m| (m.object["metadata"]["name"].as_str().unwrap(), m.document))
            .collect();
        assert_eq!(names, vec![("c", 1), ("a", 1), ("b", 1)]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn errors_name_file_document_and_reason() {
        let d = dir("bad");
        let f = d.join("x.yaml");
        std::fs::write(
            &f,
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\nkind: Pod\n",
        )
        .unwrap();
        let e = load_manifests(&f).unwrap_err();
        assert_eq!(e.document, Some(2));
        assert!(
            e.to_string()
                .ends_with("x.yaml: document 2 (counting from 1): apiVersion is missing"),
            "{e}"
        );
        std::fs::write(&f, "a: [1\n").unwrap();
        let e = load_manifests(&f).unwrap_err();
        assert_eq!(e.document, Some(1));
        assert!(e.reason.starts_with("not valid YAML"), "{e}");
        let e = load_manifests(&d.join("missing.yaml")).unwrap_err();
        assert_eq!(e.document, None);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn install_refuses_a_bad_custom_object_with_its_place() {
        let d = dir("install");
        let f = d.join("all.yaml");
        std::fs::write(
            &f,
            format!(
                "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {{name: g}}\nspec: {{minMember: x}}\n---\n{}",
                crate::COSCHEDULING_PODGROUP_CRD
            ),
        )
        .unwrap();
        let m = load_manifests(&f).unwrap();
        let e = check_manifests(&m).unwrap_err();
        assert_eq!(e.document, Some(1));
        assert!(
            e.reason
                .contains("spec.minMember: Invalid value: \"string\""),
            "{e}"
        );
        let store = Store::new();
        let mut fixed = m.clone();
        fixed[0].object["spec"] = json!({"minMember": 3});
        let created = store.install_manifests(&fixed).unwrap();
        assert_eq!(created[0]["kind"], "CustomResourceDefinition");
        assert_eq!(created[1]["spec"]["minMember"], 3);
        let _ = std::fs::remove_dir_all(&d);
    }
}
