//! The clusters the fixture made, as a VM joining one meets them: their network's ids and the
//! inbound rules of the internal API load balancer's group (CAPA's `apiserver-lb`) and of the
//! worker nodes' group (`node`), read from moto when the fixture made the groups and again after
//! every change to one, so a booting VM's checks ([`crate::kube::boot`]) never wait on moto.

use axum::http::HeaderMap;

use super::Aws;

/// A cluster the fixture made, as a VM joining it meets it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ClusterView {
    pub fixture: super::fixture::Cluster,
    /// The inbound rules of the API load balancer's group: (protocol, from port, to port, CIDR).
    pub api_lb_rules: Vec<(String, i64, i64, String)>,
    /// The inbound rules of the worker nodes' group, alike: what a cluster node lets in from a
    /// pool node (the overlay, [`crate::kube::boot::pod_network`]).
    pub node_rules: Vec<(String, i64, i64, String)>,
}

/// Reads the rules of a cluster's API load balancer and node groups again after a change to
/// `group` (none named: every cluster's).
pub async fn refresh_api_lb(aws: &Aws, headers: &HeaderMap, group: Option<&str>) {
    let Some(url) = aws.moto_url() else { return };
    let groups: Vec<String> = aws
        .clusters
        .lock()
        .expect("clusters lock")
        .iter()
        .flat_map(|c| [c.fixture.api_lb_security_group.clone(), c.fixture.node_security_group.clone()])
        .filter(|g| group.is_none_or(|x| x == g))
        .collect();
    for g in groups {
        let rules = super::resolver::group_rules(aws, &url, headers, &g).await;
        for c in aws.clusters.lock().expect("clusters lock").iter_mut() {
            if c.fixture.api_lb_security_group == g {
                c.api_lb_rules = rules.clone();
            }
            if c.fixture.node_security_group == g {
                c.node_rules = rules.clone();
            }
        }
    }
}

/// Takes in a cluster the fixture made, reading its API load balancer group's rules from moto
/// (signed as the fixture signs, in its region).
pub async fn watch_cluster(aws: &Aws, cluster: super::fixture::Cluster) {
    let mut headers = HeaderMap::new();
    if let Ok(v) = super::fixture::authorization(&cluster.region).parse() {
        headers.insert(axum::http::header::AUTHORIZATION, v);
    }
    aws.clusters.lock().expect("clusters lock").push(ClusterView {
        fixture: cluster,
        api_lb_rules: vec![],
        node_rules: vec![],
    });
    refresh_api_lb(aws, &headers, None).await;
}
