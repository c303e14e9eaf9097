package checkpoint

import "errors"

// errInvalidName is returned for a namespace, event hub, consumer group or
// partition ID that cannot be used as a file name (empty, ".", "..", starting
// with ".", or containing a slash, backslash or NUL).
var errInvalidName = errors.New("invalid name")

// errIncompleteCheckpoint is returned by SetCheckpoint for a checkpoint
// without a sequence number or without an offset. The SDK's blob store
// writes such a checkpoint but then fails to list any checkpoint of the
// event hub, so every ehsink store refuses it.
var errIncompleteCheckpoint = errors.New("checkpoint needs both a sequence number and an offset")
