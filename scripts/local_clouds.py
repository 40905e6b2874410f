"""The local clouds for the benchmark scripts: an `xcsp-sim` with the realistic durations scaled,
and the environment that points `xcsp` at it (the binaries from CARGO_TARGET_DIR, profile
XCSP_PROFILE)."""
import glob, os, re, subprocess, tempfile

TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/xcsp-target"))
BIN = os.path.join(TARGET, os.environ.get("XCSP_PROFILE", "debug"))


def issuer_of(example):
    """The cluster's service-account issuer an example's spec names (`oidc_issuer_url`)."""
    for path in sorted(glob.glob(os.path.join(example, "*.hcl"))):
        m = re.search(r'oidc_issuer_url\s*=\s*"([^"]+)"', open(path).read())
        if m:
            return m.group(1)
    return None


def fixture_of(example):
    """The cluster an example names, as the sim's `--fixture` takes it: INFRA:REGION, its
    `cluster.infrastructure_name` and `aws.region`."""
    infra = region = None
    for path in sorted(glob.glob(os.path.join(example, "*.hcl"))):
        text = open(path).read()
        infra = infra or (re.search(r'infrastructure_name\s*=\s*"([^"]+)"', text) or [None, None])[1]
        region = region or (re.search(r'(?ms)^aws\s*\{[^}]*?^\s*region\s*=\s*"([^"]+)"', text) or [None, None])[1]
    return f"{infra}:{region}" if infra and region else None


def api_int_of(example):
    """The cluster's internal API name an example's spec implies: `api-int.<domain>` of its `api_url`
    (what the kubeconfig Secret xcsp writes names; the upstream world serves it)."""
    for path in sorted(glob.glob(os.path.join(example, "*.hcl"))):
        m = re.search(r'api_url\s*=\s*"https://api\.([^:/"]+)', open(path).read())
        if m:
            return "api-int." + m.group(1)
    return None


def authority_of(example):
    """The Entra authority CAPZ must ask for an example's tenant: Azure Government's for a spec
    with `cloud = "usgovernment"` (set on CAPZ by the cluster's owner; preflight refuses the pool
    otherwise), else "" (CAPZ's default, the public cloud's, is right)."""
    for path in sorted(glob.glob(os.path.join(example, "*.hcl"))):
        if re.search(r'cloud\s*=\s*"usgovernment"', open(path).read()):
            return "https://login.microsoftonline.us/"
    return ""


def fips_of(example):
    """Whether an example's cluster runs in FIPS mode (`fips = true` in its cluster block):
    its world is then installed so (preflight refuses a spec of the other mode)."""
    for path in sorted(glob.glob(os.path.join(example, "*.hcl"))):
        if re.search(r'(?m)^cluster\s*\{[^}]*^\s*fips\s*=\s*true', open(path).read()):
            return True
    return False


def start(scale, fixture, *extra, issuer=None, api_host=None, authority=None, fips=False):
    """Starts xcsp-sim, its upstream cluster playing the OpenShift cluster of `fixture`
    (INFRA:REGION) with CAPZ installed and, if given, `issuer` as its service-account issuer,
    `api_host` as a name of its API server, `authority` on CAPZ and `fips` its install's mode (`XCSP_UPSTREAM_BIN` must name the upstream binaries:
    scripts/upstream-setup prints it); returns (process, its URL, the kubeconfig it wrote) once its
    fixture is made."""
    extra = (*extra, "--upstream")
    if issuer:
        extra = (*extra, "--service-account-issuer", issuer)
    if api_host:
        extra = (*extra, "--api-host", api_host)
    if authority:
        extra = (*extra, "--capz-authority-host", authority)
    if fips:
        extra = (*extra, "--fips")
    kubeconfig = os.path.join(tempfile.mkdtemp(), "kubeconfig")
    sim = subprocess.Popen([f"{BIN}/xcsp-sim", "--latency", "fast", "--time-scale", str(scale), "--no-throttle",
                            "--fixture", fixture, "--openshift", fixture, "--capz",
                            # The examples' overlay_mtu: a cluster whose MTU was migrated to it.
                            "--cluster-network-mtu", "1300", *extra, "--kubeconfig", kubeconfig],
                           stdout=subprocess.PIPE, text=True)
    url = sim.stdout.readline().split()[3]
    while not sim.stdout.readline().startswith("xcsp-sim fixture"):
        pass
    return sim, url, kubeconfig


def env(url, state, kubeconfig):
    """The environment of an `xcsp` run against the sim at `url`, with its state in `state`."""
    return dict(os.environ, AWS_ENDPOINT_URL=url, AWS_ACCESS_KEY_ID="local", AWS_SECRET_ACCESS_KEY="local",
                XCSP_AZURE_ENDPOINT=url, AZURE_AUTHORITY_HOST=url, AZURE_CLIENT_ID="bench", AZURE_CLIENT_SECRET="local",
                AZURE_TENANT_ID="00000000-0000-0000-0000-000000000001", XCSP_OFFLINE="1", XCSP_STATE_DIR=state,
                KUBECONFIG=kubeconfig)
