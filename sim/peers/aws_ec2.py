"""boto3 against the sim's EC2 VPN fidelity layer (moto behind it for the VPC).

A virtual private gateway attached to a VPC, a customer gateway, a VPN connection with tunnel
options (waited for with boto3's own `vpn_connection_available` waiter), a tunnel modification,
the refusals of the README's AWS rule table as boto3's ClientError parses them, and the deletes.
"""

import botocore.config
import boto3
from botocore.exceptions import ClientError, WaiterError

from harness import Suite, raises, sim_url, wait_for

suite = Suite("aws-ec2")
ec2 = boto3.client(
    "ec2",
    endpoint_url=sim_url(),
    region_name="us-gov-west-1",
    aws_access_key_id="AKIDPEERCLIENTS",
    aws_secret_access_key="peer-secret",
    config=botocore.config.Config(retries={"mode": "standard", "max_attempts": 2}),
)
state = {}


def error_of(e):
    """(HTTP status, error code, message) of a ClientError, as botocore parsed EC2's XML."""
    return (
        e.response["ResponseMetadata"]["HTTPStatusCode"],
        e.response["Error"]["Code"],
        e.response["Error"].get("Message", ""),
    )


def refused(code, fn, **kwargs):
    e = raises(ClientError, fn, **kwargs)
    status, got, message = error_of(e)
    assert (status, got) == (400, code), f"expected 400 {code}, got {status} {got}: {message}"
    assert message, "an EC2 error carries a message"
    return message


def vpc():
    v = ec2.create_vpc(CidrBlock="10.60.0.0/16")["Vpc"]
    assert v["VpcId"].startswith("vpc-")
    state["vpc"] = v["VpcId"]


def vpn_gateway():
    g = ec2.create_vpn_gateway(
        Type="ipsec.1",
        AmazonSideAsn=64512,
        TagSpecifications=[{"ResourceType": "vpn-gateway", "Tags": [{"Key": "xcsp-stack", "Value": "peers"}]}],
    )["VpnGateway"]
    assert g["VpnGatewayId"].startswith("vgw-"), g
    assert g["Type"] == "ipsec.1" and g["AmazonSideAsn"] == 64512, g
    assert g["State"] in ("pending", "available"), g
    assert {"Key": "xcsp-stack", "Value": "peers"} in g.get("Tags", []), g
    state["vgw"] = g["VpnGatewayId"]

    def available():
        gs = ec2.describe_vpn_gateways(VpnGatewayIds=[state["vgw"]])["VpnGateways"]
        return gs and gs[0]["State"] == "available"

    wait_for("the VPN gateway to be available", available)
    by_tag = ec2.describe_vpn_gateways(Filters=[{"Name": "tag:xcsp-stack", "Values": ["peers"]}])["VpnGateways"]
    assert [g["VpnGatewayId"] for g in by_tag] == [state["vgw"]], by_tag


def attach():
    a = ec2.attach_vpn_gateway(VpcId=state["vpc"], VpnGatewayId=state["vgw"])["VpcAttachment"]
    assert a["VpcId"] == state["vpc"] and a["State"] in ("attaching", "attached"), a

    def attached():
        g = ec2.describe_vpn_gateways(VpnGatewayIds=[state["vgw"]])["VpnGateways"][0]
        return any(x["State"] == "attached" for x in g.get("VpcAttachments", []))

    wait_for("the attachment", attached)
    found = ec2.describe_vpn_gateways(Filters=[{"Name": "attachment.vpc-id", "Values": [state["vpc"]]}])
    assert [g["VpnGatewayId"] for g in found["VpnGateways"]] == [state["vgw"]], found


def customer_gateway():
    args = dict(Type="ipsec.1", IpAddress="198.51.100.20", BgpAsn=65010, DeviceName="azure-vng")
    c = ec2.create_customer_gateway(**args)["CustomerGateway"]
    assert c["CustomerGatewayId"].startswith("cgw-"), c
    # EC2 models BgpAsn as a string.
    assert c["BgpAsn"] == "65010" and c["IpAddress"] == "198.51.100.20" and c["Type"] == "ipsec.1", c
    state["cgw"] = c["CustomerGatewayId"]
    again = ec2.create_customer_gateway(**args)["CustomerGateway"]
    assert again["CustomerGatewayId"] == state["cgw"], "an identical create returns the existing gateway"


def customer_gateway_refusals():
    refused("InvalidParameterCombination", ec2.create_customer_gateway, Type="ipsec.1",
            IpAddress="198.51.100.21", BgpAsn=65011, BgpAsnExtended=4200000000)
    refused("InvalidParameterValue", ec2.create_customer_gateway, Type="ipsec.1",
            IpAddress="198.51.100.21", BgpAsnExtended=100)


def tunnel(cidr, psk, **extra):
    t = {
        "TunnelInsideCidr": cidr,
        "PreSharedKey": psk,
        "IKEVersions": [{"Value": "ikev2"}],
        "Phase1EncryptionAlgorithms": [{"Value": "AES256"}],
        "Phase1IntegrityAlgorithms": [{"Value": "SHA2-256"}],
        "Phase1DHGroupNumbers": [{"Value": 14}],
        "Phase2EncryptionAlgorithms": [{"Value": "AES256"}],
        "Phase2IntegrityAlgorithms": [{"Value": "SHA2-256"}],
        "Phase2DHGroupNumbers": [{"Value": 14}],
        "Phase1LifetimeSeconds": 28800,
        "Phase2LifetimeSeconds": 3600,
        "DPDTimeoutSeconds": 40,
        "DPDTimeoutAction": "restart",
        "StartupAction": "start",
    }
    t.update(extra)
    return t


def vpn_connection():
    tunnels = [tunnel("169.254.21.0/30", "peer_psk_one_0123"), tunnel("169.254.21.4/30", "peer_psk_two_4567")]
    c = ec2.create_vpn_connection(
        Type="ipsec.1",
        CustomerGatewayId=state["cgw"],
        VpnGatewayId=state["vgw"],
        Options={"StaticRoutesOnly": False, "TunnelOptions": tunnels},
    )["VpnConnection"]
    assert c["VpnConnectionId"].startswith("vpn-") and c["State"] == "pending", c
    assert c["CustomerGatewayId"] == state["cgw"] and c["VpnGatewayId"] == state["vgw"], c
    assert c["CustomerGatewayConfiguration"].startswith("<"), "the configuration document is XML text"
    opts = c["Options"]["TunnelOptions"]
    assert [t["TunnelInsideCidr"] for t in opts] == ["169.254.21.0/30", "169.254.21.4/30"], opts
    assert [t["PreSharedKey"] for t in opts] == ["peer_psk_one_0123", "peer_psk_two_4567"], opts
    t0 = opts[0]
    assert t0["Phase1EncryptionAlgorithms"] == [{"Value": "AES256"}], t0
    assert t0["Phase1DHGroupNumbers"] == [{"Value": 14}], t0
    assert t0["IkeVersions"] == [{"Value": "ikev2"}], t0
    assert t0["DpdTimeoutAction"] == "restart" and t0["DpdTimeoutSeconds"] == 40, t0
    outside = [t["OutsideIpAddress"] for t in opts]
    assert len(set(outside)) == 2, outside
    state["vpn"] = c["VpnConnectionId"]
    state["outside"] = outside


def waiter_sees_it_available():
    ec2.get_waiter("vpn_connection_available").wait(
        VpnConnectionIds=[state["vpn"]], WaiterConfig={"Delay": 1, "MaxAttempts": 60}
    )
    c = ec2.describe_vpn_connections(
        Filters=[{"Name": "customer-gateway-id", "Values": [state["cgw"]]}, {"Name": "state", "Values": ["available"]}]
    )["VpnConnections"]
    assert [x["VpnConnectionId"] for x in c] == [state["vpn"]], c
    telemetry = c[0]["VgwTelemetry"]
    assert sorted(t["OutsideIpAddress"] for t in telemetry) == sorted(state["outside"]), telemetry
    assert all(t["Status"] in ("UP", "DOWN") for t in telemetry), telemetry


def tunnel_refusals():
    msg = refused("InvalidParameterValue", ec2.create_vpn_connection, Type="ipsec.1",
                  CustomerGatewayId=state["cgw"], VpnGatewayId=state["vgw"],
                  Options={"TunnelOptions": [{"Phase1LifetimeSeconds": 899}, {}]})
    assert "Phase1LifetimeSeconds" in msg, msg
    # Inside CIDRs: not a /30, a reserved /30, and one the gateway already uses.
    for cidr in ["169.254.30.0/29", "169.254.169.252/30", "169.254.21.0/30"]:
        refused("InvalidParameterValue", ec2.create_vpn_connection, Type="ipsec.1",
                CustomerGatewayId=state["cgw"], VpnGatewayId=state["vgw"],
                Options={"TunnelOptions": [{"TunnelInsideCidr": cidr}, {}]})
    msg = refused("InvalidParameterValue", ec2.create_vpn_connection, Type="ipsec.1",
                  CustomerGatewayId=state["cgw"], VpnGatewayId=state["vgw"],
                  Options={"TunnelOptions": [{"Phase1LifetimeSeconds": 28800, "Phase2LifetimeSeconds": 3600,
                                              "RekeyMarginTimeSeconds": 2000}, {}]})
    assert "RekeyMarginTimeSeconds" in msg, msg
    listed = ec2.describe_vpn_connections(Filters=[{"Name": "vpn-gateway-id", "Values": [state["vgw"]]}])
    assert len(listed["VpnConnections"]) == 1, "refused creates leave nothing behind"


def modify_tunnel():
    c = ec2.modify_vpn_tunnel_options(
        VpnConnectionId=state["vpn"],
        VpnTunnelOutsideIpAddress=state["outside"][0],
        TunnelOptions={"TunnelInsideCidr": "169.254.22.0/30", "Phase1LifetimeSeconds": 14400},
    )["VpnConnection"]
    assert c["VpnConnectionId"] == state["vpn"] and c["State"] == "modifying", c
    msg = refused("IncorrectState", ec2.modify_vpn_tunnel_options, VpnConnectionId=state["vpn"],
                  VpnTunnelOutsideIpAddress=state["outside"][1], TunnelOptions={"DPDTimeoutSeconds": 60})
    assert state["vpn"] in msg, msg
    ec2.get_waiter("vpn_connection_available").wait(
        VpnConnectionIds=[state["vpn"]], WaiterConfig={"Delay": 1, "MaxAttempts": 60}
    )
    t = ec2.describe_vpn_connections(VpnConnectionIds=[state["vpn"]])["VpnConnections"][0]["Options"]["TunnelOptions"]
    first = next(x for x in t if x["OutsideIpAddress"] == state["outside"][0])
    assert first["TunnelInsideCidr"] == "169.254.22.0/30" and first["Phase1LifetimeSeconds"] == 14400, first
    refused("InvalidParameterValue", ec2.modify_vpn_tunnel_options, VpnConnectionId=state["vpn"],
            VpnTunnelOutsideIpAddress=state["outside"][1], TunnelOptions={"ReplayWindowSize": 4096})


def deletes_in_use_are_refused():
    msg = refused("IncorrectState", ec2.delete_customer_gateway, CustomerGatewayId=state["cgw"])
    assert state["cgw"] in msg, msg
    refused("IncorrectState", ec2.delete_vpn_gateway, VpnGatewayId=state["vgw"])


def dry_runs():
    before = len(ec2.describe_vpn_gateways()["VpnGateways"])
    for fn, kwargs in [
        (ec2.create_vpn_gateway, {"Type": "ipsec.1"}),
        (ec2.delete_vpn_connection, {"VpnConnectionId": state["vpn"]}),
        (ec2.describe_vpn_connections, {}),
    ]:
        e = raises(ClientError, fn, DryRun=True, **kwargs)
        status, code, message = error_of(e)
        assert (status, code) == (412, "DryRunOperation"), (status, code, message)
        assert message == "Request would have succeeded, but DryRun flag is set.", message
    assert len(ec2.describe_vpn_gateways()["VpnGateways"]) == before, "a dry run creates nothing"
    c = ec2.describe_vpn_connections(VpnConnectionIds=[state["vpn"]])["VpnConnections"][0]
    assert c["State"] == "available", "a dry run deletes nothing"


def moto_ignores_dry_run_on_create_vpc():
    v = ec2.create_vpc(CidrBlock="10.61.0.0/16", DryRun=True)["Vpc"]
    ec2.delete_vpc(VpcId=v["VpcId"])


def unknown_ids():
    e = raises(ClientError, ec2.describe_vpn_connections, VpnConnectionIds=["vpn-0123456789abcdef0"])
    status, code, _ = error_of(e)
    assert (status, code) == (400, "InvalidVpnConnectionID.NotFound"), (status, code)


def teardown():
    ec2.delete_vpn_connection(VpnConnectionId=state["vpn"])
    ec2.get_waiter("vpn_connection_deleted").wait(
        VpnConnectionIds=[state["vpn"]], WaiterConfig={"Delay": 1, "MaxAttempts": 60}
    )
    ec2.detach_vpn_gateway(VpcId=state["vpc"], VpnGatewayId=state["vgw"])

    def detached():
        g = ec2.describe_vpn_gateways(VpnGatewayIds=[state["vgw"]])["VpnGateways"][0]
        return all(a["State"] == "detached" for a in g.get("VpcAttachments", []))

    wait_for("the detachment", detached)
    ec2.delete_vpn_gateway(VpnGatewayId=state["vgw"])
    ec2.delete_customer_gateway(CustomerGatewayId=state["cgw"])
    g = ec2.describe_vpn_gateways(VpnGatewayIds=[state["vgw"]])["VpnGateways"]
    assert not g or g[0]["State"] in ("deleting", "deleted"), g
    c = ec2.describe_customer_gateways(CustomerGatewayIds=[state["cgw"]])["CustomerGateways"]
    assert not c or c[0]["State"] in ("deleting", "deleted"), c
    ec2.delete_vpc(VpcId=state["vpc"])


def waiter_on_a_failed_state():
    # boto3's waiter gives up when a connection it waits for is deleted: the layer's states are
    # the ones the waiter's acceptors name.
    e = raises(WaiterError, ec2.get_waiter("vpn_connection_available").wait,
               VpnConnectionIds=[state["vpn"]], WaiterConfig={"Delay": 1, "MaxAttempts": 5})
    assert "terminal failure state" in str(e) or "Max attempts" in str(e), e


suite.check("CreateVpc (moto, behind the layer)", vpc)
suite.check("CreateVpnGateway with an Amazon-side ASN and tags; describe by id and tag filter", vpn_gateway)
suite.check("AttachVpnGateway: attaching then attached; filter attachment.vpc-id", attach)
suite.check("CreateCustomerGateway: shape, BgpAsn as a string, an identical create returns it", customer_gateway)
suite.check("CreateCustomerGateway refusals: both ASNs, an extended ASN out of range", customer_gateway_refusals)
suite.check("CreateVpnConnection with tunnel options: shape boto3 parses", vpn_connection)
suite.check("boto3's vpn_connection_available waiter; filters; VgwTelemetry", waiter_sees_it_available)
suite.check("tunnel option refusals: lifetime, inside CIDRs, rekey margin", tunnel_refusals)
suite.check("ModifyVpnTunnelOptions: modifying, a second one refused, applied after", modify_tunnel)
suite.check("deletes of gateways in use are refused with IncorrectState", deletes_in_use_are_refused)
suite.check("DryRun on the layer's actions: 412 DryRunOperation, nothing applied", dry_runs)
suite.known_divergence("CreateVpc with DryRun creates the VPC", "moto ignores DryRun on CreateVpc",
                       moto_ignores_dry_run_on_create_vpc)
suite.check("an unknown VPN connection id is InvalidVpnConnectionID.NotFound", unknown_ids)
suite.check("teardown: boto3's vpn_connection_deleted waiter, detach, deletes", teardown)
suite.check("boto3's available waiter stops on a deleted connection", waiter_on_a_failed_state)
suite.finish()
