# A public-cloud pool: OpenShift on AWS us-east-1 with Azure eastus T4 workers.

cluster {
  infrastructure_name = "demo-k8x2q"
  api_url             = "https://api.demo.example.com:6443"
  oidc_issuer_url     = "https://demo-oidc.s3.us-east-1.amazonaws.com"
  machine_network     = "10.0.0.0/16"
  overlay_mtu         = 1300
  # The cluster's SSH key (install-config `sshKey`; `oc get machineconfig 99-worker-ssh`):
  # Azure makes no Linux VM without one.
  ssh_public_key      = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCZhwckwnUyPZGO6ULFYAiyb0pshuGkZ/Fr+TE8XdlKZsB8/XF/mGUzL12b4DgcPVwisJaCUsNSX0yW+YisIjIvQivdIvs3o4/yoTLNDswcDE2LJH9Gvq16GawOtk6vuguTcDrypHzLFhQp5W+ynE3RCtZo4rIaTc1yONVAv0dkyvk5Kcjxhd+bgAJFvH5l3X8zopaXP/GdxH8XNrHKZQZEJtQx/mPgPxDpTolRHnJpDiYmBo0eHfOG8iuMl50RBJy568uv/1oNdTRxLYRGeEnvLVMN+Txo8rVUgxNcJkVnuTucCveaICF+Hyb/wmC0Kr8g7rZhlM/QNdVN581d9Qb1 xcsp-example"
}

aws {
  region = "us-east-1"
  # The cluster's VPC may be named (vpc_id = "vpc-..."); without it, xcsp finds the VPC
  # tagged kubernetes.io/cluster/<infrastructure_name>, as the IL5 example does.
}

azure {
  subscription_id = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
  tenant_id       = "ffffffff-0000-1111-2222-333333333333"
  location        = "eastus"
  resource_group  = "demo-workers"
}

network "link" {
  vnet_cidr      = "10.210.0.0/16"
  gateway_subnet = "10.210.255.0/27"
  azure_asn      = 65020
}

workload_identity "capz" {}

worker_pool "t4" {
  vm_size     = "Standard_NC4as_T4_v3"
  replicas    = 1
  subnet_cidr = "10.210.1.0/24"
  # The release's RHCOS VHD (the `azure-disk` URL `xcsp preflight` prints from the cluster's
  # coreos-bootimages), imported into a storage account and a Compute Gallery of the stack, as the
  # OpenShift installer does. A gallery image version of your own: `image_id = "/subscriptions/..."`
  # (plan refuses one the subscription does not have).
  image { vhd = "https://rhcos.blob.core.windows.net/imagebucket/rhcos-422.94.202511041021-0-azure.x86_64.vhd" }
}
