# An IL5 GPU pool: OpenShift on AWS GovCloud (us-gov-west-1) gains Azure Government
# (usgovvirginia) A100 workers over an IPsec/BGP link.

stack = "il5-gpu"

variable "subscription_id" {
  type    = string
  default = "11111111-2222-3333-4444-555555555555"
}

variable "tenant_id" {
  type    = string
  default = "66666666-7777-8888-9999-000000000000"
}

cluster {
  infrastructure_name = "il5-gpu-x7k2p"
  api_url             = "https://api.il5.example.mil:6443"
  oidc_issuer_url     = "https://il5-gpu-oidc.s3.us-gov-west-1.amazonaws.com"
  machine_network     = "10.0.0.0/16"
  cluster_network     = "10.128.0.0/14"
  service_network     = "172.30.0.0/16"
  overlay_mtu         = 1300
  # An IL5 cluster runs in FIPS mode (install-config `fips: true`): the pool's nodes follow it,
  # and the link's IPsec keeps to what FIPS allows. Preflight checks it against the cluster.
  fips                = true
  # The cluster's SSH key (install-config `sshKey`; `oc get machineconfig 99-worker-ssh`):
  # Azure makes no Linux VM without one.
  ssh_public_key      = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCZhwckwnUyPZGO6ULFYAiyb0pshuGkZ/Fr+TE8XdlKZsB8/XF/mGUzL12b4DgcPVwisJaCUsNSX0yW+YisIjIvQivdIvs3o4/yoTLNDswcDE2LJH9Gvq16GawOtk6vuguTcDrypHzLFhQp5W+ynE3RCtZo4rIaTc1yONVAv0dkyvk5Kcjxhd+bgAJFvH5l3X8zopaXP/GdxH8XNrHKZQZEJtQx/mPgPxDpTolRHnJpDiYmBo0eHfOG8iuMl50RBJy568uv/1oNdTRxLYRGeEnvLVMN+Txo8rVUgxNcJkVnuTucCveaICF+Hyb/wmC0Kr8g7rZhlM/QNdVN581d9Qb1 xcsp-example"
}

aws {
  region = "us-gov-west-1"
  asn    = 64512
  tags   = { "cost-center" = "gpu-il5", owner = "platform" }
  # vpc_id, route_table_ids and security_group_ids are discovered from the
  # cluster's kubernetes.io/cluster/<infrastructure_name> tags when left out.
}

azure {
  cloud           = "usgovernment"
  subscription_id = var.subscription_id
  tenant_id       = var.tenant_id
  location        = "usgovvirginia"
  resource_group  = "il5-gpu-workers"
  tags            = { "cost-center" = "gpu-il5", owner = "platform" }
}

network "link" {
  driver         = "ipsec"
  vnet_cidr      = "10.200.0.0/16"
  gateway_subnet = cidrsubnet("10.200.0.0/16", 11, 2047)
  gateway_sku    = "VpnGw2AZ"
  routing        = "bgp"
  azure_asn      = 65010

  ipsec_policy {
    ike_version          = "ikev2"
    encryption           = "gcm-aes256"
    integrity            = "sha384"
    dh_group             = 20
    pfs_group            = 20
    sa_lifetime_seconds  = 3600
    ike_lifetime_seconds = 28800
  }
}

workload_identity "capz" {
  # issuer defaults to cluster.oidc_issuer_url; audience, namespace and service account to the
  # token OpenShift's CAPZ presents (api://AzureADTokenExchange, openshift-cluster-api/capz-manager).
  role = "Contributor"
}

worker_pool "gpu" {
  network  = network.link
  identity = workload_identity.capz
  vm_size  = "Standard_ND96asr_v4"
  replicas = 2
  subnet_cidr = "10.200.1.0/24"
  zones    = ["1", "2"]

  # Whether Azure Government's Marketplace carries azureopenshift/aro4 is not established; where
  # the location has no RHCOS offer, import the release's VHD instead (the URL `xcsp preflight`
  # prints from coreos-bootimages), as the OpenShift installer does:
  #   image { vhd = "https://rhcos.blob.core.windows.net/imagebucket/rhcos-422.94.202511041021-0-azure.x86_64.vhd" }
  image {
    publisher = "azureopenshift"
    offer     = "aro4"
    sku       = "422-v2" # the cluster's release (coreos-bootimages), Generation 2: ND A100 v4 runs no Generation 1 image
    version   = "latest"
  }

  os_disk {
    size_gb              = 512
    storage_account_type = "Premium_LRS"
  }

  labels = {
    "node-role.kubernetes.io/gpu" = ""
    "nvidia.com/gpu.product"      = "A100-SXM4-40GB"
  }
  taints = [{ key = "nvidia.com/gpu", value = "true", effect = "NoSchedule" }]
  machine_health_check = true
}

output "tunnels" {
  value = network.link.tunnels
}

output "identity_client_id" {
  value = workload_identity.capz.client_id
}
