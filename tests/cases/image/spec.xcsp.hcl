cluster {
  infrastructure_name = "t-1"
  api_url             = "https://api.t:6443"
  oidc_issuer_url     = "https://issuer.t"
  machine_network     = "10.0.0.0/16"
  overlay_mtu         = 1300
  ssh_public_key      = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCZhwckwnUyPZGO6ULFYAiyb0pshuGkZ/Fr+TE8XdlKZsB8/XF/mGUzL12b4DgcPVwisJaCUsNSX0yW+YisIjIvQivdIvs3o4/yoTLNDswcDE2LJH9Gvq16GawOtk6vuguTcDrypHzLFhQp5W+ynE3RCtZo4rIaTc1yONVAv0dkyvk5Kcjxhd+bgAJFvH5l3X8zopaXP/GdxH8XNrHKZQZEJtQx/mPgPxDpTolRHnJpDiYmBo0eHfOG8iuMl50RBJy568uv/1oNdTRxLYRGeEnvLVMN+Txo8rVUgxNcJkVnuTucCveaICF+Hyb/wmC0Kr8g7rZhlM/QNdVN581d9Qb1 xcsp-example"
}
aws { region = "us-east-1" }
azure {
  subscription_id = "11111111-2222-3333-4444-555555555555"
  tenant_id       = "66666666-7777-8888-9999-000000000000"
  location        = "eastus"
  resource_group  = "rg"
}
network "link" {
  vnet_cidr      = "10.200.0.0/16"
  gateway_subnet = "10.200.255.0/27"
}
workload_identity "capz" {}
worker_pool "both" {
  vm_size     = "Standard_ND96asr_v4"
  subnet_cidr = "10.200.1.0/24"
  image {
    publisher = "azureopenshift"
    vhd       = "https://rhcos.blob.core.windows.net/imagebucket/rhcos-422.94.202511041021-0-azure.x86_64.vhd"
  }
}
worker_pool "partial" {
  vm_size     = "Standard_ND96asr_v4"
  subnet_cidr = "10.200.2.0/24"
  image {
    publisher = "azureopenshift"
    offer     = "aro4"
  }
}
worker_pool "notrhcos" {
  vm_size     = "Standard_ND96asr_v4"
  subnet_cidr = "10.200.3.0/24"
  image {
    vhd = "https://example.com/images/ubuntu-22.04.vhd"
  }
}
worker_pool "plainhttp" {
  vm_size     = "Standard_ND96asr_v4"
  subnet_cidr = "10.200.4.0/24"
  image {
    vhd = "http://rhcos.blob.core.windows.net/imagebucket/rhcos-422.94.202511041021-0-azure.x86_64.vhd"
  }
}
