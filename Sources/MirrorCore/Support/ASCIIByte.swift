extension UInt8 {
    /// An ASCII capital letter as its small letter, any other byte as it is (`| 0x20` alone
    /// would also turn a CR, 0x0D, into a hyphen, 0x2D).
    var asciiLowercased: UInt8 {
        (0x41...0x5A).contains(self) ? self | 0x20 : self
    }
}
