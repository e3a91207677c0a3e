/// Arithmetic that stops at the type's bounds instead of trapping, for numbers that come from
/// outside the binary: a server's Content-Length, a file's size or time, a manifest value. Two
/// entries of `Content-Length: 9223372036854775807` add up to "as much as can be counted", never
/// to a crash.
extension FixedWidthInteger {
    /// `self + other`, or the nearest bound when that does not fit.
    public func saturatingAdding(_ other: Self) -> Self {
        let (sum, overflow) = addingReportingOverflow(other)
        guard overflow else { return sum }
        return other > 0 ? .max : .min
    }

    /// `self - other`, or the nearest bound when that does not fit.
    public func saturatingSubtracting(_ other: Self) -> Self {
        let (difference, overflow) = subtractingReportingOverflow(other)
        guard overflow else { return difference }
        return other > 0 ? .min : .max
    }

    /// `self * other`, or the nearest bound when that does not fit.
    public func saturatingMultiplied(by other: Self) -> Self {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        guard overflow else { return product }
        return (self < 0) == (other < 0) ? .max : .min
    }

    /// `value` rounded towards zero, clamped to the type's range; NaN gives 0.
    public init(saturating value: Double) {
        if value.isNaN {
            self = 0
        } else if value >= Double(Self.max) {
            // Double(Self.max) rounds up to 2^63 for Int64, which itself does not fit.
            self = .max
        } else if value <= Double(Self.min) {
            self = .min
        } else {
            self.init(value)
        }
    }
}

extension Sequence where Element: FixedWidthInteger {
    /// The sum of the elements, held at the bounds rather than overflowing.
    public func saturatingSum() -> Element {
        reduce(0) { $0.saturatingAdding($1) }
    }
}
