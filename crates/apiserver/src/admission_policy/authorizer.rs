//! The `authorizer` an admission policy's expressions read (kube's CEL authz library): a
//! check of what the writer — or a named service account — may do, answered by steady's
//! RBAC as a SubjectAccessReview would be.
//!
//! ```text
//! authorizer.group('apps').resource('deployments').namespace('ns').name('web').check('scale').allowed()
//! authorizer.requestResource.subresource('status').check('update').reason()
//! authorizer.serviceAccount('ns', 'builder').path('/healthz').check('get').allowed()
//! ```
//!
//! `authorizer` is a map holding `requestResource` (the write's own resource, name and
//! namespace) beside the checker itself, since CEL selects fields only from maps.

use std::collections::HashMap;
use std::sync::Arc;

use cel::extractors::This;
use cel::objects::{Opaque, Value};
use cel::{Context, ExecutionError};

use crate::ApiServer;
use crate::auth::Identity;
use crate::rbac::{Access, Target, allowed_by};
use crate::schema::{declared, no_such_overload, opaque};

/// The key of the checker inside the `authorizer` map; not a CEL identifier, so no
/// expression selects it by accident.
const CHECKER: &str = "@checker";

/// Who the checks are made for.
#[derive(Clone)]
struct Checker {
    server: ApiServer,
    identity: Identity,
}

impl std::fmt::Debug for Checker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("user", &self.identity.user)
            .finish()
    }
}

impl PartialEq for Checker {
    fn eq(&self, other: &Self) -> bool {
        self.identity == other.identity
    }
}

impl Eq for Checker {}

impl Opaque for Checker {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.Authorizer"
    }
}

/// A check being built: a resource (group, resource, subresource, namespace, name) or a
/// non-resource path.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Check {
    group: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
    path: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Bound {
    checker: Checker,
    check: Check,
}

impl Opaque for Bound {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.ResourceCheck"
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Decision {
    /// Why RBAC allowed it, when it did.
    allowed: Option<String>,
}

impl Opaque for Decision {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.Decision"
    }
}

/// The `authorizer` variable for a write by `identity` to `request`'s resource.
pub(super) fn variable(server: &ApiServer, identity: &Identity, request: Check) -> Value {
    let checker = Checker {
        server: server.clone(),
        identity: identity.clone(),
    };
    let requested = Bound {
        checker: checker.clone(),
        check: request,
    };
    let fields: HashMap<String, Value> = HashMap::from([
        (CHECKER.to_string(), Value::Opaque(Arc::new(checker))),
        (
            "requestResource".to_string(),
            Value::Opaque(Arc::new(requested)),
        ),
    ]);
    Value::from(fields)
}

/// The resource a write is to, as `authorizer.requestResource` starts from it.
pub(super) fn request_check(
    group: &str,
    resource: &str,
    subresource: &str,
    namespace: &str,
    name: &str,
) -> Check {
    Check {
        group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        namespace: namespace.into(),
        name: name.into(),
        path: None,
    }
}

fn checker_of(value: &Value, function: &str) -> Result<Checker, ExecutionError> {
    match value {
        Value::Map(map) => map
            .get(&cel::objects::Key::from(CHECKER))
            .ok_or_else(|| no_such_overload(function))
            .and_then(|checker| opaque::<Checker>(checker, function).cloned()),
        other => opaque::<Checker>(other, function).cloned(),
    }
}

fn wrap(bound: Bound) -> Value {
    Value::Opaque(Arc::new(bound))
}

/// Sets one attribute of a check.
type SetAttribute = fn(&mut Check, String);

/// A check's field set: `group` starts a resource check from the authorizer, the others
/// refine one.
fn refine(
    This(this): This<Value>,
    value: Arc<String>,
    function: &str,
    set: SetAttribute,
) -> Result<Value, ExecutionError> {
    let mut bound = match opaque::<Bound>(&this, function).cloned() {
        Ok(bound) => bound,
        Err(_) if function == "group" => Bound {
            checker: checker_of(&this, function)?,
            check: Check::default(),
        },
        Err(e) => return Err(e),
    };
    set(&mut bound.check, value.to_string());
    Ok(wrap(bound))
}

/// Register the authorizer's functions on `context`.
pub(super) fn register(context: &mut Context<'_, '_>) {
    // Each sets one attribute of the check (`group` starts one from the authorizer).
    let attributes: [(&'static str, SetAttribute); 5] = [
        ("group", |c, v| c.group = v),
        ("resource", |c, v| c.resource = v),
        ("subresource", |c, v| c.subresource = v),
        ("namespace", |c, v| c.namespace = v),
        ("name", |c, v| c.name = v),
    ];
    for (attribute, set) in attributes {
        declared(
            context.add_function(attribute, move |this: This<Value>, value: Arc<String>| {
                refine(this, value, attribute, set)
            }),
        );
    }
    declared(
        context.add_function("path", |This(this): This<Value>, path: Arc<String>| {
            let checker = checker_of(&this, "path")?;
            let check = Check {
                path: Some(path.to_string()),
                ..Check::default()
            };
            Ok::<_, ExecutionError>(wrap(Bound { checker, check }))
        }),
    );
    declared(context.add_function(
        "serviceAccount",
        |This(this): This<Value>, namespace: Arc<String>, name: Arc<String>| {
            let checker = checker_of(&this, "serviceAccount")?;
            let account = Checker {
                identity: Identity::service_account(&namespace, &name, None),
                server: checker.server,
            };
            Ok::<_, ExecutionError>(Value::Opaque(Arc::new(account)))
        },
    ));
    declared(
        context.add_function("check", |This(this): This<Value>, verb: Arc<String>| {
            let bound = opaque::<Bound>(&this, "check")?;
            Ok::<_, ExecutionError>(Value::Opaque(Arc::new(decide(bound, &verb))))
        }),
    );
    declared(context.add_function("allowed", |This(this): This<Value>| {
        Ok::<_, ExecutionError>(Value::Bool(
            opaque::<Decision>(&this, "allowed")?.allowed.is_some(),
        ))
    }));
    declared(context.add_function("reason", |This(this): This<Value>| {
        Ok::<_, ExecutionError>(Value::from(
            opaque::<Decision>(&this, "reason")?
                .allowed
                .clone()
                .unwrap_or_default(),
        ))
    }));
    declared(context.add_function("errored", |This(this): This<Value>| {
        opaque::<Decision>(&this, "errored").map(|_| Value::Bool(false))
    }));
    declared(context.add_function("error", |This(this): This<Value>| {
        opaque::<Decision>(&this, "error").map(|_| Value::from(""))
    }));
}

/// RBAC's answer, as a SubjectAccessReview of the same attributes gets it.
fn decide(bound: &Bound, verb: &str) -> Decision {
    let Bound { checker, check } = bound;
    if checker.identity.is_master() {
        return Decision {
            allowed: Some(String::new()),
        };
    }
    let target = Target {
        group: &check.group,
        resource: &check.resource,
        subresource: &check.subresource,
        name: &check.name,
        namespace: &check.namespace,
        path: check.path.as_deref(),
    };
    Decision {
        allowed: allowed_by(
            &checker.server,
            &Access::of(&checker.identity, verb, target),
        ),
    }
}
