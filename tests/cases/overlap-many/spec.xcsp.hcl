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
worker_pool "p0" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p1" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p2" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p3" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p4" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p5" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p6" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p7" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p8" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p9" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p10" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p11" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p12" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p13" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p14" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p15" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p16" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p17" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p18" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p19" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p20" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p21" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p22" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p23" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
worker_pool "p24" {
  vm_size     = "Standard_D4s_v5"
  subnet_cidr = "10.200.1.0/24"
  image_id    = "x"
}
