package checkpoint

// FileCheckpoint is the JSON of a file checkpoint, for the external tests.
type FileCheckpoint = fileCheckpoint

// JSNamespace is jsNamespace, for the external tests.
var JSNamespace = jsNamespace

// The file store's sentinel errors, for the external tests.
var (
	ErrIncompleteCheckpoint = errIncompleteCheckpoint
	ErrInvalidName          = errInvalidName
)

// Where a resume position came from, for the external tests.
type Source = origin

// The origins, for the external tests.
const (
	FromStart      = fromStart
	FromCheckpoint = fromCheckpoint
	FromWatermark  = fromWatermark
)

// ReadLease is readLease, for the tests of every store's Lease.
var ReadLease = readLease
