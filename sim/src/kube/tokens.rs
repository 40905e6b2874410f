//! Kubernetes' service-account tokens controller (kubernetes/kubernetes
//! `pkg/controller/serviceaccount/tokens_controller.go`, `syncSecret`) for the Secrets of type
//! `kubernetes.io/service-account-token`: one naming an existing service account
//! (`kubernetes.io/service-account.name`) gets `token`, `ca.crt` and `namespace` and the account's
//! uid (`kubernetes.io/service-account.uid`); one whose account does not exist, or no longer has
//! that uid, is deleted. It runs lazily with the other controllers ([`Store::settle`]). The API
//! does not authenticate the tokens it issues (sim/README.md, "Not held yet").

use base64::Engine as _;
use serde_json::{Value, json};

use super::store::{Key, Store};
use crate::world::World;

pub const TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
pub const NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
pub const UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";

impl Store {
    pub fn settle_tokens(&mut self, world: &World) {
        let secrets: Vec<(Key, Value)> = self
            .objects
            .iter()
            .filter(|(k, o)| k.0.is_empty() && k.1 == "secrets" && o.value["type"] == TOKEN_TYPE)
            .map(|(k, o)| (k.clone(), o.value.clone()))
            .collect();
        for (key, secret) in secrets {
            let annotations = &secret["metadata"]["annotations"];
            let account = annotations[NAME_ANNOTATION].as_str().unwrap_or_default();
            let sa_uid = self.value("", "serviceaccounts", &key.2, account).map(|sa| sa["metadata"]["uid"].clone());
            let want_uid = annotations[UID_ANNOTATION].as_str();
            match sa_uid {
                None => self.remove(&key, world),
                Some(uid) if want_uid.is_some_and(|w| uid != w) => self.remove(&key, world),
                Some(_) if secret["data"].get("token").is_some() => {}
                Some(uid) => {
                    let Some(mut obj) = self.objects.get(&key).cloned() else { continue };
                    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
                    let token = format!("xcsp-sim-sa-{}", uuid::Uuid::new_v4().simple());
                    obj.value["metadata"]["annotations"][UID_ANNOTATION] = uid;
                    let data = &mut obj.value["data"];
                    if !data.is_object() {
                        *data = json!({});
                    }
                    data["token"] = json!(b64(&token));
                    data["ca.crt"] = json!(b64(&self.ca_pem));
                    data["namespace"] = json!(b64(&key.2));
                    self.store(obj);
                    world.journal("kubernetes", "tokens-controller", &format!("{}/{}", key.2, key.3));
                }
            }
        }
    }
}
