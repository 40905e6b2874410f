//! The EC2 query protocol: form parameters in, XML out.
//!
//! Requests are `application/x-www-form-urlencoded` POSTs with `Action`, `Version` and flattened
//! lists (`VpnGatewayId.1`, `Filter.1.Name`, `Filter.1.Value.1`, `TagSpecification.1.Tag.1.Key`).
//! Responses are XML in the `http://ec2.amazonaws.com/doc/2016-11-15/` namespace; errors are
//! `<Response><Errors><Error><Code>..</Code><Message>..</Message></Error></Errors>` with 4xx/5xx
//! (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html).

use std::collections::BTreeMap;

/// One request's parameters.
#[derive(Debug, Clone, Default)]
pub struct Params(pub BTreeMap<String, String>);

impl Params {
    pub fn parse(body: &[u8]) -> Params {
        Params(serde_urlencoded::from_bytes::<Vec<(String, String)>>(body).unwrap_or_default().into_iter().collect())
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn action(&self) -> &str {
        self.get("Action").unwrap_or_default()
    }

    /// `Prefix.1`, `Prefix.2`, ... in order.
    pub fn list(&self, prefix: &str) -> Vec<String> {
        (1..).map_while(|i| self.get(&format!("{prefix}.{i}")).map(String::from)).collect()
    }

    /// The sub-parameters of each `Prefix.N` (`Prefix.1.Key` -> {Key}).
    pub fn members(&self, prefix: &str) -> Vec<Params> {
        let mut out = Vec::new();
        for i in 1.. {
            let head = format!("{prefix}.{i}.");
            let m: BTreeMap<String, String> =
                self.0.iter().filter_map(|(k, v)| k.strip_prefix(&head).map(|r| (r.to_string(), v.clone()))).collect();
            if m.is_empty() {
                break;
            }
            out.push(Params(m));
        }
        out
    }

    /// Filters: name -> accepted values.
    pub fn filters(&self) -> Vec<(String, Vec<String>)> {
        self.members("Filter").into_iter().filter_map(|f| Some((f.get("Name")?.to_string(), f.list("Value")))).collect()
    }

    /// Tags from `TagSpecification.N` for a resource type (or any type when None).
    pub fn tag_specs(&self) -> Vec<(String, String)> {
        self.members("TagSpecification")
            .into_iter()
            .flat_map(|spec| {
                spec.members("Tag")
                    .into_iter()
                    .filter_map(|t| Some((t.get("Key")?.to_string(), t.get("Value").unwrap_or_default().to_string())))
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A small XML writer for EC2 responses.
#[derive(Default)]
pub struct Xml(pub String);

impl Xml {
    pub fn leaf(&mut self, name: &str, value: impl std::fmt::Display) -> &mut Self {
        self.0.push_str(&format!("<{name}>{}</{name}>", escape(&value.to_string())));
        self
    }

    pub fn open(&mut self, name: &str) -> &mut Self {
        self.0.push_str(&format!("<{name}>"));
        self
    }

    pub fn close(&mut self, name: &str) -> &mut Self {
        self.0.push_str(&format!("</{name}>"));
        self
    }

    pub fn tags(&mut self, tags: &[(String, String)]) -> &mut Self {
        self.open("tagSet");
        for (k, v) in tags {
            self.open("item").leaf("key", k).leaf("value", v).close("item");
        }
        self.close("tagSet")
    }

    /// `<name><item><value>v</value></item>...</name>`
    pub fn values(&mut self, name: &str, values: &[String]) -> &mut Self {
        self.open(name);
        for v in values {
            self.open("item").leaf("value", v).close("item");
        }
        self.close(name)
    }
}

pub const NAMESPACE: &str = "http://ec2.amazonaws.com/doc/2016-11-15/";

/// A successful response document for `action`.
pub fn response(action: &str, request_id: &str, inner: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<{action}Response xmlns=\"{NAMESPACE}\"><requestId>{request_id}</requestId>{inner}</{action}Response>"
    )
}

/// An EC2 error: status, code, message.
#[derive(Debug, Clone)]
pub struct Ec2Error {
    pub status: u16,
    pub code: String,
    pub message: String,
}

impl Ec2Error {
    pub fn new(status: u16, code: &str, message: impl Into<String>) -> Ec2Error {
        Ec2Error { status, code: code.to_string(), message: message.into() }
    }

    pub fn bad(code: &str, message: impl Into<String>) -> Ec2Error {
        Ec2Error::new(400, code, message)
    }

    pub fn body(&self, request_id: &str) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{}</Code><Message>{}</Message></Error></Errors><RequestID>{request_id}</RequestID></Response>",
            escape(&self.code),
            escape(&self.message)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattened_lists_and_filters() {
        let p = Params::parse(
            b"Action=DescribeVpnGateways&VpnGatewayId.1=vgw-1&VpnGatewayId.2=vgw-2&Filter.1.Name=tag%3Axcsp.io%2Fstack&Filter.1.Value.1=il5&TagSpecification.1.ResourceType=vpn-gateway&TagSpecification.1.Tag.1.Key=a&TagSpecification.1.Tag.1.Value=b",
        );
        assert_eq!(p.action(), "DescribeVpnGateways");
        assert_eq!(p.list("VpnGatewayId"), vec!["vgw-1", "vgw-2"]);
        assert_eq!(p.filters(), vec![("tag:xcsp.io/stack".to_string(), vec!["il5".to_string()])]);
        assert_eq!(p.tag_specs(), vec![("a".to_string(), "b".to_string())]);
    }
}
