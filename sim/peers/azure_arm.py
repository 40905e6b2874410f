"""The Azure SDK for Python against the sim's Entra token endpoint and ARM emulator.

azure-identity's ClientSecretCredential (MSAL underneath: OpenID metadata, then the token
endpoint), azure-mgmt-resource and azure-mgmt-network through a TLS front (tls_front.py): a
resource group, a VNet with a GatewaySubnet, a public IP, a VPN gateway as the SDK's long-running
operation, a local network gateway, a connection, tags; and the ARM rule table's refusals as the
SDK parses them (HttpResponseError with ARM's error code).
"""

import os
import time

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.core.rest import HttpRequest

from harness import Suite, admin, raises, sim_url
import tls_front

FRONT, CA = tls_front.start(sim_url())
# requests (under azure-core and MSAL) trusts the front's self-signed certificate through this.
os.environ["REQUESTS_CA_BUNDLE"] = CA

from azure.identity import ClientSecretCredential  # noqa: E402
from azure.mgmt.network import NetworkManagementClient  # noqa: E402
from azure.mgmt.network import models as net  # noqa: E402
from azure.mgmt.resource.resources import ResourceManagementClient  # noqa: E402

SUB = "7e1a0000-0000-4000-8000-000000000001"
TENANT = "11111111-2222-3333-4444-555555555555"
RG = "xcsp-peers"
LOC = "eastus"
# azure-mgmt-network 28.0.0 sends 2024-03-01 itself. azure-mgmt-resource 26.0.0 defaults to
# 2025-04-01, which the sim does not serve (the known divergence below): it is told the version.
API = "2024-03-01"

suite = Suite("azure-arm")
cred = ClientSecretCredential(
    TENANT, "xcsp-peer-client", "peer-secret", authority=FRONT, disable_instance_discovery=True
)
resources = ResourceManagementClient(cred, SUB, base_url=FRONT, api_version=API)
network = NetworkManagementClient(cred, SUB, base_url=FRONT)
state = {}
NET = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Network"


def arm_error(status, code, fn, *args, **kwargs):
    """fn must fail with ARM's error shape, as the SDK parses it: (status, error.code); returns the message."""
    e = raises(HttpResponseError, fn, *args, **kwargs)
    assert e.status_code == status, f"expected {status} {code}, got {e.status_code}: {e.message}"
    assert e.error is not None and e.error.code == code, f"expected {code}, got {e.error and e.error.code}: {e}"
    assert e.error.message, "ARM's error carries a message"
    return e.error.message


def token():
    t = cred.get_token("https://management.azure.com/.default")
    assert t.token and t.expires_on > time.time() + 60, t
    record = admin("tokens")
    records = record if isinstance(record, list) else record.get("tokens", record.get("requests", []))
    mine = [r for r in records if r["client_id"] == "xcsp-peer-client"]
    assert mine and mine[-1]["tenant"] == TENANT and mine[-1]["grant"] == "client_secret", records
    assert mine[-1]["audience"] == "https://management.azure.com", mine[-1]



def sdk_default_api_version_is_refused():
    default = ResourceManagementClient(cred, SUB, base_url=FRONT)
    arm_error(400, "NoRegisteredProviderFound", default.resource_groups.get, RG)


def resource_group():
    rg = resources.resource_groups.create_or_update(RG, {"location": LOC, "tags": {"xcsp-stack": "peers"}})
    assert rg.name == RG and rg.location == LOC and rg.tags == {"xcsp-stack": "peers"}, rg
    assert rg.properties.provisioning_state == "Succeeded", rg
    assert resources.resource_groups.check_existence(RG) is True
    arm_error(409, "InvalidResourceGroupLocation", resources.resource_groups.create_or_update, RG,
              {"location": "westus"})


def tag_refusals():
    msg = arm_error(400, "InvalidTagNameCharacters", resources.resource_groups.create_or_update, RG,
                    {"location": LOC, "tags": {"team/owner": "x"}})
    assert "team/owner" in msg, msg
    arm_error(400, "InvalidTags", resources.resource_groups.create_or_update, RG,
              {"location": LOC, "tags": {f"t{i}": "v" for i in range(51)}})
    arm_error(400, "InvalidTagValueLength", resources.resource_groups.create_or_update, RG,
              {"location": LOC, "tags": {"long": "v" * 257}})
    assert resources.resource_groups.get(RG).tags == {"xcsp-stack": "peers"}, "refused writes change nothing"


def vnet():
    v = network.virtual_networks.begin_create_or_update(RG, "peers-vnet", net.VirtualNetwork(
        location=LOC,
        tags={"xcsp-stack": "peers"},
        address_space=net.AddressSpace(address_prefixes=["10.70.0.0/16"]),
        subnets=[
            net.Subnet(name="GatewaySubnet", address_prefix="10.70.255.0/27"),
            net.Subnet(name="workers", address_prefix="10.70.1.0/24"),
        ],
    )).result()
    assert v.provisioning_state == "Succeeded" and v.resource_guid, v
    assert sorted(s.name for s in v.subnets) == ["GatewaySubnet", "workers"], v.subnets
    assert v.id.lower() == f"{NET}/virtualNetworks/peers-vnet".lower(), v.id
    state["gw_subnet"] = next(s.id for s in v.subnets if s.name == "GatewaySubnet")
    sub = network.subnets.get(RG, "peers-vnet", "GatewaySubnet")
    assert sub.address_prefix == "10.70.255.0/27", sub


def subnet_refusals():
    arm_error(400, "NetcfgSubnetRangeOutsideVnet", network.subnets.begin_create_or_update, RG, "peers-vnet",
              "outside", net.Subnet(address_prefix="10.99.0.0/24"))
    arm_error(400, "NetcfgSubnetRangesOverlap", network.subnets.begin_create_or_update, RG, "peers-vnet",
              "overlap", net.Subnet(address_prefix="10.70.1.128/25"))


def public_ip():
    p = network.public_ip_addresses.begin_create_or_update(RG, "peers-gw-pip", net.PublicIPAddress(
        location=LOC, sku=net.PublicIPAddressSku(name="Standard"), public_ip_allocation_method="Static",
    )).result()
    assert p.provisioning_state == "Succeeded" and p.ip_address, p
    state["pip"] = p


def gateway_body(sku, pip_id):
    return net.VirtualNetworkGateway(
        location=LOC,
        tags={"xcsp-stack": "peers"},
        gateway_type="Vpn",
        vpn_type="RouteBased",
        sku=net.VirtualNetworkGatewaySku(name=sku, tier=sku),
        ip_configurations=[net.VirtualNetworkGatewayIPConfiguration(
            name="default",
            subnet=net.SubResource(id=state["gw_subnet"]),
            public_ip_address=net.SubResource(id=pip_id),
        )],
    )


def gateway():
    poller = network.virtual_network_gateways.begin_create_or_update(
        RG, "peers-vng", gateway_body("VpnGw1AZ", state["pip"].id))
    assert not poller.done(), "a gateway takes minutes (seconds in fast)"
    # A second write to the gateway while its create runs.
    msg = arm_error(409, "AnotherOperationInProgress", network.virtual_network_gateways.begin_update_tags,
                    RG, "peers-vng", net.TagsObject(tags={"x": "y"}))
    assert "peers-vng" in msg or "operations" in msg, msg
    g = poller.result()
    assert poller.status() == "Succeeded" and g.provisioning_state == "Succeeded", g
    assert g.sku.name == "VpnGw1AZ" and g.gateway_type == "Vpn" and g.vpn_type == "RouteBased", g
    assert g.ip_configurations[0].public_ip_address.id.lower() == state["pip"].id.lower(), g
    state["vng"] = g


def gateway_refusals():
    p2 = network.public_ip_addresses.begin_create_or_update(RG, "peers-pip2", net.PublicIPAddress(
        location=LOC, sku=net.PublicIPAddressSku(name="Standard"), public_ip_allocation_method="Static",
    )).result()
    # A public IP in use by the first gateway.
    arm_error(400, "PublicIPAddressInUse", network.virtual_network_gateways.begin_create_or_update,
              RG, "peers-vng2", gateway_body("VpnGw1AZ", state["pip"].id))
    # A non-AZ VpnGw1 (Azure blocks new ones since 2025-01-01).
    arm_error(400, "NonAzSkusNotAllowedForVPNGateway", network.virtual_network_gateways.begin_create_or_update,
              RG, "peers-vng2", gateway_body("VpnGw1", p2.id))
    network.public_ip_addresses.begin_delete(RG, "peers-pip2").result()


def local_gateway():
    lng = network.local_network_gateways.begin_create_or_update(RG, "peers-lng", net.LocalNetworkGateway(
        location=LOC,
        gateway_ip_address="203.0.113.10",
        local_network_address_space=net.AddressSpace(address_prefixes=["10.0.0.0/16"]),
        tags={"xcsp-stack": "peers"},
    )).result()
    assert lng.provisioning_state == "Succeeded" and lng.gateway_ip_address == "203.0.113.10", lng
    state["lng"] = lng


def connection():
    body = net.VirtualNetworkGatewayConnection(
        location=LOC,
        connection_type="IPsec",
        connection_protocol="IKEv2",
        shared_key="peer-shared-key-0123",
        virtual_network_gateway1=net.VirtualNetworkGateway(id=state["vng"].id),
        local_network_gateway2=net.LocalNetworkGateway(id=state["lng"].id),
        tags={"xcsp-stack": "peers"},
    )
    c = network.virtual_network_gateway_connections.begin_create_or_update(RG, "peers-conn", body).result()
    assert c.provisioning_state == "Succeeded" and c.connection_type == "IPsec", c
    assert c.shared_key is None, "GET does not return the shared key"
    key = network.virtual_network_gateway_connections.get_shared_key(RG, "peers-conn")
    assert key.value == "peer-shared-key-0123", key
    listed = list(network.virtual_network_gateways.list_connections(RG, "peers-vng"))
    assert [x.name for x in listed] == ["peers-conn"], listed


def ipsec_refusal():
    body = net.VirtualNetworkGatewayConnection(
        location=LOC,
        connection_type="IPsec",
        shared_key="k",
        virtual_network_gateway1=net.VirtualNetworkGateway(id=state["vng"].id),
        local_network_gateway2=net.LocalNetworkGateway(id=state["lng"].id),
        ipsec_policies=[net.IpsecPolicy(
            sa_life_time_seconds=200, sa_data_size_kilobytes=102400000, ipsec_encryption="AES256",
            ipsec_integrity="SHA256", ike_encryption="AES256", ike_integrity="SHA256", dh_group="DHGroup14",
            pfs_group="PFS14",
        )],
    )
    msg = arm_error(400, "InvalidRequestContent", network.virtual_network_gateway_connections.begin_create_or_update,
                    RG, "peers-conn-bad", body)
    assert "saLifeTimeSeconds" in msg, msg


def tags_on_resources():
    v = network.virtual_networks.update_tags(RG, "peers-vnet", net.TagsObject(tags={"xcsp-stack": "peers", "pool": "a"}))
    assert v.tags == {"xcsp-stack": "peers", "pool": "a"}, v.tags
    msg = arm_error(400, "InvalidTagNameCharacters", network.virtual_networks.update_tags, RG, "peers-vnet",
                    net.TagsObject(tags={"a/b": "c"}))
    assert "a/b" in msg, msg
    tagged = list(resources.resources.list_by_resource_group(RG, filter="tagName eq 'pool' and tagValue eq 'a'"))
    assert [r.name for r in tagged] == ["peers-vnet"], [r.name for r in tagged]


def in_use_deletes_are_refused():
    msg = arm_error(400, "VirtualNetworkGatewayCannotBeDeleted", network.virtual_network_gateways.begin_delete,
                    RG, "peers-vng")
    assert "peers-conn" in msg, msg
    arm_error(400, "InUseSubnetCannotBeDeleted", network.subnets.begin_delete, RG, "peers-vnet", "GatewaySubnet")


def unknown_and_read_only_properties_are_dropped():
    # Raw JSON through the SDK's own pipeline (its models never send either kind of property).
    body = {"location": LOC, "etag": "W/\"forged\"", "gpuCount": 4,
            "properties": {"provisioningState": "Failed", "resourceGuid": "forged", "bogus": {"a": 1},
                           "disableBgpRoutePropagation": True,
                           "routes": [{"name": "to-aws", "properties": {"addressPrefix": "10.0.0.0/16",
                                       "nextHopType": "VirtualNetworkGateway", "hasBgpOverride": True,
                                       "extra": "x"}}]}}
    r = network._send_request(HttpRequest("PUT", f"{NET}/routeTables/peers-rt?api-version={API}", json=body))
    assert r.status_code in (200, 201), (r.status_code, r.text())
    answered = r.json()
    for got in (answered, network._send_request(HttpRequest("GET", f"{NET}/routeTables/peers-rt?api-version={API}")).json()):
        assert "gpuCount" not in got and "bogus" not in got["properties"], got
        assert got["etag"] != 'W/"forged"' and got["properties"]["resourceGuid"] != "forged", got
        # The emulator's own state (the PUT is a long-running operation), never the forged one.
        assert got["properties"]["provisioningState"] in ("Updating", "Succeeded"), got
        assert got["properties"]["disableBgpRoutePropagation"] is True, got
        route = got["properties"]["routes"][0]["properties"]
        assert "extra" not in route and "hasBgpOverride" not in route, route
        assert route["addressPrefix"] == "10.0.0.0/16" and route["nextHopType"] == "VirtualNetworkGateway", route
    t = network.route_tables.get(RG, "peers-rt")
    assert t.routes[0].address_prefix == "10.0.0.0/16" and t.disable_bgp_route_propagation is True, t
    network.route_tables.begin_delete(RG, "peers-rt").result()


def teardown():
    network.virtual_network_gateway_connections.begin_delete(RG, "peers-conn").result()
    network.local_network_gateways.begin_delete(RG, "peers-lng").result()
    network.virtual_network_gateways.begin_delete(RG, "peers-vng").result()
    raises(ResourceNotFoundError, network.virtual_network_gateways.get, RG, "peers-vng")
    resources.resource_groups.begin_delete(RG).result()
    e = raises(ResourceNotFoundError, resources.resource_groups.get, RG)
    assert e.status_code == 404 and e.error.code == "ResourceGroupNotFound", e
    assert resources.resource_groups.check_existence(RG) is False
    left = admin("resources")
    left = left if isinstance(left, list) else left.get("resources", left.get("value", []))
    assert not left, left


suite.check("ClientSecretCredential gets a token through MSAL (OpenID metadata, token endpoint)", token)
suite.known_divergence("the SDK's default api-version (2025-04-01) is refused with NoRegisteredProviderFound",
                       "newer api-versions than 2024-03-01", sdk_default_api_version_is_refused)
suite.check("resource group: create, check_existence, another location is 409", resource_group)
suite.check("tag refusals on a resource group: '/', 51 tags, a 257-character value", tag_refusals)
suite.check("VNet with GatewaySubnet as an SDK LRO; subnet GET", vnet)
suite.check("subnet refusals: outside the VNet, overlapping", subnet_refusals)
suite.check("Standard static public IP as an LRO", public_ip)
suite.check("AZ VPN gateway as an SDK LRO; a second write meanwhile is 409", gateway)
suite.check("gateway refusals: a public IP in use, a non-AZ VpnGw1", gateway_refusals)
suite.check("local network gateway", local_gateway)
suite.check("connection: shared key write-only, get_shared_key, list_connections", connection)
suite.check("IPsec policy with saLifeTimeSeconds under 300 is InvalidRequestContent", ipsec_refusal)
suite.check("tags on a VNet: update_tags, '/' refused, tag-filtered generic list", tags_on_resources)
suite.check("deletes of a gateway with a connection and of a subnet in use are refused", in_use_deletes_are_refused)
suite.check("unknown and read-only properties of a PUT are neither stored nor answered", unknown_and_read_only_properties_are_dropped)
suite.check("teardown through the SDK's delete pollers; the store ends empty", teardown)
suite.finish()
