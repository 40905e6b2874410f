//! `xcsp-sim`: serves the sim world on 127.0.0.1 and prints its addresses on one line: the plain
//! port (ARM, EC2, `/_sim/`) and, with `--upstream`, the world's cluster's API server.

use clap::Parser;
use std::io::Write;
use xcsp_sim::{Profile, SimConfig, SimServer};

/// Local clouds for xcsp (Azure Resource Manager, AWS EC2 over moto, an upstream Kubernetes cluster).
#[derive(Parser, Debug)]
#[command(name = "xcsp-sim", version)]
struct Args {
    /// Port on 127.0.0.1 for ARM, EC2 and the admin API, plain HTTP (0 = a free port).
    #[arg(long, default_value_t = 0, env = "XCSP_SIM_PORT")]
    port: u16,
    /// Latency profile: instant, fast or realistic.
    #[arg(long, default_value = "fast", env = "XCSP_SIM_LATENCY")]
    latency: Profile,
    /// Multiplier of realistic durations in the fast profile (default 1/600): a number or a
    /// fraction (`0.05`, `1/60`), above 0 and at most 1. Only with `--latency fast`.
    #[arg(long, value_parser = time_scale)]
    time_scale: Option<f64>,
    /// Turn ARM throttling off.
    #[arg(long)]
    no_throttle: bool,
    /// Refuse tokens for another audience (e.g. https://management.usgovcloudapi.net).
    #[arg(long)]
    expected_audience: Option<String>,
    /// The cloud the world's Entra tenants are homed in (public, usgovernment): another cloud's
    /// authority host refuses them (AADSTS900382).
    #[arg(long, value_name = "CLOUD", value_parser = ["public", "usgovernment"])]
    azure_cloud: Option<String>,
    /// Also serve EC2 (moto behind the fidelity layer) on the same port; needs scripts/moto-setup.
    #[arg(long)]
    aws: bool,
    /// The account's "inbound rules per security group" quota (AWS's default 60; implies --aws).
    #[arg(long, value_name = "N", default_value_t = xcsp_sim::aws::AWS_RULES_PER_GROUP)]
    aws_rules_per_group: u32,
    /// Create an OpenShift IPI cluster's network in moto: INFRA_NAME:REGION (repeatable; implies --aws).
    #[arg(long, value_name = "INFRA:REGION")]
    fixture: Vec<String>,
    /// With --upstream: write a kubeconfig for the cluster's API server (its CA, the admin
    /// token, context `xcsp-world`) to PATH at start.
    #[arg(long, value_name = "PATH", requires = "upstream")]
    kubeconfig: Option<std::path::PathBuf>,
    /// With --upstream: the cluster is an OpenShift cluster on AWS: INFRA_NAME:REGION (its
    /// Infrastructure object, its own Cluster and cluster-capi-operator's admission; sim/README.md).
    #[arg(long, value_name = "INFRA:REGION", requires = "upstream")]
    openshift: Option<String>,
    /// With --openshift: OpenShift's CAPZ runs as a secondary provider (the seed's proposal).
    #[arg(long, requires = "openshift")]
    capz: bool,
    /// With --openshift: the cluster's service-account issuer (`Authentication.spec.serviceAccountIssuer`,
    /// the public OIDC issuer an STS-mode install sets); without it tokens carry the internal issuer.
    #[arg(long, value_name = "URL", requires = "openshift")]
    service_account_issuer: Option<String>,
    /// With --openshift: the cluster's overlay MTU (`Network.status.clusterNetworkMTU`); 8901, an
    /// AWS cluster's as installed, unless given (a cluster whose MTU was migrated).
    #[arg(long, value_name = "MTU", requires = "openshift", default_value_t = xcsp_sim::AWS_CLUSTER_NETWORK_MTU)]
    cluster_network_mtu: u32,
    /// With --capz: AZURE_AUTHORITY_HOST on CAPZ's manager container, as a cluster's owner would
    /// set it for an Azure Government tenant (OpenShift's manifests set none).
    #[arg(long, value_name = "URL", requires = "capz")]
    capz_authority_host: Option<String>,
    /// With --openshift: the cluster was installed in FIPS mode (install-config `fips: true`, and
    /// the installer's `99-master-fips` and `99-worker-fips` MachineConfigs).
    #[arg(long, requires = "openshift")]
    fips: bool,
    /// With --openshift: OVN-Kubernetes runs IPsec between nodes (`ipsecConfig.mode: Full`).
    #[arg(long, requires = "openshift")]
    ovn_ipsec: bool,
    /// With --openshift: a worker chrony MachineConfig (`99-worker-chrony`) naming this time
    /// server; repeatable (AWS's is 169.254.169.123).
    #[arg(long, value_name = "ADDRESS", requires = "openshift")]
    worker_time_server: Vec<String>,
    /// With --openshift: the cluster hosts its own load balancers' DNS (`dnsType: ClusterHosted`),
    /// so the machine-config operator enables `aws-update-dns.service`.
    #[arg(long, requires = "openshift")]
    cluster_hosted_dns: bool,
    /// With --openshift: the cluster's three control-plane Nodes on AWS, Ready throughout, so a
    /// link outage disrupts the pool's zone only (as on a real cluster) and the node lifecycle
    /// controller taints and evicts.
    #[arg(long, requires = "openshift")]
    control_plane_nodes: bool,
    /// With --openshift: a cluster-wide proxy, `HTTPS_URL[;NO_PROXY]` (its `Proxy` object's
    /// `httpsProxy` and `noProxy`).
    #[arg(long, value_name = "URL[;NO_PROXY]", requires = "openshift")]
    proxy: Option<String>,
    /// With --openshift: an image mirror, `SOURCE=MIRROR[,MIRROR...][;never]` (an
    /// ImageDigestMirrorSet entry; `never`: `mirrorSourcePolicy: NeverContactSource`); repeatable.
    #[arg(long, value_name = "SOURCE=MIRRORS[;never]", requires = "openshift")]
    mirror: Vec<String>,
    /// With --openshift: the AWS EBS CSI driver is installed (its node DaemonSet and the `storage`
    /// ClusterOperator that reports it).
    #[arg(long, requires = "openshift")]
    ebs_csi: bool,
    /// With --openshift: the cluster's feature set, `TechPreviewNoUpgrade` (OpenShift runs Cluster
    /// API's core manager) or `Default` (no Cluster API at all, as every production cluster on AWS;
    /// docs/src/concepts/cluster-api-on-openshift.md).
    #[arg(long, value_name = "SET", requires = "openshift", default_value = "TechPreviewNoUpgrade",
        value_parser = ["Default", "TechPreviewNoUpgrade"], conflicts_with = "capz")]
    feature_set: String,
    /// Run the world's cluster: upstream kube-apiserver, etcd, kube-controller-manager and Cluster
    /// API's manager (their directory in XCSP_UPSTREAM_BIN, which scripts/upstream-setup prints),
    /// with the sim's stand-ins as its clients.
    #[arg(long)]
    upstream: bool,
    /// With --upstream: a host name the API server is known by in the world (the api-int name a
    /// kubeconfig Secret of the spec names); repeatable.
    #[arg(long, value_name = "HOST", requires = "upstream")]
    api_host: Vec<String>,
}

/// `F` or `N/D`, in (0, 1].
fn time_scale(text: &str) -> Result<f64, String> {
    let number = |t: &str| t.trim().parse::<f64>().map_err(|_| format!("'{t}' is not a number"));
    let value = match text.split_once('/') {
        Some((n, d)) => number(n)? / number(d)?,
        None => number(text)?,
    };
    if value.is_finite() && value > 0.0 && value <= 1.0 {
        Ok(value)
    } else {
        Err(format!("'{text}' is not above 0 and at most 1 (realistic durations times this)"))
    }
}

fn main() {
    let args = Args::parse();
    // A flag the profile cannot honour is an error, never silently ignored: only `fast` scales.
    if args.time_scale.is_some() && args.latency != Profile::Fast {
        eprintln!(
            "xcsp-sim: --time-scale applies to --latency fast only (realistic runs at real durations, instant takes none)"
        );
        std::process::exit(2);
    }
    let mut config = SimConfig::default();
    config.latency.profile = args.latency;
    if let Some(s) = args.time_scale {
        config.latency.time_scale = s;
    }
    config.throttle.enabled = !args.no_throttle;
    config.expected_audience = args.expected_audience;
    config.azure_cloud = args.azure_cloud;
    if let Some(o) = &args.openshift {
        let Some((infra, region)) = o.split_once(':') else {
            eprintln!("xcsp-sim: --openshift takes INFRA_NAME:REGION, got {o}");
            std::process::exit(2);
        };
        config.openshift = Some(xcsp_sim::OpenShift {
            infrastructure_name: infra.into(),
            api_internal_url: format!("https://api-int.{infra}.sim.internal:6443"),
            region: region.into(),
            capz: args.capz,
            service_account_issuer: args.service_account_issuer.clone(),
            cluster_network_mtu: args.cluster_network_mtu,
            capz_authority_host: args.capz_authority_host.clone(),
            fips: args.fips,
            ovn_ipsec: args.ovn_ipsec,
            worker_time_servers: args.worker_time_server.clone(),
            cluster_hosted_dns: args.cluster_hosted_dns,
            control_plane_nodes: args.control_plane_nodes,
            proxy: args.proxy.as_ref().map(|p| {
                let (url, no) = p.split_once(';').unwrap_or((p, ""));
                xcsp_sim::world::ClusterProxy { https_proxy: url.into(), no_proxy: no.into() }
            }),
            mirrors: args
                .mirror
                .iter()
                .map(|m| {
                    let (m, policy) = m.split_once(';').unwrap_or((m, ""));
                    let Some((source, mirrors)) = m.split_once('=') else {
                        eprintln!("xcsp-sim: --mirror takes SOURCE=MIRROR[,MIRROR...][;never], got {m}");
                        std::process::exit(2);
                    };
                    xcsp_sim::world::ImageMirror {
                        source: source.into(),
                        mirrors: mirrors.split(',').map(String::from).collect(),
                        never_contact_source: policy == "never",
                    }
                })
                .collect(),
            ebs_csi: args.ebs_csi,
            feature_set: if args.feature_set == "Default" {
                xcsp_sim::world::FeatureSet::Default
            } else {
                xcsp_sim::world::FeatureSet::TechPreviewNoUpgrade
            },
        });
    }
    let started = if args.upstream {
        let cluster = xcsp_sim::cluster::ClusterConfig {
            service_account_issuer: args.service_account_issuer.clone(),
            api_hosts: args.api_host.clone(),
            ..Default::default()
        };
        SimServer::start_with_cluster(config, args.port, cluster)
    } else {
        SimServer::start(config, args.port)
    };
    let server = match started {
        Ok(s) => s,
        Err(e) => {
            eprintln!("xcsp-sim: {e}");
            std::process::exit(1);
        }
    };
    if let (Some(path), Some(kubeconfig)) = (&args.kubeconfig, server.kubeconfig())
        && let Err(e) = std::fs::write(path, &kubeconfig)
    {
        eprintln!("xcsp-sim: cannot write the kubeconfig to {}: {e}", path.display());
        std::process::exit(1);
    }
    let kube_url = server.cluster().map_or_else(|| "none".to_string(), |c| c.url.clone());
    let mut out = std::io::stdout().lock();
    // The plain base URL stays the fourth word; the cluster's API server is the sixth.
    let _ = writeln!(out, "xcsp-sim listening on {} kubernetes {kube_url}", server.base_url);
    let _ = out.flush();
    let raised = args.aws_rules_per_group != xcsp_sim::aws::AWS_RULES_PER_GROUP;
    let moto = if args.aws || raised || !args.fixture.is_empty() {
        match xcsp_sim::aws::Moto::start_with(args.aws_rules_per_group) {
            Ok(m) => {
                server.sim.aws.set_moto(&m.url);
                let _ = writeln!(out, "xcsp-sim aws: EC2 on {} (moto at {})", server.base_url, m.url);
                Some(m)
            }
            Err(e) => {
                eprintln!("xcsp-sim: {e}");
                std::process::exit(1);
            }
        }
    } else {
        None
    };
    if let Some(m) = &moto {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        for f in &args.fixture {
            let Some((infra, region)) = f.split_once(':') else {
                eprintln!("xcsp-sim: --fixture takes INFRA_NAME:REGION, got {f}");
                std::process::exit(2);
            };
            match rt.block_on(xcsp_sim::aws::fixture::cluster(&m.url, infra, region)) {
                Ok(c) => {
                    rt.block_on(xcsp_sim::aws::cluster::watch_cluster(&server.sim.aws, c.clone()));
                    let _ = writeln!(
                        out,
                        "xcsp-sim fixture {infra} {region}: {}",
                        serde_json::to_string(&c).unwrap_or_default()
                    );
                }
                Err(e) => {
                    eprintln!("xcsp-sim: fixture {f}: {e}");
                    std::process::exit(1);
                }
            }
        }
    }
    let _ = out.flush();
    drop(out);
    // Serve until SIGINT or SIGTERM; then stop moto with us (a child left behind would keep its port).
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    rt.block_on(async {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    });
    drop(moto);
    server.stop();
}
