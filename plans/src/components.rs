//! A Cluster API provider's release manifests (`core-components.yaml`, `infrastructure-components.yaml`:
//! what `clusterctl init` installs, every release of Cluster API and CAPZ publishes them), read
//! when the spec is loaded: what the plan shows of the provider (its version and image) and what
//! the cluster is checked against (its CRDs). The documents themselves are applied by the
//! Kubernetes provider (`xcsp_kube::components`), from the same file, checked by its digest.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// What a components file holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Components {
    /// The file, resolved against the spec's directory.
    pub path: PathBuf,
    /// SHA-256 of its bytes, hex.
    pub digest: String,
    /// The provider's name, its documents' `cluster.x-k8s.io/provider` label
    /// (`cluster-api`, `infrastructure-azure`).
    pub provider: String,
    /// The manager Deployment's image, and the version its tag says.
    pub image: String,
    pub version: String,
    /// The CRDs it installs, by name.
    pub crds: Vec<String>,
}

/// The version an image's tag says (`registry.k8s.io/cluster-api/cluster-api-controller:v1.13.6`
/// -> `v1.13.6`); a digest-only reference has none (`unknown`).
pub fn image_version(image: &str) -> String {
    let name = image.split('@').next().unwrap_or(image);
    let last = name.rsplit('/').next().unwrap_or(name);
    last.split_once(':').map_or("unknown".to_string(), |(_, tag)| tag.to_string())
}

/// The repository of an image reference and whether it is pulled by digest
/// (`registry:5000/ns/repo:tag` -> `registry:5000/ns/repo`, false).
pub fn image_repository(image: &str) -> (&str, bool) {
    if let Some((repo, _)) = image.split_once('@') {
        return (repo, true);
    }
    let last = image.rfind('/').map_or(0, |i| i + 1);
    (image[last..].find(':').map_or(image, |c| &image[..last + c]), false)
}

/// Reads and checks `path`: YAML documents, one Deployment whose container runs the manager.
pub fn read(path: &Path) -> Result<Components, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let digest = hex::encode(Sha256::digest(&bytes));
    let text = String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", path.display()))?;
    let mut provider = String::new();
    let mut image = String::new();
    let mut crds = Vec::new();
    for doc in serde_norway::Deserializer::from_str(&text) {
        let v: serde_json::Value = serde::Deserialize::deserialize(doc)
            .map_err(|e| format!("{} is not YAML documents: {e}", path.display()))?;
        // Azure Service Operator's objects, which CAPZ's release adds and xcsp leaves out
        // (`xcsp_kube::components`): its Deployment sorts before CAPZ's in the release file.
        let name = v["metadata"]["name"].as_str().unwrap_or_default();
        if v.is_null() || name.starts_with("azureserviceoperator-") {
            continue;
        }
        if provider.is_empty()
            && let Some(p) = v["metadata"]["labels"]["cluster.x-k8s.io/provider"].as_str()
        {
            provider = p.to_string();
        }
        match v["kind"].as_str() {
            Some("CustomResourceDefinition") => {
                crds.push(v["metadata"]["name"].as_str().unwrap_or_default().to_string())
            }
            Some("Deployment") if image.is_empty() => {
                let containers = v["spec"]["template"]["spec"]["containers"].as_array().cloned().unwrap_or_default();
                let manager = containers.iter().find(|c| c["name"] == "manager").or(containers.first());
                image = manager.and_then(|c| c["image"].as_str()).unwrap_or_default().to_string();
            }
            _ => {}
        }
    }
    if image.is_empty() {
        return Err(format!("{} holds no Deployment of a manager: not a provider's components file", path.display()));
    }
    if provider.is_empty() {
        return Err(format!(
            "{}: no document carries the `cluster.x-k8s.io/provider` label every provider's release manifests carry",
            path.display()
        ));
    }
    Ok(Components { path: path.to_path_buf(), digest, provider, version: image_version(&image), image, crds })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_reference_is_split_at_its_tag_or_digest_not_at_a_registry_port() {
        assert_eq!(image_repository("registry.example:5000/ns/capz:v1"), ("registry.example:5000/ns/capz", false));
        assert_eq!(image_repository("registry.example:5000/ns/capz"), ("registry.example:5000/ns/capz", false));
        assert_eq!(image_repository("quay.io/a/b@sha256:00"), ("quay.io/a/b", true));
    }

    #[test]
    fn a_components_file_says_its_provider_image_and_crds() {
        let dir = tempfile_dir();
        let path = dir.join("c.yaml");
        std::fs::write(
            &path,
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: clusters.cluster.x-k8s.io\n  labels:\n    cluster.x-k8s.io/provider: cluster-api\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: capi-controller-manager\nspec:\n  template:\n    spec:\n      containers:\n      - name: manager\n        image: registry.k8s.io/cluster-api/cluster-api-controller:v1.13.6\n",
        )
        .unwrap();
        let c = read(&path).unwrap();
        assert_eq!(c.provider, "cluster-api");
        assert_eq!(c.version, "v1.13.6");
        assert_eq!(c.crds, vec!["clusters.cluster.x-k8s.io"]);
        assert_eq!(c.digest.len(), 64);
        std::fs::write(&path, "kind: ConfigMap\nmetadata:\n  name: x\n").unwrap();
        assert!(read(&path).unwrap_err().contains("no Deployment"));
        assert_eq!(image_version("mirror.example.mil/capz@sha256:ab"), "unknown");
        let _ = std::fs::remove_dir_all(dir);
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("xcsp-components-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
