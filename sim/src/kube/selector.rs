//! Label selectors as `labelSelector=` spells them, parsed with the grammar and the complaints of
//! apimachinery's `labels.Parse` (v0.31): `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`,
//! `k notin (a,b)`, `k>1`, `k<1`, joined by commas (all must hold); keys and values obey the label
//! rules of [`super::meta`]. Rule rows: `sim/README.md`, "Rule table (Kubernetes)".

use super::meta;
use serde_json::Value;
use std::collections::BTreeSet;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Equals,
    NotEquals,
    Exists,
    NotExists,
    In,
    NotIn,
    Greater,
    Less,
}

/// One requirement of a selector: key, operator, values (sorted, without repeats).
#[derive(Debug, Clone, PartialEq)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

/// A parsed label selector (empty: matches everything).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    /// Parses `s`; the error is the API server's complaint about it (answered 400 BadRequest).
    pub fn parse(s: &str) -> Result<Selector, String> {
        Parser { tokens: lex(s), at: 0 }.selector().map(Selector)
    }

    /// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions` with `In`, `NotIn`,
    /// `Exists`, `DoesNotExist`), as apimachinery's `LabelSelectorAsSelector` reads one. `None` for
    /// a null or empty selector, which callers treat as their API says (all or nothing); the error
    /// names a malformed requirement.
    pub fn from_label_selector(sel: &Value) -> Result<Option<Selector>, String> {
        let mut reqs = Vec::new();
        if let Some(m) = sel["matchLabels"].as_object() {
            for (k, v) in m {
                let v = v.as_str().unwrap_or_default().to_string();
                reqs.push(Requirement { key: k.clone(), op: Op::In, values: vec![v] });
            }
        }
        for e in sel["matchExpressions"].as_array().into_iter().flatten() {
            let key = e["key"].as_str().unwrap_or_default().to_string();
            let values: BTreeSet<String> =
                e["values"].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(String::from)).collect();
            let op = match e["operator"].as_str().unwrap_or_default() {
                "In" => Op::In,
                "NotIn" => Op::NotIn,
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::NotExists,
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            let needs_values = matches!(op, Op::In | Op::NotIn);
            if needs_values == values.is_empty() {
                return Err(format!("values: Invalid value: {values:?}: for operator {op:?}"));
            }
            reqs.push(Requirement { key, op, values: values.into_iter().collect() });
        }
        Ok(if reqs.is_empty() { None } else { Some(Selector(reqs)) })
    }

    /// True when `labels` (an object of strings, or null) satisfies every requirement.
    pub fn matches(&self, labels: &Value) -> bool {
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| {
            let has = |x: &str| r.values.iter().any(|v| v == x);
            let number = |x: &str| x.parse::<i64>().ok();
            match r.op {
                Op::Equals | Op::In => get(&r.key).is_some_and(has),
                Op::NotEquals | Op::NotIn => get(&r.key).is_none_or(|x| !has(x)),
                Op::Exists => get(&r.key).is_some(),
                Op::NotExists => get(&r.key).is_none(),
                Op::Greater | Op::Less => {
                    let (Some(got), Some(want)) =
                        (get(&r.key).and_then(number), r.values.first().and_then(|v| number(v)))
                    else {
                        return false;
                    };
                    if r.op == Op::Greater { got > want } else { got < want }
                }
            }
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Tok {
    Ident,
    Bang,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
    In,
    NotIn,
    Open,
    Close,
    Comma,
    End,
    Error,
}

fn symbol(s: &str) -> Option<Tok> {
    Some(match s {
        "!" => Tok::Bang,
        "=" => Tok::Eq,
        "==" => Tok::DoubleEq,
        "!=" => Tok::NotEq,
        ">" => Tok::Gt,
        "<" => Tok::Lt,
        "(" => Tok::Open,
        ")" => Tok::Close,
        "," => Tok::Comma,
        _ => return None,
    })
}

fn is_symbol_char(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits a selector into tokens and their text; the last is always `End` (text "").
fn lex(s: &str) -> Vec<(Tok, String)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\r' | b'\n') {
            i += 1;
        }
        if i >= b.len() {
            out.push((Tok::End, String::new()));
            return out;
        }
        let start = i;
        if is_symbol_char(b[i]) {
            // The longest run of symbol characters that is an operator; one more that spoils it stops.
            let mut best: Option<(Tok, usize)> = None;
            while i < b.len() && is_symbol_char(b[i]) {
                i += 1;
                match symbol(&s[start..i]) {
                    Some(t) => best = Some((t, i)),
                    None if best.is_some() => break,
                    None => {}
                }
            }
            match best {
                Some((t, end)) => {
                    out.push((t, s[start..end].to_string()));
                    i = end;
                }
                None => out.push((Tok::Error, format!("error expected: keyword found '{}'", &s[start..i]))),
            }
        } else {
            while i < b.len() && !is_symbol_char(b[i]) && !matches!(b[i], b' ' | b'\t' | b'\r' | b'\n') {
                i += 1;
            }
            let word = &s[start..i];
            let t = match word {
                "in" => Tok::In,
                "notin" => Tok::NotIn,
                _ => Tok::Ident,
            };
            out.push((t, word.to_string()));
        }
    }
}

struct Parser {
    tokens: Vec<(Tok, String)>,
    at: usize,
}

impl Parser {
    /// The next token; where values are expected, `in` and `notin` are plain words.
    fn peek(&self, values: bool) -> (Tok, String) {
        let (t, s) = self.tokens[self.at.min(self.tokens.len() - 1)].clone();
        match t {
            Tok::In | Tok::NotIn if values => (Tok::Ident, s),
            _ => (t, s),
        }
    }

    fn next(&mut self, values: bool) -> (Tok, String) {
        let t = self.peek(values);
        self.at += 1;
        t
    }

    fn selector(&mut self) -> Result<Vec<Requirement>, String> {
        let mut out = Vec::new();
        loop {
            let (t, text) = self.peek(true);
            match t {
                Tok::Ident | Tok::Bang => {
                    out.push(self.requirement().map_err(|e| format!("unable to parse requirement: {e}"))?);
                    let (t, text) = self.next(true);
                    match t {
                        Tok::End => return Ok(out),
                        Tok::Comma => {
                            let (t2, text2) = self.peek(true);
                            if !matches!(t2, Tok::Ident | Tok::Bang) {
                                return Err(format!("found '{text2}', expected: identifier after ','"));
                            }
                        }
                        _ => return Err(format!("found '{text}', expected: ',' or 'end of string'")),
                    }
                }
                Tok::End => return Ok(out),
                _ => return Err(format!("found '{text}', expected: !, identifier, or 'end of string'")),
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let (mut t, mut key) = self.next(true);
        let mut op = None;
        if t == Tok::Bang {
            op = Some(Op::NotExists);
            (t, key) = self.next(true);
        }
        if t != Tok::Ident {
            return Err(format!("found '{key}', expected: identifier"));
        }
        let errs = meta::qualified_name_errors(&key);
        if !errs.is_empty() {
            // apimachinery reports this with no field path, which prints as "<nil>".
            return Err(format!("<nil>: Invalid value: {}: {}", meta::go_quote(&key), errs.join("; ")));
        }
        if matches!(self.peek(true).0, Tok::End | Tok::Comma) && op.is_none() {
            op = Some(Op::Exists);
        }
        if let Some(op) = op {
            return Ok(Requirement { key, op, values: Vec::new() });
        }
        let (t, text) = self.next(false);
        let op = match t {
            Tok::In => Op::In,
            Tok::NotIn => Op::NotIn,
            Tok::Eq | Tok::DoubleEq => Op::Equals,
            Tok::NotEq => Op::NotEquals,
            Tok::Gt => Op::Greater,
            Tok::Lt => Op::Less,
            _ => return Err(format!("found '{text}', expected: in, notin, =, ==, !=, gt, lt")),
        };
        let values = if matches!(op, Op::In | Op::NotIn) { self.value_set()? } else { self.exact_value()? };
        let values: Vec<String> = values.into_iter().collect();
        let mut errs: Vec<String> = Vec::new();
        for (i, v) in values.iter().enumerate() {
            if matches!(op, Op::Greater | Op::Less) && v.parse::<i64>().is_err() {
                errs.push(format!(
                    "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                    meta::go_quote(v)
                ));
            }
        }
        for (i, v) in values.iter().enumerate() {
            let problems = meta::label_value_errors(v);
            if !problems.is_empty() {
                errs.push(format!("values[{i}][{key}]: Invalid value: {}: {}", meta::go_quote(v), problems.join("; ")));
            }
        }
        errs.dedup();
        match errs.len() {
            0 => Ok(Requirement { key, op, values }),
            1 => Err(errs.remove(0)),
            _ => Err(format!("[{}]", errs.join(", "))),
        }
    }

    /// `(a,b,...)`; empty entries are the empty value.
    fn value_set(&mut self) -> Result<BTreeSet<String>, String> {
        let (t, text) = self.next(true);
        if t != Tok::Open {
            return Err(format!("found '{text}' expected: '('"));
        }
        let (t, text) = self.peek(true);
        match t {
            Tok::Ident | Tok::Comma => {
                let set = self.value_list()?;
                if self.next(true).0 != Tok::Close {
                    // apimachinery names the token after '(' here, not the one it found.
                    return Err(format!("found '{text}', expected: ')'"));
                }
                Ok(set)
            }
            Tok::Close => {
                self.next(true);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(format!("found '{text}', expected: ',', ')' or identifier")),
        }
    }

    fn value_list(&mut self) -> Result<BTreeSet<String>, String> {
        let mut set = BTreeSet::new();
        loop {
            let (t, text) = self.next(true);
            match t {
                Tok::Ident => {
                    set.insert(text);
                    let (t2, text2) = self.peek(true);
                    match t2 {
                        Tok::Comma => continue,
                        Tok::Close => return Ok(set),
                        _ => return Err(format!("found '{text2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    match self.peek(true).0 {
                        Tok::Close => {
                            set.insert(String::new());
                            return Ok(set);
                        }
                        Tok::Comma => {
                            self.next(true);
                            set.insert(String::new());
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{text}', expected: ',', or identifier")),
            }
        }
    }

    /// The one value after `=`, `==`, `!=`, `>`, `<` (empty when none follows).
    fn exact_value(&mut self) -> Result<BTreeSet<String>, String> {
        if matches!(self.peek(true).0, Tok::End | Tok::Comma) {
            return Ok(BTreeSet::from([String::new()]));
        }
        match self.next(true) {
            (Tok::Ident, text) => Ok(BTreeSet::from([text])),
            (_, text) => Err(format!("found '{text}', expected: identifier")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_operator_selects_what_it_says() {
        let l = json!({"pool": "gpu", "zone": "1", "in": "notin"});
        let yes = [
            "pool=gpu",
            "pool==gpu",
            "pool!=cpu",
            "pool",
            "!owner",
            "zone in (1,2)",
            "zone notin (3)",
            "pool=gpu,zone",
            " pool = gpu , zone>0 ",
            "zone<2",
            "in=notin",
            "pool!=",
            "pool in (,gpu)",
        ];
        let no = [
            "pool=cpu",
            "pool!=gpu",
            "owner",
            "!pool",
            "zone in (2,3)",
            "zone notin (1)",
            "pool=gpu,zone=2",
            "zone>1",
            "pool>1",
            "owner=",
            "owner in (,x)",
        ];
        for s in yes {
            assert!(Selector::parse(s).unwrap().matches(&l), "{s}");
        }
        for s in no {
            assert!(!Selector::parse(s).unwrap().matches(&l), "{s}");
        }
    }

    #[test]
    fn malformed_selectors_get_apimachinerys_complaints() {
        let err = |s: &str| Selector::parse(s).unwrap_err();
        assert_eq!(err("pool=gpu)"), "found ')', expected: ',' or 'end of string'");
        assert_eq!(err("=gpu"), "found '=', expected: !, identifier, or 'end of string'");
        assert_eq!(err("pool=gpu,"), "found '', expected: identifier after ','");
        assert_eq!(err("pool in (a"), "unable to parse requirement: found '', expected: ',' or ')'");
        assert_eq!(err("pool in a"), "unable to parse requirement: found 'a' expected: '('");
        assert_eq!(err("pool x"), "unable to parse requirement: found 'x', expected: in, notin, =, ==, !=, gt, lt");
        assert_eq!(err("pool=(a)"), "unable to parse requirement: found '(', expected: identifier");
        assert!(err("-pool").starts_with("unable to parse requirement: <nil>: Invalid value: \"-pool\": name part"));
        assert!(err("pool=-gpu").starts_with("unable to parse requirement: values[0][pool]: Invalid value: \"-gpu\""));
        assert_eq!(
            err("zone>a"),
            "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must \
             be an integer"
        );
        assert!(err("pool in (-a,-b)").starts_with("unable to parse requirement: [values[0][pool]: Invalid"));
    }
}
