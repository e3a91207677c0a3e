/// `--shard auto`: the shard a batch engine's array task is, from the variables it sets.
///
/// Read in this order, the first one set deciding:
/// - Slurm job arrays: `SLURM_ARRAY_TASK_ID`, `SLURM_ARRAY_TASK_COUNT`,
///   `SLURM_ARRAY_TASK_MIN` (K is the id minus the min, so `--array=1-4` is shards 0-3),
///   `SLURM_ARRAY_TASK_MAX` and `SLURM_ARRAY_TASK_STEP`. Only a contiguous array of step 1 is
///   accepted: with `--array=0-6:2` or `--array=1,5`, ids and shards do not match.
/// - AWS Batch array jobs: `AWS_BATCH_JOB_ARRAY_INDEX` with `AWS_BATCH_JOB_ARRAY_SIZE`, or with
///   `--shard-count` when the size is not in the environment.
/// - Kubernetes Indexed Jobs: `JOB_COMPLETION_INDEX`, with `--shard-count` (Kubernetes does
///   not tell a pod how many completions there are).
///
/// `--shard-count`, when given with an engine that states its count, must agree with it.
public enum ShardEnvironment {
    public static let slurmTaskID = "SLURM_ARRAY_TASK_ID"
    public static let slurmTaskCount = "SLURM_ARRAY_TASK_COUNT"
    public static let slurmTaskMin = "SLURM_ARRAY_TASK_MIN"
    public static let slurmTaskMax = "SLURM_ARRAY_TASK_MAX"
    public static let slurmTaskStep = "SLURM_ARRAY_TASK_STEP"
    public static let awsIndex = "AWS_BATCH_JOB_ARRAY_INDEX"
    public static let awsSize = "AWS_BATCH_JOB_ARRAY_SIZE"
    public static let kubernetesIndex = "JOB_COMPLETION_INDEX"

    /// The shard the environment names.
    public static func selection(in environment: [String: String], shardCount: Int?) throws(ShardEnvironmentError) -> ShardSelection {
        if let id = environment[slurmTaskID] {
            return try slurm(id: id, environment, shardCount: shardCount)
        }
        if let index = environment[awsIndex] {
            return try indexed(index, named: awsIndex, count: environment[awsSize], countName: awsSize, shardCount: shardCount)
        }
        if let index = environment[kubernetesIndex] {
            return try indexed(index, named: kubernetesIndex, count: nil, countName: nil, shardCount: shardCount)
        }
        throw .noneSet
    }

    private static func slurm(id: String, _ environment: [String: String], shardCount: Int?) throws(ShardEnvironmentError) -> ShardSelection {
        let taskID = try number(id, named: slurmTaskID)
        guard let countText = environment[slurmTaskCount] else { throw .missing(slurmTaskCount, with: slurmTaskID) }
        let count = try number(countText, named: slurmTaskCount)
        let min = try environment[slurmTaskMin].map { text throws(ShardEnvironmentError) in try number(text, named: slurmTaskMin) } ?? 0
        if let step = environment[slurmTaskStep], try number(step, named: slurmTaskStep) != 1 {
            throw .steppedArray(step: step)
        }
        if let maxText = environment[slurmTaskMax] {
            let max = try number(maxText, named: slurmTaskMax)
            guard max - min + 1 == count else { throw .gappedArray(min: min, max: max, count: count) }
        }
        try agree(count, countName: slurmTaskCount, shardCount: shardCount)
        guard taskID >= min, let selection = ShardSelection(index: taskID - min, count: count) else {
            throw .outOfRange(index: taskID - min, count: count, variables: "\(slurmTaskID)=\(taskID) minus \(slurmTaskMin)=\(min)")
        }
        return selection
    }

    private static func indexed(_ indexText: String, named name: String, count countText: String?, countName: String?, shardCount: Int?) throws(ShardEnvironmentError) -> ShardSelection {
        let index = try number(indexText, named: name)
        let count: Int
        if let countText, let countName {
            count = try number(countText, named: countName)
            try agree(count, countName: countName, shardCount: shardCount)
        } else if let shardCount {
            count = shardCount
        } else {
            throw .countNeeded(indexVariable: name)
        }
        guard let selection = ShardSelection(index: index, count: count) else {
            throw .outOfRange(index: index, count: count, variables: "\(name)=\(index)")
        }
        return selection
    }

    private static func agree(_ count: Int, countName: String, shardCount: Int?) throws(ShardEnvironmentError) {
        if let shardCount, shardCount != count { throw .countDisagrees(variable: countName, value: count, shardCount: shardCount) }
    }

    private static func number(_ text: String, named name: String) throws(ShardEnvironmentError) -> Int {
        guard let value = ShardSelection.decimal(Substring(text)) else { throw .notANumber(name, text) }
        return value
    }
}

/// Why `--shard auto` found no shard; each says which variable to set or fix.
public enum ShardEnvironmentError: Error, Sendable, Equatable, CustomStringConvertible {
    case noneSet
    case missing(String, with: String)
    case notANumber(String, String)
    case steppedArray(step: String)
    case gappedArray(min: Int, max: Int, count: Int)
    case countNeeded(indexVariable: String)
    case countDisagrees(variable: String, value: Int, shardCount: Int)
    case outOfRange(index: Int, count: Int, variables: String)

    public var description: String {
        switch self {
        case .noneSet:
            return "--shard auto: none of \(ShardEnvironment.slurmTaskID) (Slurm job array), \(ShardEnvironment.awsIndex) (AWS Batch array job) or \(ShardEnvironment.kubernetesIndex) (Kubernetes Indexed Job) is set; run as an array task or give --shard K/N"
        case .missing(let name, let with):
            return "--shard auto: \(with) is set but \(name) is not"
        case .notANumber(let name, let text):
            return "--shard auto: \(name)=\(text) is not a non-negative whole number"
        case .steppedArray(let step):
            return "--shard auto: the Slurm array has a step of \(step) (\(ShardEnvironment.slurmTaskStep)); shards need consecutive task ids, as from --array=0-N or --array=1-N"
        case .gappedArray(let min, let max, let count):
            return "--shard auto: the Slurm array runs from \(min) to \(max) but has \(count) tasks; shards need consecutive task ids, as from --array=\(min)-\(min + count - 1)"
        case .countNeeded(let name):
            return "--shard auto: \(name) gives this task's index but not how many tasks there are; add --shard-count N (the job's completions or array size)"
        case .countDisagrees(let variable, let value, let shardCount):
            return "--shard auto: --shard-count \(shardCount) disagrees with \(variable)=\(value)"
        case .outOfRange(let index, let count, let variables):
            return "--shard auto: shard \(index) (\(variables)) is not below the shard count \(count)"
        }
    }
}
