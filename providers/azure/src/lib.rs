//! The Azure provider: network, identity and role resources through the azure_mgmt_* 0.21 clients.
