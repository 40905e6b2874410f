//! Why an operation on a stack stopped: every public operation of this crate returns a
//! [`StackError`]. What this crate finds itself has a variant of its own; what another crate
//! refused (state, the clouds, the crypto module, a saved plan gone stale) travels in a variant
//! holding that crate's typed error, rendered as its own diagnostic. A front end matches the
//! variants (the controller's condition reasons, [`StackError::reason`]); only the command line
//! turns them into reports.

use std::path::PathBuf;

use miette::Diagnostic;
use xcsp_core::Address;
use xcsp_core::diag::Problem;
use xcsp_core::provider::ProviderError;
use xcsp_crypto::CryptoError;
use xcsp_plans::plan::Stale;
use xcsp_state::StateError;

/// What the operations of this crate return.
pub type Result<T, E = StackError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum StackError {
    /// State could not be read, written, locked or unsealed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    State(#[from] StateError),

    /// A cloud (or the cluster) refused, or its provider could not be made.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Provider(#[from] ProviderError),

    /// The FIPS module or a TLS configuration failed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Crypto(#[from] CryptoError),

    /// A saved plan the spec or the state moved away from.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Stale(#[from] Stale),

    /// More than one variable holds the state key.
    #[error(transparent)]
    #[diagnostic(transparent)]
    KeySources(#[from] KeySources),

    /// No kubeconfig for the cluster where an operation needs one (what was tried, and how to fix it).
    #[error(transparent)]
    #[diagnostic(transparent)]
    NoCluster(Problem),

    /// The caller's approver refused in its own words (a terminal with nobody at it, an answer
    /// other than yes).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Refused(Refusal),

    #[error("--backend-config takes KEY=VALUE with KEY one of {known}; got `{pair}`")]
    #[diagnostic(code(xcsp::stack::backend_config))]
    BackendConfig { pair: String, known: String },

    #[error("unknown encryption mode `{0}`: `enforced` or `optional`")]
    #[diagnostic(code(xcsp::stack::encryption_mode))]
    EncryptionMode(String),

    #[error("unknown backend `{0}`: `local`, `s3` or `kubernetes`")]
    #[diagnostic(code(xcsp::stack::backend))]
    UnknownBackend(String),

    #[error(
        "the cluster runs in FIPS mode, and this xcsp is not a FIPS build: the clouds' and the cluster's credentials would cross TLS outside a validated module"
    )]
    #[diagnostic(
        code(xcsp::fips::build),
        help(
            "apply with the FIPS build (xcsp's default features; `xcsp --version` names the module), or knowingly pass --allow-non-fips-build (XCSP_ALLOW_NON_FIPS_BUILD=true)"
        )
    )]
    NonFipsBuild,

    #[error("the s3 backend needs a bucket")]
    #[diagnostic(
        code(xcsp::stack::no_bucket),
        help("`bucket` in the backend block, XCSP_BACKEND_BUCKET or --backend-config bucket=NAME")
    )]
    NoBucket,

    #[error("cannot read {what} {}", path.display())]
    #[diagnostic(code(xcsp::stack::read))]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{} is not a saved plan: {detail}", path.display())]
    #[diagnostic(code(xcsp::stack::not_a_plan))]
    NotAPlan { path: PathBuf, detail: String },

    #[error("`{text}` is not a resource address: {detail}")]
    #[diagnostic(code(xcsp::stack::address))]
    NotAnAddress { text: String, detail: String },

    #[error("the spec has no {0}")]
    #[diagnostic(code(xcsp::stack::not_in_spec), help("`xcsp graph` lists the spec's resources"))]
    NotInSpec(Address),

    #[error("state has no {0}")]
    #[diagnostic(code(xcsp::stack::not_in_state), help("`xcsp state list` shows what state records"))]
    NotInState(Address),

    #[error("{} resources tagged with the stack remain:{}", remaining.len(), remaining.iter().map(|r| format!("\n  - {r}")).collect::<String>())]
    #[diagnostic(
        code(xcsp::stack::remaining),
        help("they were found by their tags after the destroy; see the failures above")
    )]
    Remaining { remaining: Vec<String> },

    #[error("{detail} (the kubeconfig from {from})")]
    #[diagnostic(code(xcsp::stack::kubeconfig))]
    Kubeconfig { detail: String, from: String },

    #[error("the OIDC issuer check found {} error{}", problems.len(), if problems.len() == 1 { "" } else { "s" })]
    #[diagnostic(code(xcsp::stack::issuer))]
    Issuer {
        #[related]
        problems: Vec<Problem>,
    },

    #[error("the Azure capacity check found {} error{}", problems.len(), if problems.len() == 1 { "" } else { "s" })]
    #[diagnostic(code(xcsp::stack::capacity))]
    Capacity {
        #[related]
        problems: Vec<Problem>,
    },

    #[error("the cluster check found {} error{}", problems.len(), if problems.len() == 1 { "" } else { "s" })]
    #[diagnostic(code(xcsp::stack::cluster))]
    Cluster {
        #[related]
        problems: Vec<Problem>,
    },

    #[error("{0}")]
    #[diagnostic(code(xcsp::stack::render))]
    Render(String),

    #[error("the events are not JSON lines of `--json`: {0}")]
    #[diagnostic(code(xcsp::stack::events))]
    Events(String),

    #[error("no generated pre-shared key is recorded{}", link.as_ref().map(|l| format!(" for link `{l}`")).unwrap_or_default())]
    #[diagnostic(
        code(xcsp::stack::no_keys),
        help(
            "keys the spec sets (`pre_shared_keys`) are rotated by changing the spec; generated ones exist after `xcsp apply`"
        )
    )]
    NoKeys { link: Option<String> },

    #[error("the stack has changes pending besides the keys:{}", pending.iter().map(|p| format!("\n  - {p}")).collect::<String>())]
    #[diagnostic(
        code(xcsp::stack::pending),
        help("run `xcsp apply` first: a rotation changes the keys and what uses them, nothing else")
    )]
    Pending { pending: Vec<String> },

    #[error("the rotation stopped at {key}: {why}")]
    #[diagnostic(
        code(xcsp::stack::rotation),
        help(
            "every finished step is in state, and so are the keys left to rotate: once the tunnel is back (`xcsp status`), `xcsp rotate-keys` resumes (a key already new is given to its tunnel, not replaced again)"
        )
    )]
    RotationStopped { key: Address, why: String },

    #[error("a key rotation is under way with keys outside link `{link}`:{}", keys.iter().map(|k| format!("\n  - {k}")).collect::<String>())]
    #[diagnostic(
        code(xcsp::stack::rotation_under_way),
        help("finish it first: `xcsp rotate-keys` without --link resumes it; then rotate link `{link}`")
    )]
    RotationUnderWay { link: String, keys: Vec<String> },

    #[error("the kubernetes backend needs a namespace")]
    #[diagnostic(
        code(xcsp::stack::no_namespace),
        help("`namespace` in the backend block, XCSP_BACKEND_NAMESPACE or --backend-config namespace=NAME")
    )]
    NoNamespace,

    #[error("not approved: nothing was changed ({question})")]
    #[diagnostic(code(xcsp::stack::not_approved))]
    NotApproved { question: String },
}

/// More than one of a key's variables is set: which one was meant is not guessed.
#[derive(Debug, miette::Diagnostic)]
#[diagnostic(
    code(xcsp::state::key_sources),
    help("a state key comes from one variable: unset all of these but the one that holds the key")
)]
pub struct KeySources {
    /// The variables that are set, in the order they are named in the docs.
    pub set: Vec<String>,
}

impl std::fmt::Display for KeySources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (last, rest) = self.set.split_last().expect("at least two");
        let (names, quantifier) = (rest.join(", "), if self.set.len() == 2 { "both" } else { "all" });
        write!(f, "{names} and {last} are {quantifier} set: the state key would be ambiguous")
    }
}

impl std::error::Error for KeySources {}

/// An approver's refusal, in the diagnostic its front end made (its code, words and help).
#[derive(Debug)]
pub struct Refusal(pub Box<dyn Diagnostic + Send + Sync + 'static>);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Refusal {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl Diagnostic for Refusal {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.0.code()
    }

    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.0.help()
    }

    fn severity(&self) -> Option<miette::Severity> {
        self.0.severity()
    }
}

impl StackError {
    /// An approver's refusal in its own diagnostic.
    pub fn refused(d: impl Diagnostic + Send + Sync + 'static) -> StackError {
        StackError::Refused(Refusal(Box::new(d)))
    }

    /// The error as a Kubernetes condition or Event names why (`Locked`, `NotApproved`): one word
    /// per kind of error, stable across releases, so alerts and `kubectl wait` can match it.
    pub fn reason(&self) -> &'static str {
        use StackError as E;
        match self {
            E::State(e) => match e {
                StateError::Io { .. } => "Io",
                StateError::Corrupt { .. } => "Corrupt",
                StateError::TooNew { .. } => "TooNew",
                StateError::Locked { .. } => "Locked",
                StateError::Key(_) => "Key",
                StateError::Remote { .. } => "Remote",
                StateError::NotS3 { .. } => "NotS3",
                StateError::Conflict { .. } => "Conflict",
                StateError::NotLocked => "NotLocked",
                StateError::LockMismatch { .. } => "LockMismatch",
            },
            E::Provider(e) => match e {
                ProviderError::Throttled { .. } => "Throttled",
                ProviderError::InUse { .. } => "InUse",
                ProviderError::NotFound { .. } => "NotFound",
                ProviderError::Timeout { .. } => "Timeout",
                ProviderError::Failed { .. } => "Failed",
            },
            E::Crypto(e) => match e {
                CryptoError::NotFips { .. } | CryptoError::Config { .. } => "Config",
                CryptoError::Module(_) => "Module",
                CryptoError::Random => "Random",
            },
            E::Stale(_) => "Stale",
            E::KeySources(_) => "KeySources",
            E::NoCluster(_) => "NoKubeconfig",
            E::Refused(_) | E::NotApproved { .. } => "NotApproved",
            E::BackendConfig { .. } => "BackendConfig",
            E::EncryptionMode(_) => "EncryptionMode",
            E::UnknownBackend(_) => "Backend",
            E::NonFipsBuild => "Build",
            E::NoBucket => "NoBucket",
            E::Read { .. } => "Read",
            E::NotAPlan { .. } => "NotAPlan",
            E::NotAnAddress { .. } => "Address",
            E::NotInSpec(_) => "NotInSpec",
            E::NotInState(_) => "NotInState",
            E::Remaining { .. } => "Remaining",
            E::Kubeconfig { .. } => "Kubeconfig",
            E::Issuer { .. } => "Issuer",
            E::Capacity { .. } => "Capacity",
            E::Cluster { .. } => "Cluster",
            E::Render(_) => "Render",
            E::Events(_) => "Events",
            E::NoKeys { .. } => "NoKeys",
            E::Pending { .. } => "Pending",
            E::RotationStopped { .. } => "Rotation",
            E::RotationUnderWay { .. } => "RotationUnderWay",
            E::NoNamespace => "NoNamespace",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reasons the controller gave before errors were typed: each code's last part, in
    /// CamelCase (`xcsp::state::locked` -> `Locked`). Kept, so alerts written on them still match.
    fn camel(code: &str) -> String {
        let last = code.rsplit("::").next().unwrap_or(code);
        last.split('_').map(|w| w[..1].to_uppercase() + &w[1..]).collect()
    }

    #[test]
    fn each_error_reads_as_the_reason_its_code_gave() {
        let a: Address = "aws_vpn_gateway.main".parse().unwrap();
        let problem = Problem::error("xcsp::cluster::no_kubeconfig", "no kubeconfig");
        let errors = vec![
            StackError::State(StateError::Locked {
                id: "1".into(),
                holder: "h".into(),
                process: "p".into(),
                operation: "apply".into(),
                since: "now".into(),
            }),
            StackError::State(StateError::NotLocked),
            StackError::State(StateError::Key("k".into())),
            StackError::State(StateError::Conflict { location: "l".into() }),
            StackError::Provider(ProviderError::Throttled {
                address: "a".into(),
                detail: "d".into(),
                retry_after: None,
            }),
            StackError::Provider(ProviderError::InUse { address: "a".into(), detail: "d".into() }),
            StackError::Provider(ProviderError::NotFound { address: "a".into() }),
            StackError::Provider(ProviderError::Failed { address: "a".into(), code: "c".into(), message: "m".into() }),
            StackError::Crypto(CryptoError::Random),
            StackError::Crypto(CryptoError::Module("m".into())),
            StackError::Stale(Stale::Spec),
            StackError::KeySources(KeySources { set: vec!["A".into(), "B".into()] }),
            StackError::NoCluster(problem.clone()),
            StackError::NotApproved { question: "q".into() },
            StackError::BackendConfig { pair: "p".into(), known: "k".into() },
            StackError::EncryptionMode("m".into()),
            StackError::UnknownBackend("b".into()),
            StackError::NonFipsBuild,
            StackError::NoBucket,
            StackError::NotAPlan { path: "p".into(), detail: "d".into() },
            StackError::NotAnAddress { text: "t".into(), detail: "d".into() },
            StackError::NotInSpec(a.clone()),
            StackError::NotInState(a.clone()),
            StackError::Remaining { remaining: vec![] },
            StackError::Kubeconfig { detail: "d".into(), from: "KUBECONFIG".into() },
            StackError::Issuer { problems: vec![problem.clone()] },
            StackError::Capacity { problems: vec![problem.clone()] },
            StackError::Cluster { problems: vec![problem] },
            StackError::Render("r".into()),
            StackError::Events("e".into()),
            StackError::NoKeys { link: None },
            StackError::Pending { pending: vec![] },
            StackError::RotationStopped { key: a, why: "w".into() },
            StackError::RotationUnderWay { link: "l".into(), keys: vec![] },
            StackError::NoNamespace,
        ];
        for e in errors {
            let code = e.code().expect("every error has a code").to_string();
            assert_eq!(e.reason(), camel(&code), "{e:?}");
        }
        // An approver's refusal in its own words is a refusal whatever its code.
        #[derive(Debug, thiserror::Error, Diagnostic)]
        #[error("cancelled")]
        #[diagnostic(code(xcsp::cli::cancelled))]
        struct Cancelled;
        let refused = StackError::refused(Cancelled);
        assert_eq!(refused.reason(), "NotApproved");
        assert_eq!(refused.code().unwrap().to_string(), "xcsp::cli::cancelled", "its own code is shown");
    }

    #[test]
    fn errors_name_what_and_where() {
        let e = StackError::Remaining { remaining: vec!["aws_vpn_gateway.main (vgw-1)".into()] };
        assert_eq!(e.to_string(), "1 resources tagged with the stack remain:\n  - aws_vpn_gateway.main (vgw-1)");
        let e = StackError::Read {
            what: "the plan",
            path: "p.json".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert!(e.to_string().starts_with("cannot read the plan p.json"), "{e}");
        assert_eq!(e.code().unwrap().to_string(), "xcsp::stack::read");
    }
}
