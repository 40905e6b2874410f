//! Rules on the stack's name and the cluster block.

use xcsp_core::{Problems, Span};

use super::{check_https, err};
use crate::spec::*;
use crate::topology::{self, NSG_PART, VPN_GATEWAY_PART, azure_name};

pub(super) fn check_cluster(spec: &Spec, problems: &mut Problems) {
    let Some(c) = &spec.cluster else { return };
    let name = &c.infrastructure_name;
    let valid = !name.value.is_empty()
        && name.value.len() <= 63
        && name.value.chars().all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-')
        && !name.value.starts_with('-')
        && !name.value.ends_with('-');
    if !valid {
        problems.push(
            err("xcsp::cluster::infrastructure_name", "not a valid infrastructure name", &name.span, "")
                .with_help("use the cluster's `oc get infrastructure cluster -o jsonpath='{.status.infrastructureName}'`: lowercase letters, digits and `-`"),
        );
    }
    if let Some(ns) = &c.namespace {
        check_namespace(ns, problems);
    }
    match &c.ssh_public_key {
        Some(key) => check_ssh_key(key, problems),
        None if !spec.pools.is_empty() => problems.push(
            err(
                "xcsp::cluster::ssh_public_key",
                "the pool's VMs need an SSH public key",
                &c.span,
                "no `ssh_public_key` in the cluster block",
            )
            .with_help("CAPZ sends the key to Azure, which refuses a Linux VM without one, and outside openshift-cluster-api no CAPZ webhook generates it; use the cluster's own: `oc get machineconfig 99-worker-ssh -o jsonpath='{.spec.config.passwd.users[0].sshAuthorizedKeys[0]}'`"),
        ),
        None => {}
    }
    check_https(&c.api_url, "the API URL", problems);
    check_https(&c.oidc_issuer_url, "the OIDC issuer", problems);
    // An IPsec tunnel lowers the path MTU, and Geneve adds 100 bytes on top of the overlay MTU.
    for n in spec.networks.iter().filter(|n| n.driver.value == Driver::Ipsec) {
        let need = c.overlay_mtu.value + GENEVE_OVERHEAD;
        if need > n.tunnel_mtu.value {
            problems.push(
                err(
                    "xcsp::mtu::overlay",
                    format!(
                        "overlay MTU {} plus Geneve's {GENEVE_OVERHEAD} bytes does not fit the tunnel path MTU {} of network `{}`",
                        c.overlay_mtu.value, n.tunnel_mtu.value, n.name.value
                    ),
                    &c.overlay_mtu.span,
                    "cross-cloud pod traffic would be dropped silently",
                )
                .label(&n.tunnel_mtu.span, "tunnel path MTU")
                .with_help(format!(
                    "migrate the cluster network MTU to at most {} before adding cross-cloud workers",
                    n.tunnel_mtu.value - GENEVE_OVERHEAD
                )),
            );
        }
    }
}

const GENEVE_OVERHEAD: i64 = 100;

/// The stack's name goes into the state path (`.xcsp/<stack>/`), every Kubernetes object's
/// `xcsp.io/stack` label value and every list by label selector, the start of every Azure
/// resource name, and AWS tags. Refused here is what any of them would refuse:
/// - a Kubernetes label value: at most 63 characters, `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`
///   (apimachinery `validation.IsValidLabelValue`);
/// - Azure names: a user-assigned identity's name takes letters, digits, `-` and `_` only (no `.`);
///   virtual networks at most 64 characters, the network resources xcsp names at most 80
///   (Microsoft Learn, "Naming rules and restrictions for Azure resources");
/// - a path: no separators, no `..`, no control characters (the label rule excludes them all).
pub(super) fn check_stack(spec: &Spec, problems: &mut Problems) {
    let stack = &spec.stack;
    let Some(span) = &spec.stack_span else { return };
    let label_ok = |s: &str| {
        let b = s.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
    };
    let shown: String = stack.chars().take(64).map(|c| if c.is_control() { '?' } else { c }).collect();
    let why = if !label_ok(stack) {
        Some((
            "a Kubernetes label value (every object's `xcsp.io/stack` label) takes 1-63 letters, digits, `-`, `_` and `.`, beginning and ending with a letter or digit",
            "the first object xcsp applies would be refused by the API server",
        ))
    } else if stack.contains('.') {
        Some((
            "an Azure user-assigned identity's name (`<stack>-<identity>`) takes letters, digits, `-` and `_` only",
            "Azure would refuse the identity after the network was made",
        ))
    } else {
        None
    };
    if let Some((rule, fails)) = why {
        problems.push(
            err("xcsp::stack::name", format!("the stack name `{shown}` cannot be used"), span, rule)
                .with_help(format!("{fails}; use letters, digits, `-` and `_`, e.g. `il5-gpu`")),
        );
        return;
    }
    // The Azure names xcsp composes from the stack (topology::azure_name).
    let last_tunnel = topology::tunnels().last().expect("a link has tunnels").azure_part();
    let mut names: Vec<(String, usize, &Span)> = Vec::new();
    for n in &spec.networks {
        let name = n.name.value.as_str();
        names.push((azure_name(stack, &[name]), 64, &n.name.span));
        names.push((azure_name(stack, &[name, VPN_GATEWAY_PART]), 80, &n.name.span));
        names.push((azure_name(stack, &[name, &last_tunnel]), 80, &n.name.span));
    }
    for p in &spec.pools {
        names.push((azure_name(stack, &[&p.name.value, NSG_PART]), 80, &p.name.span));
    }
    for id in &spec.identities {
        names.push((azure_name(stack, &[&id.name.value]), 128, &id.name.span));
    }
    for (name, max, at) in names {
        if name.len() > max {
            problems.push(
                err(
                    "xcsp::stack::name",
                    format!("the Azure name `{name}` is {} characters long; Azure allows {max}", name.len()),
                    at,
                    "named from the stack and this block",
                )
                .label(span, "stack")
                .with_help("shorten the stack name or the block's label"),
            );
        }
    }
}

/// The pool's namespace: a DNS-1123 label (Kubernetes refuses any other namespace name), and not
/// `openshift-cluster-api`, where OpenShift admits one Cluster, its own, named after the
/// infrastructure (openshift/cluster-capi-operator `pkg/webhook/cluster.go`, `ValidateCreate`).
fn check_namespace(ns: &Sp<String>, problems: &mut Problems) {
    let v = &ns.value;
    let label = !v.is_empty()
        && v.len() <= 63
        && v.chars().all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-')
        && !v.starts_with('-')
        && !v.ends_with('-');
    if !label {
        problems.push(
            err("xcsp::cluster::namespace", "not a valid namespace name", &ns.span, "")
                .with_help("a namespace is a DNS label: 1-63 lowercase letters, digits and `-`, beginning and ending with a letter or digit"),
        );
    } else if v == "openshift-cluster-api" {
        problems.push(
            err(
                "xcsp::cluster::namespace",
                "the pool's objects cannot live in `openshift-cluster-api`",
                &ns.span,
                "OpenShift admits one Cluster there, the cluster's own",
            )
            .with_help("leave `namespace` out (xcsp uses `xcsp-<stack>`) or name a namespace of the pool's own"),
        );
    }
}

/// The SSH public key: `ssh-rsa BLOB [comment]` whose blob is an RSA key of at least 2048 bits,
/// what Azure takes for a Linux VM (compute API `SshPublicKey.keyData`: "at least 2048-bit and in
/// ssh-rsa format"). The blob is RFC 4253's `ssh-rsa` encoding: string type, mpint e, mpint n.
fn check_ssh_key(key: &Sp<String>, problems: &mut Problems) {
    let bits = rsa_bits(&key.value);
    let why = match bits {
        Ok(b) if b >= 2048 => return,
        Ok(b) => format!("an RSA key of {b} bits; Azure takes 2048 bits or more"),
        Err(why) => why,
    };
    problems.push(
        err("xcsp::cluster::ssh_public_key", "not an SSH public key Azure takes", &key.span, &why)
            .with_help("an `ssh-rsa` public key of at least 2048 bits, one line as in ~/.ssh/id_rsa.pub"),
    );
}

/// The modulus length of an `ssh-rsa` public key line, or why it is not one.
fn rsa_bits(line: &str) -> Result<usize, String> {
    use base64::Engine;
    let mut parts = line.split_whitespace();
    let kind = parts.next().unwrap_or_default();
    if kind != "ssh-rsa" {
        return Err(format!("`{}` is not `ssh-rsa`", kind.chars().take(20).collect::<String>()));
    }
    let blob = base64::engine::general_purpose::STANDARD
        .decode(parts.next().unwrap_or_default())
        .map_err(|_| "its key is not base64".to_string())?;
    // RFC 4253 section 6.6: string "ssh-rsa", mpint e, mpint n; each a u32 length, then bytes.
    let mut rest = blob.as_slice();
    let mut field = || -> Option<&[u8]> {
        let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        let value = rest.get(4..4 + len)?;
        rest = &rest[4 + len..];
        Some(value)
    };
    let malformed = || "its key is not an ssh-rsa key blob".to_string();
    if field().ok_or_else(malformed)? != b"ssh-rsa" {
        return Err(malformed());
    }
    let _e = field().ok_or_else(malformed)?;
    let n = field().ok_or_else(malformed)?;
    let n: &[u8] = &n[n.iter().take_while(|b| **b == 0).count()..];
    Ok(n.first().map_or(0, |first| n.len() * 8 - first.leading_zeros() as usize))
}

#[cfg(test)]
mod tests {
    use super::rsa_bits;

    /// Keys made with `ssh-keygen -t rsa -b 2048|1024` and `-t ed25519`.
    #[test]
    fn the_ssh_key_is_read_for_its_type_and_length() {
        let k2048 = include_str!("../../../tests/cases/ssh-key/rsa2048.pub");
        let k1024 = include_str!("../../../tests/cases/ssh-key/rsa1024.pub");
        let ed = include_str!("../../../tests/cases/ssh-key/ed25519.pub");
        assert_eq!(rsa_bits(k2048), Ok(2048));
        assert_eq!(rsa_bits(k1024), Ok(1024));
        assert!(rsa_bits(ed).unwrap_err().contains("is not `ssh-rsa`"));
        assert!(rsa_bits("ssh-rsa !!!").unwrap_err().contains("not base64"));
        assert!(rsa_bits("ssh-rsa AAAAB3NzaC1yc2E=").unwrap_err().contains("not an ssh-rsa key blob"));
    }
}
