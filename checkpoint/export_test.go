package checkpoint

// FileCheckpoint is the JSON of a file checkpoint, for the external tests.
type FileCheckpoint = fileCheckpoint
