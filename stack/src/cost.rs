//! The monthly cost of a plan: what each change adds or takes away, and what the stack costs
//! once it is applied, from the price table `prices/prices.json` (list prices, each with its
//! source and date). A resource whose price the table lacks is unknown, and says what it would
//! need; nothing is guessed. Money is counted in cents.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use xcsp_core::provider::Attributes;
use xcsp_core::{Address, ResourceType};
use xcsp_plans::plan::{Action, Plan};
use xcsp_plans::{Model, ResourceGraph};

const TABLE: &str = include_str!("../../prices/prices.json");

#[derive(Debug, Deserialize)]
struct Table {
    currency: String,
    hours_per_month: u32,
    read: String,
    sources: BTreeMap<String, Source>,
    free: Vec<Free>,
    disk_tiers: BTreeMap<String, serde_json::Value>,
    prices: Vec<Price>,
}

#[derive(Debug, Deserialize)]
struct Free {
    types: Vec<String>,
}

/// Where figures come from: a repository and the date of the commit read.
#[derive(Debug, Deserialize)]
struct Source {
    repo: Option<String>,
    date: String,
}

#[derive(Debug, Deserialize)]
struct Price {
    item: String,
    region: String,
    monthly: f64,
    source: String,
    /// The date of the snapshot this figure was read from, where the source holds many.
    #[serde(default)]
    seen: Option<String>,
}

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| {
        serde_json::from_str(TABLE).expect("prices/prices.json is the table's shape (a unit test reads it)")
    })
}

/// One resource's monthly cost.
#[derive(Debug, Clone, PartialEq)]
enum Cost {
    /// No charge of its own.
    Free,
    /// Cents a month, what was priced ("VpnGw1 in eastus"), where each figure comes from, and
    /// what of it has no price (the cents then a lower bound).
    Known { cents: i64, what: String, sources: Vec<String>, unpriced: Option<String> },
    /// What the table would need.
    Unknown(String),
}

impl Cost {
    fn cents(&self) -> Option<i64> {
        match self {
            Cost::Free => Some(0),
            Cost::Known { cents, .. } => Some(*cents),
            Cost::Unknown(_) => None,
        }
    }

    /// Priced in part: the cents are a lower bound.
    fn partial(&self) -> bool {
        matches!(self, Cost::Known { unpriced: Some(_), .. })
    }
}

/// What a plan costs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    pub currency: String,
    pub hours_per_month: u32,
    /// The date the table's figures were read.
    pub prices_read: String,
    /// The changes that move the monthly cost, or whose cost is unknown.
    pub items: Vec<Item>,
    /// Changes that do not move the cost: resources at no charge of their own, updates that
    /// leave the price as it was.
    pub free: usize,
    /// The change a month, of the known parts (cents).
    pub delta_cents: i64,
    /// The stack a month once applied, of the known parts (cents).
    pub total_after_cents: i64,
    /// Resources of the applied stack whose price is unknown.
    pub unknown_after: usize,
    /// Resources of the applied stack priced in part (a GPU VM whose disk has no price): the
    /// total is then a lower bound too.
    pub partial_after: usize,
    /// With `kubernetes_objects = "render"`: the machines of the MachineSets the run leaves out,
    /// which cost once someone applies the rendered objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rendered_machines: Option<Rendered>,
}

/// The machines of the rendered MachineSets: cents a month of the priced ones, and how many
/// MachineSets have no known price.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rendered {
    pub cents: i64,
    pub unknown: usize,
}

/// The machines of the MachineSets in `full` that `run` leaves out, priced from the spec's
/// templates; `None` when the run leaves none out.
pub fn rendered_machines(model: &Model, full: &ResourceGraph, run: &ResourceGraph) -> Option<Rendered> {
    let templates: BTreeMap<String, &Attributes> = full
        .nodes()
        .filter(|n| n.address.rtype == ResourceType::K8sAzureMachineTemplate)
        .filter_map(|n| Some((n.attributes.get("name")?.as_str()?.to_string(), &n.attributes)))
        .collect();
    let left_out: Vec<_> = full
        .nodes()
        .filter(|n| n.address.rtype == ResourceType::K8sMachineSet && run.get(&n.address).is_none())
        .map(|n| machines(&n.attributes, &model.azure.location.value, |name| templates.get(name).copied()))
        .collect();
    if left_out.is_empty() {
        return None;
    }
    let cents = left_out.iter().filter_map(Cost::cents).sum();
    let unknown = left_out.iter().filter(|c| c.cents().is_none()).count();
    Some(Rendered { cents, unknown })
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    pub address: String,
    pub action: Action,
    /// Cents a month before and after; `None` when unknown.
    pub before_cents: Option<i64>,
    pub after_cents: Option<i64>,
    /// What was priced, or what is missing for a price.
    pub what: String,
    /// Where each figure comes from: the source's repository and the date read (`seen` for a
    /// snapshot).
    pub sources: Vec<String>,
    /// Priced in part: `what` names the rest, and the cents are a lower bound.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub at_least: bool,
}

impl Item {
    /// The change a month (cents), `None` when a side is unknown.
    pub fn delta(&self) -> Option<i64> {
        let before = if self.action == Action::Create { Some(0) } else { self.before_cents };
        let after = if self.action == Action::Delete { Some(0) } else { self.after_cents };
        Some(after? - before?)
    }
}

/// What a run's plan costs: the plan over `run` (the graph the run takes), and apart the
/// machines of the spec's MachineSets the run leaves out.
pub fn of_run(l: &xcsp_plans::Loaded, plan: &Plan, run: &ResourceGraph) -> Estimate {
    let mut e = estimate(&l.model, plan);
    e.rendered_machines = rendered_machines(&l.model, &l.graph, run);
    e
}

/// The cost of `plan` for the stack `model` describes.
pub fn estimate(model: &Model, plan: &Plan) -> Estimate {
    let t = table();
    // Templates by name, so that a MachineSet is priced by the template it names.
    let mut templates: BTreeMap<(bool, String), &Attributes> = BTreeMap::new();
    for c in plan.changes.iter().filter(|c| c.address.rtype == ResourceType::K8sAzureMachineTemplate) {
        for (after, attrs) in [(false, &c.before), (true, &c.after)] {
            if let Some(a) = attrs
                && let Some(name) = a.get("name").and_then(|v| v.as_str())
            {
                templates.insert((after, name.to_string()), a);
            }
        }
    }
    let price = |address: &Address, attrs: &Attributes, after: bool| {
        cost(model, address.rtype, attrs, |name| templates.get(&(after, name.to_string())).copied())
    };
    let mut items = Vec::new();
    let mut free = 0;
    let (mut total_after, mut unknown_after, mut partial_after) = (0, 0, 0);
    for c in &plan.changes {
        let after = c.after.as_ref().filter(|_| c.action != Action::Delete).map(|a| price(&c.address, a, true));
        match after.as_ref().map(Cost::cents) {
            Some(Some(cents)) => total_after += cents,
            Some(None) => unknown_after += 1,
            None => {}
        }
        partial_after += usize::from(after.as_ref().is_some_and(Cost::partial));
        if c.action == Action::NoOp {
            continue;
        }
        let before = c.before.as_ref().filter(|_| c.action != Action::Create).map(|a| price(&c.address, a, false));
        let shown = if c.action == Action::Delete { before.clone() } else { after.clone() };
        let at_least = shown.as_ref().is_some_and(Cost::partial);
        let (what, sources) = match shown.unwrap_or(Cost::Free) {
            Cost::Free => (String::new(), vec![]),
            Cost::Known { what, sources, unpriced: None, .. } => (what, sources),
            Cost::Known { what, sources, unpriced: Some(rest), .. } => (format!("{what}; {rest}"), sources),
            Cost::Unknown(why) => (why, vec![]),
        };
        let item = Item {
            address: c.address.to_string(),
            action: c.action,
            before_cents: before.as_ref().and_then(Cost::cents),
            after_cents: after.as_ref().and_then(Cost::cents),
            what,
            sources,
            at_least,
        };
        // A change that does not move the cost is counted, not listed.
        if item.what.is_empty() || (c.action == Action::Update && item.delta() == Some(0)) {
            free += 1;
            continue;
        }
        items.push(item);
    }
    let delta_cents = items.iter().filter_map(Item::delta).sum();
    Estimate {
        currency: t.currency.clone(),
        hours_per_month: t.hours_per_month,
        prices_read: t.read.clone(),
        items,
        free,
        delta_cents,
        total_after_cents: total_after,
        unknown_after,
        partial_after,
        rendered_machines: None,
    }
}

/// One resource's monthly cost from its attributes; `template` finds an AzureMachineTemplate by name.
fn cost<'a>(
    model: &Model,
    rtype: ResourceType,
    attrs: &Attributes,
    template: impl Fn(&str) -> Option<&'a Attributes>,
) -> Cost {
    let t = table();
    let name = rtype.as_str();
    let free = t.free.iter().flat_map(|f| &f.types).any(|ty| match ty.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => ty == name,
    });
    let text = |k: &str| attrs.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_string();
    let aws = model.aws.region.value.as_str();
    let azure = model.azure.location.value.as_str();
    match rtype {
        ResourceType::K8sMachineSet => machines(attrs, azure, template),
        _ if free => Cost::Free,
        ResourceType::AwsVpnConnection => lookup("aws_vpn_connection", aws, "a VPN connection"),
        ResourceType::AwsResolverEndpoint => {
            // Billed per address (an ENI each); the queries' charge is per use, not in the table.
            let ips = attrs.get("subnet_ids").and_then(|v| v.as_list()).map_or(2, <[_]>::len);
            lookup(
                &format!("aws_route53_resolver_endpoint/{ips}"),
                aws,
                &format!("a Resolver endpoint with {ips} addresses"),
            )
        }
        ResourceType::AzureVpnGateway => {
            let sku = text("sku");
            lookup(&format!("azure_vpn_gateway/{sku}"), azure, &format!("a {sku} VPN gateway"))
        }
        ResourceType::AzureVpnConnection => lookup("azure_vpn_connection", azure, "a site-to-site connection"),
        ResourceType::AzurePublicIp => {
            let (sku, allocation) = (text("sku"), text("allocation"));
            lookup(&format!("azure_public_ip/{sku}/{allocation}"), azure, &format!("a {sku} {allocation} public IP"))
        }
        ResourceType::AzureNatGateway => {
            // The hourly resource; the data it processes is charged per GB, by use, not in the table.
            let sku = text("sku");
            lookup(&format!("azure_nat_gateway/{sku}"), azure, &format!("a {sku} NAT gateway"))
        }
        other => Cost::Unknown(format!("no price for {} in the table", other.as_str())),
    }
}

/// A MachineSet's machines: replicas times the VM size and the OS disk of its template.
fn machines<'a>(attrs: &Attributes, location: &str, template: impl Fn(&str) -> Option<&'a Attributes>) -> Cost {
    let replicas = attrs.get("replicas").and_then(|v| v.as_i64()).unwrap_or(0);
    let name = attrs.get("infrastructure_template").and_then(|v| v.as_str()).unwrap_or_default();
    let Some(tpl) = template(name) else {
        return Cost::Unknown(format!("its machine template {name} is not in the plan"));
    };
    let size = tpl.get("vm_size").and_then(|v| v.as_str()).unwrap_or_default();
    let disk_type = tpl.get("os_disk_type").and_then(|v| v.as_str()).unwrap_or_default();
    let disk_gb = tpl.get("os_disk_size_gb").and_then(|v| v.as_i64()).unwrap_or(0);
    let vm = lookup(&format!("azure_vm/{size}"), location, &format!("a {size} VM"));
    let disk = match tier(disk_type, disk_gb) {
        Some(tier) => {
            lookup(&format!("azure_disk/{disk_type}/{tier}"), location, &format!("a {disk_type} {tier} OS disk"))
        }
        None => Cost::Unknown(format!("no {disk_type} tier of {disk_gb} GiB in the table")),
    };
    // The VM is nearly all of a GPU machine's price: with it known and the disk not, the machine
    // is priced in part (a lower bound); without the VM's price it is unknown.
    match (vm, disk) {
        (Cost::Known { cents: v, sources: mut s, .. }, Cost::Known { cents: d, sources: ds, .. }) => {
            for x in ds {
                if !s.contains(&x) {
                    s.push(x);
                }
            }
            Cost::Known {
                cents: replicas * (v + d),
                what: format!("{replicas} × {size} VM and {disk_type} {disk_gb} GiB OS disk in {location}"),
                sources: s,
                unpriced: None,
            }
        }
        (Cost::Known { cents: v, sources, .. }, Cost::Unknown(why)) => Cost::Known {
            cents: replicas * v,
            what: format!("{replicas} × {size} VM in {location}"),
            sources,
            unpriced: Some(format!("its {disk_type} {disk_gb} GiB OS disk: {why}")),
        },
        (Cost::Unknown(why), _) => Cost::Unknown(why),
        _ => Cost::Free,
    }
}

/// Where a figure comes from, for a person: the source's repository, and the date of the snapshot
/// the figure was seen in or of the commit read.
fn source_text(t: &Table, p: &Price) -> String {
    let s = t.sources.get(&p.source);
    let from = s.and_then(|s| s.repo.clone()).unwrap_or_else(|| p.source.clone());
    match (&p.seen, s) {
        (Some(seen), _) => format!("{from}, seen {seen}"),
        (None, Some(s)) => format!("{from}, {}", s.date),
        (None, None) => from,
    }
}

/// The disk tier that holds `gb` (disks are billed by the smallest tier at least their size).
fn tier(disk_type: &str, gb: i64) -> Option<String> {
    let tiers = table().disk_tiers.get(disk_type)?.as_array()?;
    tiers
        .iter()
        .filter_map(|t| Some((t.get(0)?.as_str()?, t.get(1)?.as_i64()?)))
        .find(|(_, size)| *size >= gb)
        .map(|(name, _)| name.to_string())
}

fn lookup(item: &str, region: &str, what: &str) -> Cost {
    let t = table();
    match t.prices.iter().find(|p| p.item == item && p.region == region) {
        Some(p) => Cost::Known {
            cents: (p.monthly * 100.0).round() as i64,
            what: format!("{what} in {region}"),
            sources: vec![source_text(t, p)],
            unpriced: None,
        },
        None => Cost::Unknown(format!("no price for {what} in {region}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(dir: &str, edit: impl Fn(String) -> String) -> xcsp_plans::Loaded {
        let tmp = tempfile::tempdir().unwrap();
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples").join(dir);
        for f in std::fs::read_dir(&src).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "hcl") {
                std::fs::write(tmp.path().join(f.file_name().unwrap()), edit(std::fs::read_to_string(&f).unwrap()))
                    .unwrap();
            }
        }
        xcsp_plans::load(tmp.path(), &Default::default()).unwrap_or_else(|_| panic!("the spec loads"))
    }

    fn plan_of(l: &xcsp_plans::Loaded) -> Plan {
        xcsp_plans::plan::diff(&l.model.stack, &l.model.digest, &l.graph, &BTreeMap::new())
    }

    #[test]
    fn the_table_reads_and_every_price_names_a_source_it_has() {
        let raw: serde_json::Value = serde_json::from_str(TABLE).unwrap();
        let t = table();
        assert!(!t.prices.is_empty());
        for p in &t.prices {
            assert!(raw["sources"].get(&p.source).is_some(), "{} names no source", p.item);
            assert!(p.monthly > 0.0, "{}", p.item);
        }
        for (key, s) in raw["sources"].as_object().unwrap() {
            assert!(s["date"].is_string(), "{key} has a date");
        }
    }

    /// The public example with a VpnGw1AZ gateway and an NC8as_T4_v3 pool: every part priced
    /// but the pool's NAT gateway, which the table prices in West Europe only.
    /// 2 VPN connections 2 × 36.50 = 73.00; the gateway 153.30; its 2 public IPs and the NAT
    /// gateway's 3 × 3.65 = 10.95; 4 site-to-site connections 4 × 10.95 = 43.80; 1 machine, 548.96
    /// + a 128 GiB P10 disk 19.71 = 568.67; the Route 53 Resolver endpoint with 2 addresses
    /// 182.50. Total 1,032.22 and the NAT gateway unknown.
    #[test]
    fn a_plan_of_the_public_example_adds_up() {
        let l = loaded("public", |s| {
            s.replace("azure_asn      = 65020", "azure_asn      = 65020\n  gateway_sku    = \"VpnGw1AZ\"")
                .replace("Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3")
        });
        let e = estimate(&l.model, &plan_of(&l));
        let cents = |addr_prefix: &str| -> Vec<Option<i64>> {
            e.items.iter().filter(|i| i.address.starts_with(addr_prefix)).map(Item::delta).collect()
        };
        assert_eq!(cents("aws_vpn_connection."), [Some(3650), Some(3650)], "{e:#?}");
        assert_eq!(cents("azure_virtual_network_gateway."), [Some(15330)]);
        assert_eq!(cents("azure_public_ip."), [Some(365), Some(365), Some(365)]);
        assert_eq!(cents("azure_nat_gateway."), [None]);
        assert_eq!(cents("azure_virtual_network_gateway_connection."), [Some(1095); 4]);
        assert_eq!(cents("k8s_machine_set."), [Some(56867)]);
        assert_eq!(cents("aws_route53_resolver_endpoint."), [Some(18250)]);
        assert_eq!(e.delta_cents, 103222);
        assert_eq!(e.total_after_cents, 103222);
        // The NAT gateway, and the five resources importing the release's VHD (storage account,
        // blob, gallery, definition, version: storage the price list does not carry).
        assert_eq!(e.unknown_after, 6, "the NAT gateway and the image import");
        let what = |prefix: &str| e.items.iter().find(|i| i.address.starts_with(prefix)).unwrap().what.clone();
        assert!(what("azure_nat_gateway.").contains("no price for a Standard NAT gateway in eastus"), "{e:#?}");
        assert!(
            what("k8s_machine_set.").contains("1 × Standard_NC8as_T4_v3 VM and Premium_LRS 128 GiB OS disk in eastus"),
            "{e:#?}"
        );
    }

    /// A pool's NAT gateway and its public IP are priced where the table has them (West Europe),
    /// and a pool with Azure's default outbound access has neither.
    #[test]
    fn a_nat_gateway_is_priced_with_its_address_and_default_outbound_has_none() {
        let l = loaded("public", |s| s.replace("\"eastus\"", "\"westeurope\""));
        let e = estimate(&l.model, &plan_of(&l));
        let cents = |addr: &str| e.items.iter().find(|i| i.address == addr).and_then(Item::delta);
        assert_eq!(cents("azure_nat_gateway.pool-t4"), Some(3285), "{e:#?}");
        assert_eq!(cents("azure_public_ip.pool-t4"), Some(365), "{e:#?}");
        let l = loaded("public", |s| {
            s.replace("worker_pool \"t4\" {", "worker_pool \"t4\" {\n  egress = \"default_outbound\"")
        });
        let e = estimate(&l.model, &plan_of(&l));
        assert!(!e.items.iter().any(|i| i.address.contains("pool-t4")), "{e:#?}");
    }

    /// The IL5 example's GPU VMs are priced from Azure Government's figures, with their source
    /// and the snapshot they were read from; their OS disks, and everything else in the
    /// Government regions, have no source: unknown, and the machines' price a lower bound.
    #[test]
    fn the_il5_example_prices_its_gpu_vms_from_government_figures_and_nothing_it_has_no_source_for() {
        let l = loaded("il5-govcloud", |s| s);
        let e = estimate(&l.model, &plan_of(&l));
        let said = |what: &str| e.items.iter().any(|i| i.what.contains(what));
        assert!(said("no price for a VpnGw2AZ VPN gateway in usgovvirginia"), "{e:#?}");
        assert!(said("no price for a VPN connection in us-gov-west-1"), "{e:#?}");
        // Two MachineSets (one per zone) of one Standard_ND96asr_v4 each in usgovvirginia:
        // $34.003 × 730 = $24,822.19 a month each.
        let machines: Vec<&Item> = e.items.iter().filter(|i| i.address.starts_with("k8s_machine_set.")).collect();
        assert_eq!(machines.len(), 2, "{e:#?}");
        for m in machines {
            assert_eq!(m.after_cents, Some(2_482_219), "{m:#?}");
            assert!(m.at_least, "the OS disk is not priced: {m:#?}");
            assert!(m.what.starts_with("1 × Standard_ND96asr_v4 VM in usgovvirginia"), "{}", m.what);
            assert!(m.what.contains("OS disk: no price for a Premium_LRS P20 OS disk in usgovvirginia"), "{}", m.what);
            assert_eq!(m.sources, ["coroot/cloud-pricing, seen 2024-08-09"]);
        }
        assert!(
            e.items.iter().filter(|i| !i.address.starts_with("k8s_machine_set.")).all(|i| i.delta().is_none()),
            "{e:#?}"
        );
        assert_eq!(e.delta_cents, 2 * 2_482_219);
        assert_eq!(e.total_after_cents, 2 * 2_482_219);
        assert_eq!(e.partial_after, 2);
        assert!(e.unknown_after > 5, "{e:#?}");
        assert!(e.free > 10, "the free parts are counted, not listed: {e:#?}");
    }

    /// With the objects rendered, the machines are not in the run, and are said apart.
    #[test]
    fn rendered_machine_sets_are_priced_apart() {
        let l = loaded("public", |s| {
            s.replace("Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3")
                .replace("overlay_mtu         = 1300", "overlay_mtu         = 1300\n  kubernetes_objects  = \"render\"")
        });
        let run = ResourceGraph::new(
            l.graph
                .nodes()
                .filter(|n| n.address.rtype.provider() != xcsp_core::ProviderKind::Kubernetes)
                .cloned()
                .collect(),
        )
        .unwrap();
        let mut e =
            estimate(&l.model, &xcsp_plans::plan::diff(&l.model.stack, &l.model.digest, &run, &BTreeMap::new()));
        assert!(e.items.iter().all(|i| !i.address.starts_with("k8s_")));
        e.rendered_machines = rendered_machines(&l.model, &l.graph, &run);
        assert_eq!(e.rendered_machines, Some(Rendered { cents: 56867, unknown: 0 }));
        assert_eq!(rendered_machines(&l.model, &l.graph, &l.graph), None, "nothing left out");
    }

    #[test]
    fn a_replica_more_costs_one_machine_and_a_destroy_takes_everything_away() {
        let l = loaded("public", |s| s.replace("Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3"));
        let p = plan_of(&l);
        let recorded: BTreeMap<Address, Attributes> =
            p.changes.iter().map(|c| (c.address.clone(), c.after.clone().unwrap())).collect();
        let two = loaded("public", |s| {
            s.replace("Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3").replace("replicas    = 1", "replicas    = 2")
        });
        let more = xcsp_plans::plan::diff(&two.model.stack, &two.model.digest, &two.graph, &recorded);
        let e = estimate(&two.model, &more);
        let machines: Vec<_> = e.items.iter().filter(|i| i.address.starts_with("k8s_machine_set.")).collect();
        assert_eq!(machines.len(), 1, "{e:#?}");
        assert_eq!((machines[0].before_cents, machines[0].after_cents), (Some(56867), Some(113734)));
        assert_eq!(e.delta_cents, 56867, "{e:#?}");
        // A gateway priced 0 would not say "unknown": the VpnGw2AZ default has no price, nor
        // has a NAT gateway in eastus, nor the five resources of the image import.
        assert_eq!(e.unknown_after, 7, "the VpnGw2AZ gateway, the NAT gateway and the image import");
        // Destroying the stack (the spec's graph emptied) takes back all it cost.
        let gone = xcsp_plans::plan::diff(
            &two.model.stack,
            &two.model.digest,
            &xcsp_plans::ResourceGraph::new(vec![]).unwrap(),
            &recorded,
        );
        let e = estimate(&l.model, &gone);
        assert!(gone.changes.iter().all(|c| c.action == Action::Delete));
        let priced: i64 = e.items.iter().filter_map(Item::delta).sum();
        assert_eq!((e.delta_cents, priced), (-(56867 + 7300 + 730 + 365 + 4380 + 18250), e.delta_cents), "{e:#?}");
        assert_eq!(e.total_after_cents, 0);
    }
}
