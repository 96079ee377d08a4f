//! `ResourceList` arithmetic as kube's `quota/v1` helpers do it: by resource name, the
//! first operand's format kept, names missing from one side left as they are.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as WireQuantity;

use crate::quantity::Quantity;

/// Quantities by resource name (`requests.cpu`, `pods`, `count/secrets`).
pub type ResourceList = BTreeMap<String, Quantity>;

/// A wire `ResourceList`, its quantities parsed; an unparsable one counts as zero (the
/// API server refused it on write, so only a foreign object can hold one).
pub fn parse(wire: Option<&BTreeMap<String, WireQuantity>>) -> ResourceList {
    wire.into_iter()
        .flatten()
        .map(|(name, q)| (name.clone(), Quantity::parse(&q.0).unwrap_or_default()))
        .collect()
}

/// The wire form: every quantity in its canonical string.
pub fn to_wire(list: &ResourceList) -> BTreeMap<String, WireQuantity> {
    list.iter()
        .map(|(name, q)| (name.clone(), WireQuantity(q.to_string())))
        .collect()
}

/// `a + b` (kube's `quota.Add`).
pub fn add(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut sum = a.clone();
    for (name, quantity) in b {
        sum.entry(name.clone())
            .and_modify(|q| *q = *q + *quantity)
            .or_insert(*quantity);
    }
    sum
}

/// `a - b` where each difference is floored at zero, for names of `a`
/// (`quota.SubtractWithNonNegativeResult`).
pub fn subtract_non_negative(a: &ResourceList, b: &ResourceList) -> ResourceList {
    a.iter()
        .map(|(name, q)| {
            let difference = match b.get(name) {
                Some(other) => *q - *other,
                None => *q,
            };
            let floored = if difference.is_negative() {
                Quantity::zero(q.format())
            } else {
                difference
            };
            (name.clone(), floored)
        })
        .collect()
}

/// The entries of `list` whose names are in `names` (`quota.Mask`).
pub fn mask<'a>(list: &ResourceList, names: impl IntoIterator<Item = &'a String>) -> ResourceList {
    names
        .into_iter()
        .filter_map(|name| list.get(name).map(|q| (name.clone(), *q)))
        .collect()
}

/// The names of `a` whose quantity exceeds `b`'s (`quota.LessThanOrEqual`'s second result);
/// names `b` lacks are not limited.
pub fn exceeding(a: &ResourceList, b: &ResourceList) -> Vec<String> {
    a.iter()
        .filter(|(name, q)| b.get(*name).is_some_and(|limit| *q > limit))
        .map(|(name, _)| name.clone())
        .collect()
}

/// `name=value,...` sorted by name (the admission plugin's `prettyPrint`).
pub fn pretty(list: &ResourceList) -> String {
    list.iter()
        .map(|(name, q)| format!("{name}={q}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether both hold the same names with equal values (`quota.Equals`).
pub fn equal(a: &ResourceList, b: &ResourceList) -> bool {
    a.len() == b.len() && a.iter().all(|(name, q)| b.get(name) == Some(q))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[(&str, &str)]) -> ResourceList {
        entries
            .iter()
            .map(|(n, q)| (n.to_string(), Quantity::parse(q).expect("quantity")))
            .collect()
    }

    #[test]
    fn lists_add_mask_and_compare_by_name() {
        let used = list(&[("pods", "1"), ("requests.cpu", "500m")]);
        let asked = list(&[("requests.cpu", "1"), ("limits.cpu", "2")]);
        let sum = add(&used, &asked);
        assert_eq!(pretty(&sum), "limits.cpu=2,pods=1,requests.cpu=1500m");
        let hard = list(&[("pods", "10"), ("requests.cpu", "1")]);
        assert_eq!(exceeding(&sum, &hard), vec!["requests.cpu".to_string()]);
        let names = ["requests.cpu".to_string()];
        assert_eq!(pretty(&mask(&sum, &names)), "requests.cpu=1500m");
        let delta = subtract_non_negative(&asked, &list(&[("requests.cpu", "2")]));
        assert_eq!(pretty(&delta), "limits.cpu=2,requests.cpu=0");
        assert!(equal(&list(&[("pods", "1000m")]), &list(&[("pods", "1")])));
    }
}
