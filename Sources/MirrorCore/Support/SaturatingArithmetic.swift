/// Arithmetic on numbers that come from outside the binary (a server's lengths, a file's
/// dates, a manifest's limits): at the ends of the range it stops there instead of trapping.
extension FixedWidthInteger {
    /// `self + other`, or the nearest bound when the sum does not fit.
    public func saturatingAdding(_ other: Self) -> Self {
        let (sum, overflow) = addingReportingOverflow(other)
        guard overflow else { return sum }
        return other > 0 ? .max : .min
    }

    /// `self - other`, or the nearest bound when the difference does not fit.
    public func saturatingSubtracting(_ other: Self) -> Self {
        let (difference, overflow) = subtractingReportingOverflow(other)
        guard overflow else { return difference }
        return other > 0 ? .min : .max
    }

    /// `self * other`, or the nearest bound when the product does not fit.
    public func saturatingMultiplied(by other: Self) -> Self {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        guard overflow else { return product }
        return (self < 0) == (other < 0) ? .max : .min
    }
}
