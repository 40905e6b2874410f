//! Label selectors as `labelSelector=` spells them: `k=v`, `k==v`, `k!=v`, `k`, `!k`,
//! `k in (a,b)`, `k notin (a,b)`, joined by commas (all must hold).

use serde_json::Value;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed label selector (empty: matches everything).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    /// Parses `s`; the error is the API server's complaint about it.
    pub fn parse(s: &str) -> Result<Selector, String> {
        let mut out = Vec::new();
        for term in split_terms(s) {
            let t = term.trim();
            if t.is_empty() {
                continue;
            }
            let req = if let Some(k) = t.strip_prefix('!') {
                Requirement::NotExists(key(k)?)
            } else if let Some((k, v)) = t.split_once("!=") {
                Requirement::NotEquals(key(k)?, v.trim().to_string())
            } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                Requirement::Equals(key(k)?, v.trim().to_string())
            } else if let Some((k, rest)) = split_word(t, " notin ") {
                Requirement::NotIn(key(k)?, values(rest)?)
            } else if let Some((k, rest)) = split_word(t, " in ") {
                Requirement::In(key(k)?, values(rest)?)
            } else {
                Requirement::Exists(key(t)?)
            };
            out.push(req);
        }
        Ok(Selector(out))
    }

    /// True when `labels` (an object of strings, or null) satisfies every requirement.
    pub fn matches(&self, labels: &Value) -> bool {
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
        })
    }
}

fn split_terms(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn split_word<'a>(t: &'a str, word: &str) -> Option<(&'a str, &'a str)> {
    t.find(word).map(|i| (&t[..i], &t[i + word.len()..]))
}

fn key(k: &str) -> Result<String, String> {
    let k = k.trim();
    let ok = !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok { Ok(k.to_string()) } else { Err(format!("unable to parse requirement: invalid label key \"{k}\"")) }
}

fn values(rest: &str) -> Result<Vec<String>, String> {
    let r = rest.trim();
    let inner = r
        .strip_prefix('(')
        .and_then(|x| x.strip_suffix(')'))
        .ok_or_else(|| format!("unable to parse requirement: expected a (list) of values, got \"{r}\""))?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_operator_selects_what_it_says() {
        let l = json!({"pool": "gpu", "zone": "1"});
        let yes = [
            "pool=gpu",
            "pool==gpu",
            "pool!=cpu",
            "pool",
            "!owner",
            "zone in (1,2)",
            "zone notin (3)",
            "pool=gpu,zone",
        ];
        let no = ["pool=cpu", "pool!=gpu", "owner", "!pool", "zone in (2,3)", "zone notin (1)", "pool=gpu,zone=2"];
        for s in yes {
            assert!(Selector::parse(s).unwrap().matches(&l), "{s}");
        }
        for s in no {
            assert!(!Selector::parse(s).unwrap().matches(&l), "{s}");
        }
        assert!(Selector::parse("bad key=1").is_err());
    }
}
