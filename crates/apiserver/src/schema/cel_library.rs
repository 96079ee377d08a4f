//! kube's CEL libraries (`k8s.io/apiserver/pkg/cel/library`) on the `cel` crate: what a
//! CRD rule or an admission policy may call on kube-apiserver 1.32 beyond CEL's standard
//! library and its strings extension — lists (`isSorted`, `sum`, `min`, `max`,
//! `indexOf`, `lastIndexOf`), sets (`sets.contains`, `equivalent`, `intersects`), regular
//! expressions (`find`, `findAll`), quantities (`quantity`, `isQuantity` and the
//! quantity's methods), URLs (`url`, `isURL`, the getters), IP addresses and CIDRs
//! (`ip`, `isIP`, `cidr`, `isCIDR` and their methods). Errors use kube's words.
//!
//! Must not know: schemas, rules or policies; only values.

use std::net::IpAddr;
use std::sync::Arc;

use cel::common::types::{CelBool, CelInt, DYN_TYPE, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::extractors::{Arguments, This};
use cel::objects::{Opaque, Value};
use cel::{Context, DeclarationError, Env, ExecutionError};
use steady_quota::Quantity;

/// Declare what the libraries add to functions the environment already has (lists'
/// `indexOf` and `lastIndexOf`, beside strings') and the `sets` namespace.
pub(super) fn extend(env: &mut Env) -> Result<(), DeclarationError> {
    let list_dyn = || vec![DYN_TYPE];
    env.add_member_overload(
        "indexOf",
        "list.indexOf(dyn)",
        LIST_TYPE,
        list_dyn(),
        list_index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list.lastIndexOf(dyn)",
        LIST_TYPE,
        list_dyn(),
        list_last_index_of,
    )?;
    let two_lists = || vec![LIST_TYPE, LIST_TYPE];
    env.add_overload(
        "sets.contains",
        "sets.contains(list,list)",
        two_lists(),
        sets_contains,
    )?;
    env.add_overload(
        "sets.equivalent",
        "sets.equivalent(list,list)",
        two_lists(),
        sets_equivalent,
    )?;
    env.add_overload(
        "sets.intersects",
        "sets.intersects(list,list)",
        two_lists(),
        sets_intersects,
    )
}

/// Register every function of the libraries on `context`.
pub(super) fn register(context: &mut Context<'_, '_>) {
    register_lists_and_regex(context);
    register_quantities(context);
    register_urls(context);
    register_addresses(context);
}

/// Log a function the context refused: a name the environment already declares (none of
/// these is), so the function would be missing.
pub(crate) fn declared(result: Result<(), DeclarationError>) {
    if let Err(e) = result {
        tracing::error!(error = ?e, "a kube CEL library function could not be declared");
    }
}

/// Lists' `isSorted`, `sum`, `min`, `max`; strings' `find`, `findAll`.
fn register_lists_and_regex(context: &mut Context<'_, '_>) {
    declared(context.add_function("isSorted", is_sorted));
    declared(context.add_function("sum", sum));
    declared(
        context.add_function("min", |This(list): This<Arc<Vec<Value>>>| {
            extreme(&list, "min", std::cmp::Ordering::Less)
        }),
    );
    declared(
        context.add_function("max", |This(list): This<Arc<Vec<Value>>>| {
            extreme(&list, "max", std::cmp::Ordering::Greater)
        }),
    );
    declared(context.add_function("find", find));
    declared(context.add_function("findAll", find_all));
}

/// `quantity`, `isQuantity` and the quantity's methods.
fn register_quantities(context: &mut Context<'_, '_>) {
    declared(context.add_function("quantity", quantity));
    declared(context.add_function("isQuantity", |text: Arc<String>| {
        Value::Bool(Quantity::parse(&text).is_ok())
    }));
    declared(context.add_function(
        "isGreaterThan",
        |This(a): This<Arc<dyn Opaque>>, b: Arc<dyn Opaque>| {
            Ok(Value::Bool(as_quantity(&a)? > as_quantity(&b)?))
        },
    ));
    declared(context.add_function(
        "isLessThan",
        |This(a): This<Arc<dyn Opaque>>, b: Arc<dyn Opaque>| {
            Ok(Value::Bool(as_quantity(&a)? < as_quantity(&b)?))
        },
    ));
    declared(context.add_function(
        "compareTo",
        |This(a): This<Arc<dyn Opaque>>, b: Arc<dyn Opaque>| {
            Ok(Value::Int(as_quantity(&a)?.cmp(as_quantity(&b)?) as i64))
        },
    ));
    declared(
        context.add_function("sign", |This(a): This<Arc<dyn Opaque>>| {
            let q = as_quantity(&a)?;
            Ok(Value::Int(match (q.is_zero(), q.is_negative()) {
                (true, _) => 0,
                (false, true) => -1,
                (false, false) => 1,
            }))
        }),
    );
    declared(
        context.add_function("isInteger", |This(a): This<Arc<dyn Opaque>>| {
            Ok(Value::Bool(as_quantity(&a)?.whole_units().is_some()))
        }),
    );
    declared(
        context.add_function("asInteger", |This(a): This<Arc<dyn Opaque>>| {
            as_quantity(&a)?
                .whole_units()
                .map(Value::Int)
                .ok_or_else(|| {
                    ExecutionError::function_error("asInteger", "cannot convert value to integer")
                })
        }),
    );
    declared(
        context.add_function("asApproximateFloat", |This(a): This<Arc<dyn Opaque>>| {
            Ok(Value::Float(as_quantity(&a)?.as_f64()))
        }),
    );
    declared(
        context.add_function("add", |This(a): This<Arc<dyn Opaque>>, b: Value| {
            Ok(wrap(CelQuantity(
                *as_quantity(&a)? + quantity_operand(&b, "add")?,
            )))
        }),
    );
    declared(
        context.add_function("sub", |This(a): This<Arc<dyn Opaque>>, b: Value| {
            Ok(wrap(CelQuantity(
                *as_quantity(&a)? - quantity_operand(&b, "sub")?,
            )))
        }),
    );
}

/// `url`, `isURL` and the URL's getters.
fn register_urls(context: &mut Context<'_, '_>) {
    declared(context.add_function("isURL", |text: Arc<String>| {
        Value::Bool(Url::parse(&text).is_some())
    }));
    declared(context.add_function("url", |text: Arc<String>| {
        Url::parse(&text)
            .map(wrap)
            .ok_or_else(|| ExecutionError::function_error("url", "URL is invalid"))
    }));
    declared(
        context.add_function("getScheme", |This(u): This<Arc<dyn Opaque>>| {
            url_part(&u, |u| u.scheme.clone())
        }),
    );
    declared(
        context.add_function("getHost", |This(u): This<Arc<dyn Opaque>>| {
            url_part(&u, |u| u.host.clone())
        }),
    );
    declared(
        context.add_function("getHostname", |This(u): This<Arc<dyn Opaque>>| {
            url_part(&u, Url::hostname)
        }),
    );
    declared(
        context.add_function("getPort", |This(u): This<Arc<dyn Opaque>>| {
            url_part(&u, Url::port)
        }),
    );
    declared(
        context.add_function("getEscapedPath", |This(u): This<Arc<dyn Opaque>>| {
            url_part(&u, |u| u.path.clone())
        }),
    );
}

/// `ip`, `isIP`, `cidr`, `isCIDR` and their methods.
fn register_addresses(context: &mut Context<'_, '_>) {
    declared(context.add_function("isIP", |text: Arc<String>| {
        Value::Bool(parse_ip(&text).is_some())
    }));
    declared(context.add_function("ip", ip));
    declared(
        context.add_function("family", |This(a): This<Arc<dyn Opaque>>| {
            Ok(Value::Int(match as_ip(&a)? {
                IpAddr::V4(_) => 4,
                IpAddr::V6(_) => 6,
            }))
        }),
    );
    declared(
        context.add_function("isLoopback", |This(a): This<Arc<dyn Opaque>>| {
            Ok(Value::Bool(as_ip(&a)?.is_loopback()))
        }),
    );
    declared(
        context.add_function("isUnspecified", |This(a): This<Arc<dyn Opaque>>| {
            Ok(Value::Bool(as_ip(&a)?.is_unspecified()))
        }),
    );
    declared(context.add_function("isCIDR", |text: Arc<String>| {
        Value::Bool(Cidr::parse(&text).is_some())
    }));
    declared(context.add_function("cidr", |text: Arc<String>| {
        Cidr::parse(&text)
            .map(wrap)
            .ok_or_else(|| ExecutionError::function_error("cidr", format!("network address parse error during conversion from string: invalid CIDR {text:?}")))
    }));
    declared(context.add_function("containsIP", contains_ip));
    declared(context.add_function("containsCIDR", contains_cidr));
    declared(
        context.add_function("masked", |This(c): This<Arc<dyn Opaque>>| {
            let cidr = as_cidr(&c)?;
            Ok(wrap(Cidr {
                address: cidr.masked_address(),
                prefix: cidr.prefix,
            }))
        }),
    );
    declared(
        context.add_function("prefixLength", |This(c): This<Arc<dyn Opaque>>| {
            Ok(Value::Int(i64::from(as_cidr(&c)?.prefix)))
        }),
    );
}

fn wrap<T: Opaque>(value: T) -> Value {
    Value::Opaque(Arc::new(value))
}

pub(crate) fn no_such_overload(function: &str) -> ExecutionError {
    ExecutionError::function_error(function, "no such overload")
}

/// `value` as the opaque type `T` a library function of `function` expects, or CEL's
/// "no such overload".
pub(crate) fn opaque<'v, T: Opaque>(
    value: &'v Value,
    function: &str,
) -> Result<&'v T, ExecutionError> {
    match value {
        Value::Opaque(o) => opaque_ref(o, function),
        _ => Err(no_such_overload(function)),
    }
}

fn opaque_ref<'v, T: Opaque>(
    value: &'v Arc<dyn Opaque>,
    function: &str,
) -> Result<&'v T, ExecutionError> {
    value
        .downcast_ref::<T>()
        .ok_or_else(|| no_such_overload(function))
}

// ---------------------------------------------------------------------------- lists

fn is_sorted(This(list): This<Arc<Vec<Value>>>) -> Result<Value, ExecutionError> {
    for pair in list.windows(2) {
        match pair[0].partial_cmp(&pair[1]) {
            Some(std::cmp::Ordering::Greater) => return Ok(Value::Bool(false)),
            Some(_) => {}
            None => return Err(no_such_overload("isSorted")),
        }
    }
    Ok(Value::Bool(true))
}

fn sum(This(list): This<Arc<Vec<Value>>>) -> Result<Value, ExecutionError> {
    let mut items = list.iter();
    let Some(first) = items.next() else {
        return Ok(Value::Int(0));
    };
    items.try_fold(first.clone(), |total, item| match (total, item) {
        (Value::Int(a), Value::Int(b)) => a
            .checked_add(*b)
            .map(Value::Int)
            .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow")),
        (Value::UInt(a), Value::UInt(b)) => a
            .checked_add(*b)
            .map(Value::UInt)
            .ok_or_else(|| ExecutionError::function_error("sum", "unsigned integer overflow")),
        (Value::Float(a), Value::Float(b)) => Ok(Value::Float(a + b)),
        (Value::Duration(a), Value::Duration(b)) => Ok(Value::Duration(a + *b)),
        _ => Err(no_such_overload("sum")),
    })
}

/// The least (`wanted: Less`) or greatest element: kube's `min()` and `max()`.
fn extreme(
    list: &[Value],
    name: &str,
    wanted: std::cmp::Ordering,
) -> Result<Value, ExecutionError> {
    let mut items = list.iter();
    let Some(mut best) = items.next() else {
        return Err(ExecutionError::function_error(
            name,
            format!("{name} called on empty list"),
        ));
    };
    for item in items {
        match item.partial_cmp(best) {
            Some(order) if order == wanted => best = item,
            Some(_) => {}
            None => return Err(no_such_overload(name)),
        }
    }
    Ok(best.clone())
}

fn elements<'a, 'v>(value: &'a CowVal<'_, 'v>) -> Result<&'a [Box<dyn Val + 'v>], ExecutionError> {
    <&[Box<dyn Val + 'v>]>::try_from(value.as_ref())
        .map_err(|_| ExecutionError::function_error("list", "no such overload"))
}

fn two<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<[CowVal<'b, 'v>; 2], ExecutionError> {
    args.try_into()
        .map_err(|args: Vec<_>| ExecutionError::invalid_argument_count(2, args.len()))
}

fn index_in<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    last: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, wanted] = two(args)?;
    let items = elements(&list)?;
    let mut equal = items.iter().map(|item| item.equals(wanted.as_ref()));
    let found = match last {
        false => equal.position(|same| same),
        true => equal.rposition(|same| same),
    };
    let index = found.map_or(-1, |i| i64::try_from(i).unwrap_or(i64::MAX));
    Ok(CowVal::owned(CelInt::from(index)))
}

fn list_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    index_in(args, false)
}

fn list_last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    index_in(args, true)
}

/// Whether every element of `subset` is in `set`.
fn holds_all(set: &[Box<dyn Val + '_>], subset: &[Box<dyn Val + '_>]) -> bool {
    subset
        .iter()
        .all(|wanted| set.iter().any(|item| item.equals(wanted.as_ref())))
}

fn sets_contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [set, subset] = two(args)?;
    let holds = holds_all(elements(&set)?, elements(&subset)?);
    Ok(CowVal::owned(CelBool::from(holds)))
}

fn sets_equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [a, b] = two(args)?;
    let (a, b) = (elements(&a)?, elements(&b)?);
    Ok(CowVal::owned(CelBool::from(
        holds_all(a, b) && holds_all(b, a),
    )))
}

fn sets_intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [a, b] = two(args)?;
    let (a, b) = (elements(&a)?, elements(&b)?);
    let shared = a
        .iter()
        .any(|item| b.iter().any(|other| item.equals(other.as_ref())));
    Ok(CowVal::owned(CelBool::from(shared)))
}

// ---------------------------------------------------------------------------- regex

fn compiled(pattern: &str, function: &str) -> Result<regex::Regex, ExecutionError> {
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| ExecutionError::function_error(function, e))
}

fn find(This(text): This<Arc<String>>, pattern: Arc<String>) -> Result<Value, ExecutionError> {
    let regex = compiled(&pattern, "find")?;
    Ok(Value::from(regex.find(&text).map_or("", |m| m.as_str())))
}

/// `findAll(pattern)`, or `findAll(pattern, n)`: at most `n` matches (all when negative).
fn find_all(
    This(text): This<Arc<String>>,
    Arguments(args): Arguments,
) -> Result<Value, ExecutionError> {
    let (pattern, limit) = match args.as_slice() {
        [Value::String(p)] => (p, -1),
        [Value::String(p), Value::Int(n)] => (p, *n),
        _ => return Err(no_such_overload("findAll")),
    };
    let regex = compiled(pattern, "findAll")?;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let found: Vec<Value> = regex
        .find_iter(&text)
        .take(limit)
        .map(|m| Value::from(m.as_str()))
        .collect();
    Ok(Value::List(Arc::new(found)))
}

// ---------------------------------------------------------------------------- quantities

/// A `resource.Quantity` in CEL (`kubernetes.Quantity`).
#[derive(Debug, PartialEq, Eq)]
struct CelQuantity(Quantity);

impl Opaque for CelQuantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

fn quantity(text: Arc<String>) -> Result<Value, ExecutionError> {
    Quantity::parse(&text)
        .map(|q| wrap(CelQuantity(q)))
        .map_err(|_| ExecutionError::function_error("quantity", "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
}

fn as_quantity(value: &Arc<dyn Opaque>) -> Result<&Quantity, ExecutionError> {
    opaque_ref::<CelQuantity>(value, "quantity").map(|q| &q.0)
}

/// The other operand of a quantity's `add` or `sub`: a quantity or an integer.
fn quantity_operand(value: &Value, function: &str) -> Result<Quantity, ExecutionError> {
    match value {
        Value::Int(units) => Ok(Quantity::from_units(*units)),
        Value::Opaque(q) => as_quantity(q).copied(),
        _ => Err(no_such_overload(function)),
    }
}

// ---------------------------------------------------------------------------- URLs

/// A URL as Go's `url.ParseRequestURI` reads it (kube's `url()`): an absolute URL or an
/// absolute path.
#[derive(Debug, PartialEq, Eq)]
struct Url {
    scheme: String,
    host: String,
    path: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.URL"
    }
}

impl Url {
    fn parse(text: &str) -> Option<Url> {
        if text.contains(|c: char| c.is_ascii_control() || c == ' ') {
            return None;
        }
        if text.starts_with('/') {
            let path = text.split(['?', '#']).next().unwrap_or("");
            return Some(Url {
                scheme: String::new(),
                host: String::new(),
                path: path.to_string(),
            });
        }
        let (scheme, rest) = text.split_once(':')?;
        let mut chars = scheme.chars();
        let scheme_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
        if !scheme_ok {
            return None;
        }
        let rest = rest.split(['?', '#']).next().unwrap_or("");
        let (host, path) = match rest.strip_prefix("//") {
            Some(authority) => {
                let end = authority.find('/').unwrap_or(authority.len());
                let host = authority[..end].rsplit('@').next().unwrap_or("");
                (host.to_string(), authority[end..].to_string())
            }
            None => (String::new(), rest.to_string()),
        };
        Some(Url {
            scheme: scheme.to_string(),
            host,
            path,
        })
    }

    /// The host without its port (an IPv6 literal without its brackets).
    fn hostname(&self) -> String {
        match self.host.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or("").to_string(),
            None => self.host.split(':').next().unwrap_or("").to_string(),
        }
    }

    fn port(&self) -> String {
        let after_host = match self.host.strip_prefix('[') {
            Some(v6) => v6.split_once(']').map_or("", |(_, rest)| rest),
            None => self.host.split_once(':').map_or("", |(_, port)| port),
        };
        after_host.trim_start_matches(':').to_string()
    }
}

fn url_part(
    value: &Arc<dyn Opaque>,
    part: impl Fn(&Url) -> String,
) -> Result<Value, ExecutionError> {
    opaque_ref::<Url>(value, "url").map(|url| Value::from(part(url)))
}

// ---------------------------------------------------------------------------- IPs, CIDRs

/// An address as kube's `ip()` accepts it: no IPv4-mapped IPv6 form, no zone.
fn parse_ip(text: &str) -> Option<IpAddr> {
    let ip: IpAddr = text.parse().ok()?;
    match ip {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() && text.contains('.') => None,
        ip => Some(ip),
    }
}

#[derive(Debug, PartialEq, Eq)]
struct CelIp(IpAddr);

impl Opaque for CelIp {
    fn runtime_type_name(&self) -> &str {
        "net.IP"
    }
}

/// `ip(string)`, or `cidr.ip()`.
fn ip(This(value): This<Value>) -> Result<Value, ExecutionError> {
    match value {
        Value::String(text) => parse_ip(&text).map(|ip| wrap(CelIp(ip))).ok_or_else(|| {
            ExecutionError::function_error(
                "ip",
                format!("IP Address {text:?} parse error during conversion from string: ParseAddr({text:?}): unable to parse IP"),
            )
        }),
        // `cidr.ip()`: the CIDR's address.
        Value::Opaque(c) => Ok(wrap(CelIp(as_cidr(&c)?.address))),
        _ => Err(no_such_overload("ip")),
    }
}

fn as_ip(value: &Arc<dyn Opaque>) -> Result<IpAddr, ExecutionError> {
    opaque_ref::<CelIp>(value, "ip").map(|ip| ip.0)
}

#[derive(Debug, PartialEq, Eq)]
struct Cidr {
    address: IpAddr,
    prefix: u8,
}

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        "net.IPPrefix"
    }
}

impl Cidr {
    fn parse(text: &str) -> Option<Cidr> {
        let (address, prefix) = text.split_once('/')?;
        let address = parse_ip(address)?;
        let prefix: u8 = prefix.parse().ok()?;
        let bits = match address {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        (prefix <= bits).then_some(Cidr { address, prefix })
    }

    /// The address with the bits past the prefix cleared.
    fn masked_address(&self) -> IpAddr {
        let keep = |bits: u8, value: u128| {
            let cleared = u32::from(bits - self.prefix);
            value
                .checked_shr(cleared)
                .unwrap_or(0)
                .checked_shl(cleared)
                .unwrap_or(0)
        };
        match self.address {
            IpAddr::V4(v4) => {
                let kept = keep(32, u128::from(u32::from(v4)));
                IpAddr::V4(u32::try_from(kept).unwrap_or(0).into())
            }
            IpAddr::V6(v6) => IpAddr::V6(keep(128, u128::from(v6)).into()),
        }
    }

    fn contains(&self, ip: IpAddr) -> bool {
        match (self.address, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => same_prefix(
                u128::from(u32::from(net)),
                u128::from(u32::from(ip)),
                self.prefix,
                32,
            ),
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                same_prefix(u128::from(net), u128::from(ip), self.prefix, 128)
            }
            _ => false,
        }
    }
}

fn same_prefix(a: u128, b: u128, prefix: u8, bits: u8) -> bool {
    let shift = u32::from(bits - prefix);
    (a.checked_shr(shift).unwrap_or(0)) == (b.checked_shr(shift).unwrap_or(0))
}

fn as_cidr(value: &Arc<dyn Opaque>) -> Result<&Cidr, ExecutionError> {
    opaque_ref(value, "cidr")
}

/// `cidr.containsIP(ip or string)`.
fn contains_ip(This(c): This<Arc<dyn Opaque>>, other: Value) -> Result<Value, ExecutionError> {
    let cidr = as_cidr(&c)?;
    let ip = match other {
        Value::String(text) => parse_ip(&text).ok_or_else(|| no_such_overload("containsIP"))?,
        Value::Opaque(ip) => as_ip(&ip)?,
        _ => return Err(no_such_overload("containsIP")),
    };
    Ok(Value::Bool(cidr.contains(ip)))
}

/// `cidr.containsCIDR(cidr or string)`: every address of the other is in this one.
fn contains_cidr(This(c): This<Arc<dyn Opaque>>, other: Value) -> Result<Value, ExecutionError> {
    let cidr = as_cidr(&c)?;
    let inner = match other {
        Value::String(text) => {
            Cidr::parse(&text).ok_or_else(|| no_such_overload("containsCIDR"))?
        }
        Value::Opaque(o) => {
            let c = as_cidr(&o)?;
            Cidr {
                address: c.address,
                prefix: c.prefix,
            }
        }
        _ => return Err(no_such_overload("containsCIDR")),
    };
    Ok(Value::Bool(
        inner.prefix >= cidr.prefix && cidr.contains(inner.address),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::schema::{Expression, new_context, plain_value};

    fn evaluate(source: &str) -> Result<cel::Value, String> {
        let mut context = new_context();
        let object =
            json!({"spec": {"memory": "512Mi", "endpoint": "https://cache.example.com:6379"}});
        context.add_variable_from_value("object", plain_value(&object));
        Expression::compile(source).evaluate(&context, 10)
    }

    #[test]
    fn kubes_library_functions_answer_as_kube_documents_them() {
        let holds = [
            "[1, 2, 2].isSorted() && !['b', 'a'].isSorted()",
            "[1, 2].sum() == 3 && [1.5, 2.0].sum() == 3.5 && [].sum() == 0",
            "[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3",
            "'abc123'.find('[0-9]+') == '123' && 'abc'.find('[0-9]') == ''",
            "'a1b2c3'.findAll('[0-9]') == ['1', '2', '3'] && 'a1b2c3'.findAll('[0-9]', 2) == ['1', '2']",
            "isQuantity('1.5Gi') && !isQuantity('1.5 Gi')",
            "quantity(object.spec.memory).isLessThan(quantity('1Gi'))",
            "quantity('1').compareTo(quantity('1000m')) == 0 && quantity('1') == quantity('1000m')",
            "quantity('2Gi').asInteger() == 2147483648 && !quantity('1.5').isInteger()",
            "quantity('1Gi').add(quantity('1Gi')) == quantity('2Gi') && quantity('1').sub(1).sign() == 0",
            "quantity('500m').asApproximateFloat() == 0.5 && quantity('-1').sign() == -1",
            "isURL(object.spec.endpoint) && isURL('/healthz') && !isURL('cache:6379 x')",
            "url(object.spec.endpoint).getScheme() == 'https' && url(object.spec.endpoint).getHostname() == 'cache.example.com'",
            "url(object.spec.endpoint).getPort() == '6379' && url('https://[::1]:80/a').getHostname() == '::1'",
            "url('https://x.io/a/b?q=1').getEscapedPath() == '/a/b' && url('https://x.io').getHost() == 'x.io'",
            "isIP('10.0.0.1') && isIP('::1') && !isIP('::ffff:1.2.3.4') && !isIP('10.0.0.256')",
            "ip('10.0.0.1').family() == 4 && ip('::1').isLoopback() && ip('0.0.0.0').isUnspecified()",
            "isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0/33')",
            "cidr('10.0.0.0/8').containsIP('10.1.2.3') && !cidr('10.0.0.0/8').containsIP(ip('11.0.0.1'))",
            "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && !cidr('10.1.0.0/16').containsCIDR('10.0.0.0/8')",
            "cidr('10.1.2.3/8').masked() == cidr('10.0.0.0/8') && cidr('10.0.0.0/8').prefixLength() == 8",
            "cidr('fd00::/8').ip().family() == 6",
            "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2 && ['a'].indexOf('b') == -1",
            "'abcb'.indexOf('b') == 1 && 'abcb'.lastIndexOf('b') == 3",
            "sets.contains([1, 2, 3], [3, 1]) && !sets.contains([1], [2])",
            "sets.equivalent([1, 2], [2, 1, 1]) && !sets.equivalent([1], [1, 2])",
            "sets.intersects([1, 2], [2, 3]) && !sets.intersects([1], [])",
        ];
        for source in holds {
            assert_eq!(evaluate(source), Ok(cel::Value::Bool(true)), "{source}");
        }
    }

    #[test]
    fn misuse_is_an_error_in_kubes_words() {
        assert_eq!(
            evaluate("[].min() == 1"),
            Err("Error executing function 'min': min called on empty list".into())
        );
        let bad_quantity = evaluate("quantity('1 Gi').sign() == 1").expect_err("refused");
        assert!(
            bad_quantity.contains("quantities must match the regular expression"),
            "{bad_quantity}"
        );
        assert!(evaluate("quantity('1.5').asInteger() == 1").is_err());
        assert!(evaluate("url('cache:6379 x').getHost() == ''").is_err());
    }
}
