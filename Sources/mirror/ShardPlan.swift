import MirrorCore

/// What `plan --shard` adds: which shard the plan shows, and every shard's entries and bytes.
/// Bytes are the pinned sizes (`size:`); for the shard shown, an entry without a pin counts
/// with the size its probe found, where it found one.
struct ShardPlan {
    var selection: ShardSelection
    var balance: ShardBalance
    var totals: [ShardTotals]

    /// - Parameters:
    ///   - entries: the shown shard's entries, in the plan's order.
    init(selection: ShardSelection, balance: ShardBalance, totals: [ShardTotals], entries: [Entry], plan: some Collection<PlannedEntry>) {
        self.selection = selection
        self.balance = balance
        self.totals = totals
        guard totals.indices.contains(selection.index) else { return }
        // The probes of the shown shard know sizes that were not pinned.
        var shown = ShardTotals(shard: selection.index)
        for (entry, planned) in zip(entries, plan) {
            shown.entries += 1
            if let size = entry.size ?? planned.remoteSize {
                shown.pinnedBytes = shown.pinnedBytes.saturatingAdding(size)
            } else {
                shown.unsized += 1
            }
        }
        self.totals[selection.index] = shown
    }

    /// The lines after the plan's table.
    var text: String {
        var rows = [["SHARD", "ENTRIES", "BYTES"]]
        for total in totals {
            let mark = total.shard == selection.index ? " *" : ""
            let unknown = total.unsized > 0 ? " (+ \(total.unsized) of unknown size)" : ""
            rows.append(["\(total.shard)/\(selection.count)\(mark)", "\(total.entries)", ByteCount.format(total.pinnedBytes) + unknown])
        }
        let widths = [0, 1].map { column in rows.map { $0[column].count }.max() ?? 0 }
        var text = "shard \(selection) (by \(balance.rawValue)) of \(totals.reduce(0) { $0 + $1.entries }) entries:\n"
        for row in rows {
            text += TextFormat.padded(row[0], to: widths[0]) + "  " + TextFormat.padded(row[1], to: widths[1]) + "  " + row[2] + "\n"
        }
        text.removeLast()
        return text
    }

    /// `"shard"` in `plan --json`.
    var json: JSONValue {
        .object([
            ("index", .int(selection.index)),
            ("count", .int(selection.count)),
            ("by", .string(balance.rawValue)),
            ("shards", .array(totals.map { total in
                .object([
                    ("shard", .int(total.shard)),
                    ("entries", .int(total.entries)),
                    ("bytes", .int(total.pinnedBytes)),
                    ("unknown_size_entries", .int(total.unsized)),
                ])
            })),
        ])
    }
}
