//! `xcsp timeline`'s picture of a run.

use std::collections::BTreeMap;
use std::fmt::Write;

use xcsp_core::{Address, ProviderKind};
use xcsp_stack::timeline::Bar;

fn cloud(a: &Address) -> &'static str {
    match a.rtype.provider() {
        ProviderKind::Aws => "AWS",
        ProviderKind::Azure => "Azure",
        ProviderKind::Kubernetes => "Kubernetes",
        ProviderKind::Local => "xcsp",
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The SVG: a row per operation, grouped by cloud, a time axis below.
pub fn svg(bars: &[Bar]) -> String {
    let (label, width, row, top) = (360.0, 1100.0, 16.0, 24.0);
    let span = bars.iter().map(|b| b.end).fold(1.0f64, f64::max);
    let x = |t: f64| label + (width - label - 20.0) * t / span;
    let mut groups: BTreeMap<&str, Vec<&Bar>> = BTreeMap::new();
    for b in bars {
        groups.entry(cloud(&b.address)).or_default().push(b);
    }
    let rows = bars.len() + groups.len();
    let height = top + row * rows as f64 + 40.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" font-size="11">"#
    );
    let _ = writeln!(
        out,
        r#"<text x="4" y="14" font-weight="bold">{} operations in {:.1} s; the critical path is darker</text>"#,
        bars.len(),
        span
    );
    let mut y = top;
    for (name, group) in &groups {
        let _ = writeln!(out, r#"<text x="4" y="{:.1}" font-weight="bold">{name}</text>"#, y + 11.0);
        y += row;
        for b in group {
            let fill = match (b.failed, b.critical) {
                (true, _) => "#c0392b",
                (false, true) => "#1f4e79",
                (false, false) => "#8fb3d9",
            };
            let w = (x(b.end) - x(b.start)).max(1.5);
            let _ = writeln!(
                out,
                r#"<text x="8" y="{:.1}">{} {}</text><rect class="{}" x="{:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" fill="{fill}"><title>{} {}: {:.1} s to {:.1} s</title></rect>"#,
                y + 11.0,
                escape(&b.op),
                escape(&b.address.to_string()),
                if b.critical { "op critical" } else { "op" },
                x(b.start),
                y + 2.0,
                row - 4.0,
                escape(&b.op),
                escape(&b.address.to_string()),
                b.start,
                b.end
            );
            for t in &b.waits {
                let _ = writeln!(
                    out,
                    r##"<line class="wait" x1="{0:.1}" x2="{0:.1}" y1="{1:.1}" y2="{2:.1}" stroke="#e67e22" stroke-width="2"/>"##,
                    x(*t),
                    y + 1.0,
                    y + row - 1.0
                );
            }
            y += row;
        }
    }
    let step =
        [1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0].into_iter().find(|s| span / s <= 12.0).unwrap_or(3600.0);
    let mut t = 0.0;
    while t <= span {
        let _ = writeln!(
            out,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="{1:.1}" y2="{2:.1}" stroke="#ccc"/><text x="{0:.1}" y="{3:.1}" text-anchor="middle">{4}s</text>"##,
            x(t),
            top,
            y,
            y + 14.0,
            t
        );
        t += step;
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(address: &str, start: f64, end: f64, critical: bool, waits: Vec<f64>) -> Bar {
        Bar { address: address.parse().unwrap(), op: "create".into(), start, end, critical, failed: false, waits }
    }

    #[test]
    fn each_operation_is_a_bar_the_critical_path_darker_and_waits_ticked() {
        let bars = [
            bar("azure_resource_group.main", 0.0, 1.0, true, vec![]),
            bar("azure_virtual_network.link", 1.0, 5.0, true, vec![3.0]),
            bar("aws_vpn_gateway.main", 1.0, 2.0, false, vec![]),
        ];
        let svg = svg(&bars);
        assert_eq!(svg.matches("<rect class=\"op").count(), 3);
        assert_eq!(svg.matches("class=\"op critical\"").count(), 2);
        assert_eq!(svg.matches("class=\"wait\"").count(), 1);
        assert!(svg.contains(">AWS</text>") && svg.contains(">Azure</text>"), "grouped by cloud: {svg}");
        assert!(svg.contains("3 operations in 5.0 s"), "{svg}");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }
}
