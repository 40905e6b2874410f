//! How one resource names another: the kind test and the reference check every rule shares
//! (a leaf, so the rules and the kinds they judge never import each other).

use super::error::ArmError;
use super::kinds::Kind;
use super::store::{Resource, Store};

pub(super) fn is(kind: &Kind, other: &'static Kind) -> bool {
    std::ptr::eq(kind, other)
}

pub fn resolve<'s>(store: &'s Store, reference: &str, by: &str, kind: &'static Kind) -> Result<&'s Resource, ArmError> {
    match store.get(reference) {
        Some(r) if matches!(r.kind, super::store::ResKind::Typed(k) if std::ptr::eq(k, kind)) => Ok(r),
        _ => Err(ArmError::bad_request(
            "InvalidResourceReference",
            format!(
                "Resource {reference} referenced by resource {by} was not found. Please make sure that the referenced resource exists, and that both resources are in the same region."
            ),
        )),
    }
}
