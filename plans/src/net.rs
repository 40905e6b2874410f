//! IPv4 network arithmetic the spec rules need: parsing CIDRs, overlaps, containment, subnetting.

use ipnet::Ipv4Net;
use xcsp_core::Value;

/// Parses `a.b.c.d/n`, refusing addresses with host bits set (a common typo that clouds reject).
pub fn parse_cidr(text: &str) -> Result<Ipv4Net, String> {
    let net: Ipv4Net = text.parse().map_err(|_| format!("`{text}` is not an IPv4 CIDR block like 10.0.0.0/16"))?;
    if net.network() != net.addr() {
        return Err(format!("`{text}` has host bits set; the block starts at {}", net.trunc()));
    }
    Ok(net)
}

pub fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// Every overlapping pair among `nets` (indices into it), in O(n log n + pairs): sort by start
/// address and sweep, keeping the blocks whose end has not been passed yet.
pub fn overlapping_pairs(nets: &[Ipv4Net]) -> Vec<(usize, usize)> {
    let mut order: Vec<usize> = (0..nets.len()).collect();
    order.sort_by_key(|&i| (u32::from(nets[i].network()), std::cmp::Reverse(nets[i].prefix_len())));
    let mut pairs = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    for &i in &order {
        let start = u32::from(nets[i].network());
        open.retain(|&j| u32::from(nets[j].broadcast()) >= start);
        pairs.extend(open.iter().map(|&j| (j.min(i), j.max(i))));
        open.push(i);
    }
    pairs
}

/// Terraform's `cidrsubnet(prefix, newbits, netnum)`.
pub fn cidrsubnet(prefix: &Value, newbits: &Value, netnum: &Value) -> Result<String, String> {
    let prefix = prefix.as_str().ok_or("the prefix must be a string")?;
    let net = parse_cidr(prefix)?;
    let newbits = newbits.as_i64().filter(|n| (0..=32).contains(n)).ok_or("newbits must be a number from 0 to 32")?;
    let netnum = netnum.as_i64().filter(|n| *n >= 0).ok_or("netnum must be a non-negative number")?;
    let len = net.prefix_len() as i64 + newbits;
    if len > 32 {
        return Err(format!("{prefix} has no room for {newbits} more bits"));
    }
    if newbits < 63 && netnum >= (1i64 << newbits) {
        return Err(format!("netnum {netnum} does not fit in {newbits} bits"));
    }
    let base = u32::from(net.network()) as u64 + ((netnum as u64) << (32 - len));
    let sub = Ipv4Net::new((base as u32).into(), len as u8).map_err(|e| e.to_string())?;
    Ok(sub.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(list: &[&str]) -> Vec<Ipv4Net> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn finds_every_overlap_and_nothing_else() {
        let n = nets(&["10.0.0.0/16", "10.1.0.0/16", "10.0.5.0/24", "10.0.0.0/8", "192.168.0.0/24"]);
        let mut pairs = overlapping_pairs(&n);
        pairs.sort();
        assert_eq!(pairs, vec![(0, 2), (0, 3), (1, 3), (2, 3)]);
    }

    #[test]
    fn refuses_host_bits() {
        assert!(parse_cidr("10.0.0.1/16").unwrap_err().contains("10.0.0.0/16"));
        assert!(parse_cidr("10.0.0.0/33").is_err());
    }

    #[test]
    fn cidrsubnet_matches_terraform() {
        let s = |p: &str, b: i64, n: i64| cidrsubnet(&p.into(), &Value::int(b), &Value::int(n));
        assert_eq!(s("10.200.0.0/16", 8, 1).unwrap(), "10.200.1.0/24");
        assert_eq!(s("10.200.0.0/16", 11, 2047).unwrap(), "10.200.255.224/27");
        assert!(s("10.200.0.0/16", 8, 256).is_err());
    }
}
