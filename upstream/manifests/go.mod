// Modules the local world reads manifests from (CRDs, kustomize patches), not code: downloaded
// by scripts/upstream-setup into the module cache at these pins, never copied into the project.
// CAPZ's CRDs (config/crd/bases, with its contract-label patches) until CAPZ itself runs;
// OpenShift's API types (config/v1, machineconfiguration/v1 zz_generated.crd-manifests);
// CAPA's AWSCluster CRD, which an OpenShift cluster on AWS serves (its own Cluster points at one).
module xcsp.dev/upstream/manifests

go 1.25.0

require (
	github.com/openshift/api v0.0.0-20260709102940-580f1c1ba691
	sigs.k8s.io/cluster-api-provider-aws/v2 v2.13.0
	sigs.k8s.io/cluster-api-provider-azure v1.26.0
)
