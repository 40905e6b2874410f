//! Resource addresses: `type.name` or `type.name[index]`, the one way xcsp names a resource.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::rtype::ResourceType;

/// Names one resource of a stack, e.g. `aws_vpn_connection.link[1]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Address {
    pub rtype: ResourceType,
    pub name: String,
    pub index: Option<u32>,
}

impl Address {
    pub fn new(rtype: ResourceType, name: impl Into<String>) -> Self {
        Address { rtype, name: name.into(), index: None }
    }

    pub fn indexed(rtype: ResourceType, name: impl Into<String>, index: u32) -> Self {
        Address { rtype, name: name.into(), index: Some(index) }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.rtype, self.name)?;
        if let Some(i) = self.index {
            write!(f, "[{i}]")?;
        }
        Ok(())
    }
}

/// Why a string is not an address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a resource address (expected TYPE.NAME or TYPE.NAME[INDEX])")]
pub struct AddressParseError(pub String);

impl FromStr for Address {
    type Err = AddressParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || AddressParseError(s.to_string());
        let (rtype, rest) = s.split_once('.').ok_or_else(err)?;
        let rtype: ResourceType = rtype.parse().map_err(|_| err())?;
        let (name, index) = match rest.split_once('[') {
            None => (rest, None),
            Some((name, idx)) => {
                let idx = idx.strip_suffix(']').ok_or_else(err)?;
                (name, Some(idx.parse::<u32>().map_err(|_| err())?))
            }
        };
        let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(err());
        }
        Ok(Address { rtype, name: name.to_string(), index })
    }
}

impl Serialize for Address {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Address {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_text() {
        for text in ["aws_vpn_connection.link[1]", "azure_virtual_network.link", "k8s_machine_set.gpu-a"] {
            let a: Address = text.parse().unwrap();
            assert_eq!(a.to_string(), text);
        }
    }

    #[test]
    fn rejects_malformed() {
        for text in [
            "aws_vpn_connection",
            "nope.link",
            "aws_vpn_connection.link[x]",
            "aws_vpn_connection.[1]",
            "aws_vpn_connection.a b",
        ] {
            assert!(text.parse::<Address>().is_err(), "{text} parsed");
        }
    }
}
