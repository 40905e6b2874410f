//! Why an operation on a stack stopped, for what this crate finds itself (the other crates' errors
//! travel as their own diagnostics).

use std::path::PathBuf;

use miette::Diagnostic;
use xcsp_core::Address;
use xcsp_core::diag::Problem;

#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum StackError {
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

#[cfg(test)]
mod tests {
    use super::*;

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
