//! `resource.Quantity`: kube's fixed-point numbers with suffixes (`500m`, `1.5Gi`, `2e3`),
//! parsed as kube-apiserver parses them and written back in kube's canonical form, which
//! is what a client reads after it wrote `1000m` (`1`) or `0.5` (`500m`).

use std::cmp::Ordering;
use std::fmt;

/// kube's `ErrFormatWrong` regular expression, quoted in its error.
pub const QUANTITY_PATTERN: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/// Nano-units in one unit: kube rounds every quantity up to nano precision.
const NANOS: i128 = 1_000_000_000;
/// The largest exponent of ten with an SI suffix (`E`).
const MAX_SI_EXPONENT: i32 = 18;

/// Why a string is not a quantity, worded as kube's errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantities must match the regular expression '{QUANTITY_PATTERN}'")]
    FormatWrong,
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// kube keeps arbitrary precision; steady keeps 128 bits of nano-units (±1.7e29).
    #[error("quantity is too large")]
    TooLarge,
}

/// How a quantity is written back: the family of the suffix it was given with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// `n u m "" k M G T P E`.
    #[default]
    DecimalSI,
    /// `Ki Mi Gi Ti Pi Ei`.
    BinarySI,
    /// `e<n>` or `E<n>`.
    DecimalExponent,
}

/// A quantity: its value in nano-units (rounded away from zero, as kube rounds) and the
/// format it prints in.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Quantity {
    /// A whole number of units, printed as a decimal SI quantity (`resource.NewQuantity`).
    pub fn from_units(units: i64) -> Self {
        Quantity {
            nanos: i128::from(units) * NANOS,
            format: Format::DecimalSI,
        }
    }

    /// Zero, printed in `format`.
    pub fn zero(format: Format) -> Self {
        Quantity { nanos: 0, format }
    }

    /// Parse as `resource.ParseQuantity`; surrounding blanks are ignored, as its JSON
    /// decoding ignores them.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(QuantityError::FormatWrong);
        }
        let (negative, rest) = match text.as_bytes()[0] {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let whole_end = digits_end(rest, 0);
        let (fraction, suffix_start) = match rest.as_bytes().get(whole_end) {
            Some(b'.') => {
                let end = digits_end(rest, whole_end + 1);
                (&rest[whole_end + 1..end], end)
            }
            _ => ("", whole_end),
        };
        let whole = &rest[..whole_end];
        let suffix = &rest[suffix_start..];
        check_suffix_shape(suffix)?;
        let (base, exponent, format) = interpret_suffix(suffix)?;
        let magnitude = magnitude_in_nanos(whole, fraction, base, exponent)?;
        let format = match format {
            // kube prints a binary quantity below one unit in decimal SI
            Format::BinarySI if magnitude < NANOS => Format::DecimalSI,
            other => other,
        };
        Ok(Quantity {
            nanos: if negative { -magnitude } else { magnitude },
            format,
        })
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// The value as a float, for ratios.
    pub fn as_f64(&self) -> f64 {
        self.nanos as f64 / NANOS as f64
    }

    /// Whether the quantity is a whole number of units.
    pub fn is_whole(&self) -> bool {
        self.nanos % NANOS == 0
    }

    /// The quantity as a whole number of units, if it is one that fits an `i64`.
    pub fn whole_units(&self) -> Option<i64> {
        if !self.is_whole() {
            return None;
        }
        i64::try_from(self.nanos / NANOS).ok()
    }

    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// Rounded up to a whole number of units (kube's `RoundUp(0)`), away from zero.
    pub fn round_up_to_units(self) -> Quantity {
        self.round_up_to_multiple_of(NANOS)
    }

    /// Rounded up to a whole number of thousandths (kube's `RoundUp(-3)`, which
    /// `SetDefaults_ResourceList` gives every quantity of a resource list), away from zero.
    pub fn round_up_to_milli(self) -> Quantity {
        self.round_up_to_multiple_of(NANOS / 1000)
    }

    fn round_up_to_multiple_of(self, step: i128) -> Quantity {
        let part = self.nanos % step;
        if part == 0 {
            return self;
        }
        Quantity {
            nanos: self.nanos - part + part.signum() * step,
            format: self.format,
        }
    }

    /// Write kube's canonical form (`CanonicalizeBytes`): the shortest integer mantissa
    /// with a suffix of the quantity's format; binary only for whole numbers of at least
    /// 1024.
    pub fn write_canonical(&self, out: &mut impl fmt::Write) -> fmt::Result {
        if self.nanos == 0 {
            return out.write_str("0");
        }
        let whole_units = self.nanos % NANOS == 0;
        if self.format == Format::BinarySI && whole_units && self.nanos.abs() >= 1024 * NANOS {
            return write_binary(self.nanos / NANOS, out);
        }
        let format = match self.format {
            Format::BinarySI => Format::DecimalSI,
            other => other,
        };
        write_decimal(self.nanos, format, out)
    }
}

impl Quantity {
    /// The format a result takes, as kube's `Add` and `Sub`: the left operand's, unless
    /// it is zero (a usage starting from `0` prints as what was added: `512Mi`).
    fn result_format(self, other: Quantity) -> Format {
        if self.nanos == 0 {
            other.format
        } else {
            self.format
        }
    }
}

/// The sum (kube's `Quantity.Add`). Saturates far beyond any quantity a cluster holds.
impl std::ops::Add for Quantity {
    type Output = Quantity;

    fn add(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(other.nanos),
            format: self.result_format(other),
        }
    }
}

/// The difference (kube's `Quantity.Sub`).
impl std::ops::Sub for Quantity {
    type Output = Quantity;

    fn sub(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_sub(other.nanos),
            format: self.result_format(other),
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_canonical(f)
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Quantity::parse(text)
    }
}

fn digits_end(text: &str, from: usize) -> usize {
    text.as_bytes()[from..]
        .iter()
        .position(|b| !b.is_ascii_digit())
        .map_or(text.len(), |i| from + i)
}

/// kube's scan of a suffix: letters of `eEinumkKMGTP`, then an optional sign and digits;
/// anything else is the wrong format.
fn check_suffix_shape(suffix: &str) -> Result<(), QuantityError> {
    let letters = suffix
        .bytes()
        .take_while(|b| b"eEinumkKMGTP".contains(b))
        .count();
    let rest = &suffix.as_bytes()[letters..];
    let rest = match rest.first() {
        Some(b'+' | b'-') => &rest[1..],
        _ => rest,
    };
    if rest.iter().all(u8::is_ascii_digit) {
        Ok(())
    } else {
        Err(QuantityError::FormatWrong)
    }
}

/// (base, exponent, format) of a suffix: `Mi` is 2^20, `M` 10^6, `e3` 10^3.
fn interpret_suffix(suffix: &str) -> Result<(u32, i32, Format), QuantityError> {
    let decimal = |exponent| Ok((10, exponent, Format::DecimalSI));
    let binary = |exponent| Ok((2, exponent, Format::BinarySI));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            let exponent = suffix
                .strip_prefix(['e', 'E'])
                .filter(|e| !e.is_empty())
                .and_then(|e| e.parse::<i32>().ok())
                .ok_or(QuantityError::Suffix)?;
            Ok((10, exponent, Format::DecimalExponent))
        }
    }
}

/// `whole.fraction × base^exponent` in nano-units, rounded up.
fn magnitude_in_nanos(
    whole: &str,
    fraction: &str,
    base: u32,
    exponent: i32,
) -> Result<i128, QuantityError> {
    let whole = whole.trim_start_matches('0');
    let fraction = fraction.trim_end_matches('0');
    // the digits as an integer `mantissa × 10^scale`
    let mut mantissa: i128 = 0;
    for digit in whole.bytes().chain(fraction.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(digit - b'0')))
            .ok_or(QuantityError::TooLarge)?;
    }
    if mantissa == 0 {
        return Ok(0);
    }
    let mut scale = -i32::try_from(fraction.len()).map_err(|_| QuantityError::TooLarge)?;
    if base == 10 {
        scale = scale.saturating_add(exponent);
    } else {
        mantissa = mantissa
            .checked_mul(1i128 << exponent)
            .ok_or(QuantityError::TooLarge)?;
    }
    scaled_to_nanos(mantissa, scale.saturating_add(9))
}

/// `mantissa × 10^shift`, rounding a fraction up to the next integer.
fn scaled_to_nanos(mantissa: i128, shift: i32) -> Result<i128, QuantityError> {
    if shift >= 0 {
        let factor = 10i128
            .checked_pow(shift.unsigned_abs())
            .ok_or(QuantityError::TooLarge)?;
        mantissa.checked_mul(factor).ok_or(QuantityError::TooLarge)
    } else {
        match 10i128.checked_pow(shift.unsigned_abs()) {
            Some(divisor) => Ok(mantissa / divisor + i128::from(mantissa % divisor != 0)),
            // smaller than any nano-unit: kube rounds it up to one
            None => Ok(1),
        }
    }
}

/// The mantissa's digits: as an `i64` where it fits (every real quantity), whose
/// formatting is cheaper.
fn write_mantissa(mantissa: i128, out: &mut impl fmt::Write) -> fmt::Result {
    match i64::try_from(mantissa) {
        Ok(small) => write!(out, "{small}"),
        Err(_) => write!(out, "{mantissa}"),
    }
}

fn write_decimal(nanos: i128, format: Format, out: &mut impl fmt::Write) -> fmt::Result {
    let (mut mantissa, mut exponent) = (nanos, -9i32);
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exponent += 1;
    }
    while exponent.rem_euclid(3) != 0 {
        mantissa *= 10;
        exponent -= 1;
    }
    if format == Format::DecimalExponent {
        write_mantissa(mantissa, out)?;
        return match exponent {
            0 => Ok(()),
            _ => write!(out, "e{exponent}"),
        };
    }
    while exponent > MAX_SI_EXPONENT {
        mantissa *= 1000;
        exponent -= 3;
    }
    let suffix = match exponent {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => "",
    };
    write_mantissa(mantissa, out)?;
    out.write_str(suffix)
}

fn write_binary(units: i128, out: &mut impl fmt::Write) -> fmt::Result {
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut mantissa = units;
    let mut power = 0;
    while power < SUFFIXES.len() - 1 && mantissa % 1024 == 0 {
        mantissa /= 1024;
        power += 1;
    }
    write_mantissa(mantissa, out)?;
    out.write_str(SUFFIXES[power])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> String {
        Quantity::parse(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .to_string()
    }

    #[test]
    fn canonical_forms_are_kubes() {
        for (given, canonical_form) in [
            ("0", "0"),
            ("0m", "0"),
            ("-0", "0"),
            ("1000m", "1"),
            ("1500m", "1500m"),
            ("0.5", "500m"),
            (".5", "500m"),
            ("1.", "1"),
            ("100", "100"),
            ("1000", "1k"),
            ("2000", "2k"),
            ("100000", "100k"),
            ("1024", "1024"),
            ("12e6", "12e6"),
            ("1e3", "1e3"),
            ("1E3", "1e3"),
            ("1.5e3", "1500"),
            ("1E", "1E"),
            ("1Gi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("1024Mi", "1Gi"),
            ("1000Mi", "1000Mi"),
            ("0.5Ki", "512"),
            ("1023", "1023"),
            ("0.1Ki", "102400m"),
            ("Gi", "0"),
            ("1Ki", "1Ki"),
            ("500Mi", "500Mi"),
            ("128974848", "128974848"),
            ("129e6", "129e6"),
            ("129M", "129M"),
            ("123Mi", "123Mi"),
            ("1n", "1n"),
            ("0.1n", "1n"),
            ("1.0000000001", "1000000001n"),
            ("-1.5", "-1500m"),
            ("+3", "3"),
            ("  2  ", "2"),
            ("007", "7"),
            ("1u", "1u"),
        ] {
            assert_eq!(canonical(given), canonical_form, "{given}");
        }
    }

    #[test]
    fn malformed_quantities_are_refused_with_kubes_errors() {
        for bad in ["", "abc", "1.5.5", "1 Gi", "1Gx", "1e3e"] {
            let err = Quantity::parse(bad).map(|q| q.to_string());
            assert!(err.is_err(), "{bad:?} parsed as {err:?}");
        }
        assert_eq!(
            Quantity::parse("1Q"),
            Err(QuantityError::FormatWrong),
            "a letter outside the suffix alphabet"
        );
        assert_eq!(Quantity::parse("1K"), Err(QuantityError::Suffix));
        assert_eq!(Quantity::parse("1e99999"), Err(QuantityError::TooLarge));
        assert_eq!(
            Quantity::parse("1e2147483647"),
            Err(QuantityError::TooLarge)
        );
        assert_eq!(Quantity::parse("1e99999999999"), Err(QuantityError::Suffix));
        assert_eq!(
            Quantity::parse("1e-2147483648").map(|q| q.to_string()),
            Ok("1e-9".into())
        );
        assert_eq!(Quantity::parse("1e"), Err(QuantityError::Suffix));
        assert_eq!(Quantity::parse("1mi"), Err(QuantityError::Suffix));
        assert!(
            QuantityError::FormatWrong
                .to_string()
                .contains("'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
        );
    }

    #[test]
    fn arithmetic_keeps_the_first_format_and_compares_by_value() {
        let sum = Quantity::parse("1Gi")
            .and_then(|a| Ok(a + Quantity::parse("512Mi")?))
            .map(|q| q.to_string());
        assert_eq!(sum, Ok("1536Mi".to_string()));
        let cpu = Quantity::parse("100m").map(|a| a + Quantity::from_units(1));
        assert_eq!(cpu.map(|q| q.to_string()), Ok("1100m".to_string()));
        let memory = Quantity::parse("0").and_then(|zero| Ok(zero + Quantity::parse("512Mi")?));
        assert_eq!(memory.map(|q| q.to_string()), Ok("512Mi".to_string()));
        assert_eq!(Quantity::parse("1"), Quantity::parse("1000m"));
        assert!(Quantity::parse("1Ki").ok() > Quantity::parse("1k").ok());
        assert_eq!(
            (Quantity::from_units(1) - Quantity::from_units(3)).to_string(),
            "-2"
        );
    }
}
