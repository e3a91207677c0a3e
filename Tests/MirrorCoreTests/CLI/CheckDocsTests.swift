import Foundation
import Testing

/// scripts/check-docs.sh, run on a copy of the documents with one defect put in: each defect
/// must make it fail and name what is wrong. The unchanged copy must pass, so a failure is the
/// defect's, not the copy's.
@Suite(.serialized)
struct CheckDocsTests {
    /// A copy of what check-docs reads: its script, the man pages, the README, docs/, the
    /// examples, the manifest keys and the sources it searches.
    struct Copy {
        let directory: TemporaryDirectory

        init() throws {
            directory = try TemporaryDirectory(prefix: "mirror-check-docs")
            let root = InstallTests.packageRoot
            for item in ["scripts", "man", "README.md", "docs", "examples", "Sources", "Tests/MirrorCoreTests/Integration"] {
                let target = directory.path(item)
                try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent,
                                                        withIntermediateDirectories: true)
                try FileManager.default.copyItem(atPath: "\(root)/\(item)", toPath: target)
            }
        }

        /// Replaces `old` (which must be there) by `new` in the copy of `file`.
        func edit(_ file: String, replacing old: String, with new: String) throws {
            let path = directory.path(file)
            let text = try String(contentsOfFile: path, encoding: .utf8)
            try #require(text.contains(old), "\(file) no longer contains \(old)")
            try text.replacingOccurrences(of: old, with: new).write(toFile: path, atomically: true, encoding: .utf8)
        }

        func run() throws -> ExternalCommand.Result {
            try ExternalCommand.run("/bin/bash", [directory.path("scripts/check-docs.sh"), try MirrorBinary.path()],
                                    in: directory.path)
        }
    }

    @Test func theDocumentsAsTheyArePass() throws {
        let result = try Copy().run()
        #expect(result.status == 0, "\(result)")
    }

    /// A BUGS paragraph that says something mirror has is missing or untested.
    @Test(arguments: [
        "Not yet implemented: a bandwidth limit.",
        "Not yet implemented:\n.BR \\-\\-rate\\-limit .",
        "The manifest key\n.B rate_limit\nis not supported.",
        "Only HTTP/1.1 is tested; HTTP/2 is not tested.",
        "Not implemented:\n.BR \\-\\-prune .",
    ])
    func aBugsParagraphThatCallsAnImplementedThingMissingFails(paragraph: String) throws {
        let copy = try Copy()
        try copy.edit("man/mirror.1", replacing: ".SH BUGS\n", with: ".SH BUGS\n\(paragraph)\n.PP\n")
        let result = try copy.run()
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("BUGS"), "\(result)")
    }

    @Test func aBugsParagraphAboutSomethingMissingThatMirrorLacksPasses() throws {
        let copy = try Copy()
        try copy.edit("man/mirror.1", replacing: ".SH BUGS\n",
                      with: ".SH BUGS\nNot yet implemented: downloads over SFTP.\n.PP\n")
        let result = try copy.run()
        #expect(result.status == 0, "\(result)")
    }

    @Test func aDocumentCitingADesignFileOutsideTheRepositoryFails() throws {
        let copy = try Copy()
        let readme = copy.directory.path("README.md")
        let text = try String(contentsOfFile: readme, encoding: .utf8)
        // Spelled in two pieces so that this file is not itself such a citation.
        try (text + "\nSee `DESIGN" + ".md` for the contract.\n").write(toFile: readme, atomically: true, encoding: .utf8)
        let result = try copy.run()
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("README.md"), "\(result)")
    }

    @Test func aMissingDesignDocumentFails() throws {
        let copy = try Copy()
        try FileManager.default.removeItem(atPath: copy.directory.path("docs/DESIGN.md"))
        let result = try copy.run()
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("docs/DESIGN.md is missing"), "\(result)")
    }

    /// The README's first screen and its contents list (a README of 1,163 lines had none, and
    /// no quick start before line 111).
    @Test func aReadmeWithoutItsQuickStartOrWithASectionMissingFromItsContentsFails() throws {
        let noQuickStart = try Copy()
        let readme = noQuickStart.directory.path("README.md")
        let text = try String(contentsOfFile: readme, encoding: .utf8)
        let start = try #require(text.range(of: "## Quick start\n"))
        let end = try #require(text.range(of: "## Contents\n"))
        let moved = String(text[start.lowerBound..<end.lowerBound])
        try (text.replacingCharacters(in: start.lowerBound..<end.lowerBound, with: "") + "\n" + moved)
            .write(toFile: readme, atomically: true, encoding: .utf8)
        let first = try noQuickStart.run()
        #expect(first.status == 1, "\(first)")
        #expect(first.stderr.contains("the first 60 lines lack 'make demo'"), "\(first)")

        let unlisted = try Copy()
        try unlisted.edit("README.md", replacing: "## Performance\n", with: "## Benchmarks\n")
        let second = try unlisted.run()
        #expect(second.status == 1, "\(second)")
        #expect(second.stderr.contains("the contents list lacks the section 'Benchmarks'"), "\(second)")
        #expect(second.stderr.contains("links to #performance, which no heading makes"), "\(second)")
    }
}
