import ArgumentParser
import MirrorCore

@main
struct MirrorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mirror",
        abstract: "Mirror the remote files a YAML manifest lists into local destinations."
    )
}
