/// HTTP dates (RFC 9110 §5.6.7) in the preferred IMF-fixdate form,
/// `Sun, 06 Nov 1994 08:49:37 GMT`, as seconds since the epoch.
enum HTTPDate {
    private static let months: [[UInt8]] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"].map { Array($0.utf8) }

    static func parse(_ text: String) -> Int? {
        var text = text
        return text.withUTF8(parse)
    }

    /// Read on the bytes, since a Last-Modified is parsed for every file downloaded.
    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        // "Sun," "06" "Nov" "1994" "08:49:37" "GMT", separated by runs of spaces.
        var fields: [Range<Int>] = []
        fields.reserveCapacity(6)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: " ") { index += 1; continue }
            let start = index
            while index < bytes.count, bytes[index] != UInt8(ascii: " ") { index += 1 }
            guard fields.count < 6 else { return nil }
            fields.append(start..<index)
        }
        guard fields.count == 6, bytes[fields[0].upperBound - 1] == UInt8(ascii: ","),
              bytes[fields[5]].elementsEqual("GMT".utf8),
              let day = number(bytes[fields[1]]), let monthIndex = months.firstIndex(where: { bytes[fields[2]].elementsEqual($0) }),
              let year = number(bytes[fields[3]]), (1..<32).contains(day), year >= 1970
        else { return nil }
        let clock = bytes[fields[4]].split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        guard clock.count == 3, let hour = number(clock[0]), let minute = number(clock[1]), let second = number(clock[2]),
              (0..<24).contains(hour), (0..<60).contains(minute), (0..<61).contains(second)
        else { return nil }
        let days = daysFromCivil(year: year, month: monthIndex + 1, day: day)
        return days * 86_400 + hour * 3_600 + minute * 60 + second
    }

    /// A run of 1 to 9 ASCII digits.
    private static func number(_ digits: Slice<UnsafeBufferPointer<UInt8>>) -> Int? {
        guard (1...9).contains(digits.count) else { return nil }
        var value = 0
        for digit in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) else { return nil }
            value = value * 10 + Int(digit - UInt8(ascii: "0"))
        }
        return value
    }

    private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]

    /// `seconds` since the epoch as an IMF-fixdate; nil for a time before 1970 or past year
    /// 9999, which the form cannot hold (and `parse` would not take back).
    static func format(_ seconds: Int64) -> String? {
        guard seconds >= 0, seconds < 253_402_300_800 else { return nil }
        let days = Int(seconds / 86_400), clock = Int(seconds % 86_400)
        let (year, month, day) = civilFromDays(days)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let monthName = String(decoding: months[month - 1], as: UTF8.self)
        return "\(weekdays[days % 7]), \(two(day)) \(monthName) \(year) \(two(clock / 3_600)):\(two(clock / 60 % 60)):\(two(clock % 60)) GMT"
    }

    /// The inverse of `daysFromCivil`, for days on or after 1970-01-01.
    private static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let shifted = days + 719_468
        let era = shifted / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Days since 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
