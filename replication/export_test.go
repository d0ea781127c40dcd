package replication

// AppliedKey lets the tests roll a group's applied index back, as a crash
// that lost the last unsynced apply batch does.
var AppliedKey = appliedKey

// HardStateKey and SnapshotKey let the tests read what a cycle wrote.
var (
	HardStateKey = hardStateKey
	SnapshotKey  = snapshotKey
)
