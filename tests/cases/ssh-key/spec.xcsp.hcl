cluster {
  infrastructure_name = "t-1"
  api_url             = "https://api.t:6443"
  oidc_issuer_url     = "https://issuer.t"
  machine_network     = "10.0.0.0/16"
  overlay_mtu         = 1300
  ssh_public_key      = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQCZmB/S905ZEn5EDLeuAp+LpxfDKUjBnKvDDfVtL9h8MYzLbASRKdo+YV+jAQ5MOg1a7/LxyjOdix80mj5GJHWo/bzUSwh0BmAlysic4VMwlikbGS+mHYHN6lHbyEIvVwhdtp+OxnZWZMD+DX30XKxsPlXUjd85Ja4kjlU9vDeeKw== short"
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
