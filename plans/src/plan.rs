//! The plan: what apply would change, as data, and its Terraform-style rendering.
//!
//! The diff compares the graph's desired attributes with those recorded in state (refreshed
//! from the clouds when the CLI asks for it); the engine uses the same comparison at apply time.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};
use xcsp_core::provider::Attributes;
use xcsp_core::{Address, ProviderKind, Value};

use crate::graph::ResourceGraph;

/// What is done to one resource: what plan shows and what the engine runs (everything but
/// `NoOp`), one name for both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Create,
    Update,
    Replace,
    Delete,
    NoOp,
}

impl Action {
    /// "Creating", "Updating", ... for progress lines.
    pub fn doing(self) -> &'static str {
        match self {
            Action::Create => "Creating",
            Action::Update => "Updating",
            Action::Replace => "Replacing",
            Action::Delete => "Destroying",
            Action::NoOp => "Reading",
        }
    }

    /// "created", "updated", ... for summaries.
    pub fn done(self) -> &'static str {
        match self {
            Action::Create => "created",
            Action::Update => "updated",
            Action::Replace => "replaced",
            Action::Delete => "destroyed",
            Action::NoOp => "unchanged",
        }
    }

    /// "create", "update", ... one word, as lists of changes say them.
    pub fn verb(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Replace => "replace",
            Action::Delete => "delete",
            Action::NoOp => "keep",
        }
    }

    /// "a create", "an in-place update", ... for sentences.
    pub fn words(self) -> &'static str {
        match self {
            Action::Create => "a create",
            Action::Update => "an in-place update",
            Action::Replace => "a replacement",
            Action::Delete => "a delete",
            Action::NoOp => "no change",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub address: Address,
    pub action: Action,
    pub before: Option<Attributes>,
    pub after: Option<Attributes>,
    /// Attributes that force a replacement, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replace_because: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub stack: String,
    pub spec_digest: String,
    pub changes: Vec<Change>,
}

/// Replaces every secret with a bare sensitive marker.
fn redact_value(v: &Value) -> Value {
    match v {
        Value::Sensitive(_) => Value::sensitive(Value::Null),
        Value::List(l) => Value::List(l.iter().map(redact_value).collect()),
        Value::Map(m) => Value::Map(m.iter().map(|(k, x)| (k.clone(), redact_value(x))).collect()),
        other => other.clone(),
    }
}

fn redact_attrs(a: &Option<Attributes>) -> Option<Attributes> {
    a.as_ref().map(|a| a.iter().map(|(k, v)| (k.clone(), redact_value(v))).collect())
}

impl Plan {
    /// `2 to add, 1 to change, 0 to replace, 0 to destroy`.
    pub fn counts(&self) -> String {
        let count = |a: Action| self.changes.iter().filter(|c| c.action == a).count();
        format!(
            "{} to add, {} to change, {} to replace, {} to destroy",
            count(Action::Create),
            count(Action::Update),
            count(Action::Replace),
            count(Action::Delete)
        )
    }

    /// The plan with every secret removed: what `--json` prints and `--out` writes (until plan
    /// files are encrypted, the secrets stay with the spec and the state).
    pub fn redacted(&self) -> Plan {
        let changes = self
            .changes
            .iter()
            .map(|c| Change { before: redact_attrs(&c.before), after: redact_attrs(&c.after), ..c.clone() })
            .collect();
        Plan { changes, ..self.clone() }
    }

    pub fn has_changes(&self) -> bool {
        self.changes.iter().any(|c| c.action != Action::NoOp)
    }
}

/// Compares one resource's desired attributes with what is recorded: no-op, update, or replace
/// (with the attributes that force it). Desired values still unknown are not compared.
pub fn compare(address: &Address, desired: &Attributes, recorded: &Attributes) -> (Action, Vec<(String, String)>) {
    let mut replace = Vec::new();
    let mut differs = false;
    for (k, v) in desired {
        if !recorded.get(k).is_some_and(|r| v.matches_recorded(r)) && !v.has_unknown() {
            differs = true;
            if let Some(why) = address.rtype.forces_replacement(k) {
                replace.push((k.clone(), why.to_string()));
            }
        }
    }
    let action = if !replace.is_empty() {
        Action::Replace
    } else if differs {
        Action::Update
    } else {
        Action::NoOp
    };
    (action, replace)
}

/// Diffs the desired graph against recorded attributes (by address). Inputs are filled from
/// the recorded outputs of producers that stay (no-op or update), so a change flows on to the
/// resources that consume it; a producer that is created or replaced leaves them unknown.
pub fn diff(stack: &str, digest: &str, graph: &ResourceGraph, recorded: &BTreeMap<Address, Attributes>) -> Plan {
    diff_replacing(stack, digest, graph, recorded, &BTreeMap::new())
}

/// [`diff`], with the recorded resources in `replacing` replaced whatever their attributes say,
/// each for the reason given (Terraform's `-replace`; a pre-shared key due for rotation). What
/// consumes their outputs shows `(known after apply)` and changes with them.
pub fn diff_replacing(
    stack: &str,
    digest: &str,
    graph: &ResourceGraph,
    recorded: &BTreeMap<Address, Attributes>,
    replacing: &BTreeMap<Address, String>,
) -> Plan {
    let mut changes: Vec<Change> = Vec::new();
    let mut stays: BTreeMap<&Address, bool> = BTreeMap::new();
    for node in graph.in_order() {
        let after = node.filled(|from, output| {
            if !stays.get(from).copied().unwrap_or(false) {
                return None;
            }
            recorded.get(from).and_then(|a| a.get(output)).cloned()
        });
        let change = match recorded.get(&node.address) {
            None => Change {
                address: node.address.clone(),
                action: Action::Create,
                before: None,
                after: Some(after),
                replace_because: vec![],
            },
            Some(before) => {
                let (mut action, mut replace) = compare(&node.address, &after, before);
                if let Some(why) = replacing.get(&node.address) {
                    action = Action::Replace;
                    replace.push(("(the resource)".into(), why.clone()));
                }
                // A value still unknown comes from a producer this plan creates or replaces (one
                // that vanished from the cloud, say): the resource changes with it, and the plan
                // shows that now rather than apply finding it out ("known after apply").
                let waiting: Vec<&str> = node
                    .inputs
                    .iter()
                    .filter(|i| stays.get(&i.from) == Some(&false))
                    .map(|i| i.attribute.split('[').next().unwrap_or_default())
                    .collect();
                for (k, v) in &after {
                    if !waiting.contains(&k.as_str()) || before.get(k).is_some_and(|b| v.matches_recorded(b)) {
                        continue;
                    }
                    if let Some(why) = node.address.rtype.forces_replacement(k) {
                        replace.push((k.clone(), format!("{why} (its new value is known only after apply)")));
                        action = Action::Replace;
                    } else if action == Action::NoOp {
                        action = Action::Update;
                    }
                }
                Change {
                    address: node.address.clone(),
                    action,
                    before: Some(before.clone()),
                    after: Some(after),
                    replace_because: replace,
                }
            }
        };
        stays.insert(&node.address, matches!(change.action, Action::NoOp | Action::Update));
        changes.push(change);
    }
    for (addr, before) in recorded {
        if graph.get(addr).is_none() {
            changes.push(Change {
                address: addr.clone(),
                action: Action::Delete,
                before: Some(before.clone()),
                after: None,
                replace_because: vec![],
            });
        }
    }
    Plan { stack: stack.to_string(), spec_digest: digest.to_string(), changes }
}

fn symbol(a: Action) -> &'static str {
    match a {
        Action::Create => "+",
        Action::Update => "~",
        Action::Replace => "-/+",
        Action::Delete => "-",
        Action::NoOp => " ",
    }
}

pub fn render_value(v: &Value) -> String {
    match v {
        Value::Sensitive(_) => "(sensitive value)".into(),
        Value::Unknown => "(known after apply)".into(),
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::List(l) => format!("[{}]", l.iter().map(render_value).collect::<Vec<_>>().join(", ")),
        Value::Map(m) => format!(
            "{{ {} }}",
            m.iter().map(|(k, x)| format!("{k} = {}", render_value(x))).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The stack's outputs, Terraform-style; sensitive ones are not shown.
pub fn render_outputs(outputs: &[crate::spec::Output]) -> String {
    if outputs.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nOutputs:\n\n");
    for o in outputs {
        let value = if o.sensitive { "(sensitive value)".to_string() } else { render_value(&o.value) };
        let _ = writeln!(out, "{} = {value}", o.name);
    }
    out
}

/// Human output in Terraform's idiom, grouped by provider, with a summary line.
pub fn render(plan: &Plan) -> String {
    let mut out = String::new();
    let mut groups: BTreeMap<ProviderKind, Vec<&Change>> = BTreeMap::new();
    for c in plan.changes.iter().filter(|c| c.action != Action::NoOp) {
        groups.entry(c.address.rtype.provider()).or_default().push(c);
    }
    if groups.is_empty() {
        return "No changes. The clouds match the spec.\n".into();
    }
    for (provider, changes) in groups {
        let _ = writeln!(
            out,
            "# {} ({} change{})",
            provider.title(),
            changes.len(),
            if changes.len() == 1 { "" } else { "s" }
        );
        for c in changes {
            let verb = match c.action {
                Action::Create => "will be created",
                Action::Update => "will be updated in place",
                Action::Replace => "must be replaced",
                Action::Delete => "will be destroyed",
                Action::NoOp => "",
            };
            let _ = writeln!(out, "  {} {} {verb}", symbol(c.action), c.address);
            for (attr, why) in &c.replace_because {
                let _ = writeln!(out, "      # {attr} forces replacement: {why}");
            }
            match (&c.after, &c.before) {
                // An update or replacement names what changes, `before -> after`, as apply
                // will send it; what stays is counted, not listed.
                (Some(after), Some(before)) if matches!(c.action, Action::Update | Action::Replace) => {
                    let mut unchanged = 0;
                    for (k, v) in after {
                        match before.get(k) {
                            _ if v.has_unknown() => {
                                let _ = writeln!(out, "      {k} = {}", render_value(v));
                            }
                            Some(b) if v.matches_recorded(b) => unchanged += 1,
                            Some(b) => {
                                let _ = writeln!(out, "    ~ {k} = {} -> {}", render_value(b), render_value(v));
                            }
                            None => {
                                let _ = writeln!(out, "    + {k} = {}", render_value(v));
                            }
                        }
                    }
                    if unchanged > 0 {
                        let _ = writeln!(
                            out,
                            "      # ({unchanged} unchanged attribute{} hidden)",
                            if unchanged == 1 { "" } else { "s" }
                        );
                    }
                }
                (Some(after), _) => {
                    for (k, v) in after {
                        let _ = writeln!(out, "      {k} = {}", render_value(v));
                    }
                }
                _ => {}
            }
        }
        out.push('\n');
    }
    let _ = writeln!(out, "Plan: {}.", plan.counts());
    out
}

/// A plan written by `plan --out`, with what it was made against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedPlan {
    pub format: u32,
    pub plan: Plan,
    /// The state's lineage and serial when planned (`None`: no state existed).
    pub state_lineage: Option<String>,
    pub state_serial: u64,
}

/// Why a saved plan may no longer be applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error, miette::Diagnostic)]
#[diagnostic(code(xcsp::plan::stale), help("run `xcsp plan --out FILE` again and apply the new plan"))]
pub enum Stale {
    #[error("the spec or its variables changed since this plan was made")]
    Spec,
    #[error("the state was replaced since this plan was made (lineage {planned:?}, now {current:?})")]
    Lineage { planned: Option<String>, current: Option<String> },
    #[error("the state changed since this plan was made (serial {planned}, now {current})")]
    Serial { planned: u64, current: u64 },
}

impl SavedPlan {
    pub fn new(plan: Plan, state_lineage: Option<String>, state_serial: u64) -> SavedPlan {
        SavedPlan { format: 1, plan, state_lineage, state_serial }
    }

    /// Refuses the plan if the spec digest, the state's lineage or its serial moved.
    pub fn check_fresh(&self, spec_digest: &str, lineage: Option<&str>, serial: u64) -> Result<(), Stale> {
        if self.plan.spec_digest != spec_digest {
            return Err(Stale::Spec);
        }
        if self.state_lineage.as_deref() != lineage {
            return Err(Stale::Lineage { planned: self.state_lineage.clone(), current: lineage.map(String::from) });
        }
        if self.state_serial != serial {
            return Err(Stale::Serial { planned: self.state_serial, current: serial });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A VPN connection (gone from the cloud, so not recorded) and what takes its outputs: a local
    /// network gateway (its IP, in place) and an Azure connection (the gateway's id, which forces
    /// a replacement when the gateway is replaced).
    #[test]
    fn what_takes_a_value_from_a_resource_created_again_is_shown_changing_with_it() {
        use crate::graph::{Input, Node};
        use xcsp_core::ResourceType as T;
        let conn = Address::new(T::AwsVpnConnection, "l");
        let lng = Address::new(T::AzureLocalNetworkGateway, "l");
        let az = Address::new(T::AzureVpnConnection, "l");
        let node = |address: &Address, attribute: &str, from: &Address, output: &str| Node {
            address: address.clone(),
            attributes: [(attribute.to_string(), Value::Unknown)].into(),
            inputs: vec![Input { attribute: attribute.into(), from: from.clone(), output: output.into() }],
            depends_on: vec![],
            prevent_destroy: false,
        };
        let graph = ResourceGraph::new(vec![
            Node {
                address: conn.clone(),
                attributes: [("ip".to_string(), Value::string("203.0.113.9"))].into(),
                inputs: vec![],
                depends_on: vec![],
                prevent_destroy: false,
            },
            node(&lng, "gateway_ip_address", &conn, "ip"),
            node(&az, "local_network_gateway", &lng, "id"),
        ])
        .unwrap();
        let mut recorded = BTreeMap::new();
        recorded.insert(
            lng.clone(),
            [("gateway_ip_address".to_string(), Value::string("203.0.113.1")), ("id".to_string(), Value::string("L1"))]
                .into(),
        );
        recorded.insert(az.clone(), [("local_network_gateway".to_string(), Value::string("L1"))].into());
        let p = diff("s", "d", &graph, &recorded);
        let action = |a: &Address| p.changes.iter().find(|c| &c.address == a).unwrap().action;
        assert_eq!(action(&conn), Action::Create);
        assert_eq!(action(&lng), Action::Update);
        // The gateway stays (updated in place), so its id is known and the connection stays too.
        assert_eq!(action(&az), Action::NoOp);
        let text = render(&p);
        assert!(text.contains("gateway_ip_address = (known after apply)"), "{text}");

        // Recorded under another IP and replaced: the connection that names it is replaced with it.
        let mut recorded = recorded.clone();
        recorded.remove(&lng);
        let p = diff("s", "d", &graph, &recorded);
        let change = p.changes.iter().find(|c| c.address == az).unwrap();
        assert_eq!(change.action, Action::Replace);
        assert!(change.replace_because[0].1.contains("known only after apply"), "{:?}", change.replace_because);
    }

    fn saved() -> SavedPlan {
        SavedPlan::new(Plan { stack: "s".into(), spec_digest: "abc".into(), changes: vec![] }, Some("L".into()), 3)
    }

    #[test]
    fn a_fresh_plan_passes_and_every_kind_of_drift_is_refused() {
        let p = saved();
        assert_eq!(p.check_fresh("abc", Some("L"), 3), Ok(()));
        assert_eq!(p.check_fresh("abd", Some("L"), 3), Err(Stale::Spec));
        assert!(matches!(p.check_fresh("abc", Some("M"), 3), Err(Stale::Lineage { .. })));
        assert!(matches!(p.check_fresh("abc", None, 3), Err(Stale::Lineage { .. })));
        assert_eq!(p.check_fresh("abc", Some("L"), 4), Err(Stale::Serial { planned: 3, current: 4 }));
    }

    #[test]
    fn saved_plans_round_trip_with_unknown_and_sensitive_values() {
        let mut p = saved();
        let mut after = Attributes::new();
        after.insert("psk".into(), Value::sensitive(Value::Unknown));
        after.insert("ip".into(), Value::Unknown);
        p.plan.changes.push(Change {
            address: "aws_vpn_connection.link[0]".parse().unwrap(),
            action: Action::Create,
            before: None,
            after: Some(after),
            replace_because: vec![],
        });
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<SavedPlan>(&text).unwrap(), p);
    }
}
