package source

import (
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/go-amqp"
)

// ErrOwnershipLost is returned (wrapped, match it with errors.Is) by
// [Partition.Receive] and [Partition.Checkpoint] once another owner took the
// partition. The caller must abandon its batch and must not checkpoint it:
// the new owner resumes from the last checkpoint or the sink's watermark.
var ErrOwnershipLost = errors.New("partition ownership lost")

// ErrGiveUp is matched (errors.Is) by a handler error that asks the source
// to give the partition's lease up: the handler cannot serve the partition
// for now (its sink has been unavailable for long), and another replica, or
// this one later, should claim it.
var ErrGiveUp = errors.New("partition given up")

// ErrInvalidCheckpoint is returned (wrapped) by [Source.Run] when a
// partition's resume position does not exist in the partition (past its last
// event or before its retained start) and [Options.OnInvalidCheckpoint] is
// "fail".
var ErrInvalidCheckpoint = errors.New("invalid checkpoint")

// errReceiveFailed marks a receive failure that reopening the partition
// may cure (a connection lost, refused or timed out, a busy service: what
// outlasted the SDK's retries), as opposed to refused credentials or a
// missing event hub. The source reopens such a partition at its next
// claim round instead of failing the connector.
var errReceiveFailed = errors.New("receive failed")

// errSourceClosed is returned by calls made after [Source.Close].
var errSourceClosed = errors.New("source is closed")

// ErrNotFound is returned (wrapped) by [New] when the event hub or the
// consumer group does not exist.
var ErrNotFound = errors.New("not found")

// ErrUnauthorized is returned (wrapped) by [New] when the service refused
// the credentials.
var ErrUnauthorized = errors.New("unauthorized")

// isOwnershipLost reports whether err is the SDK's "another receiver with an
// equal or higher owner level opened the partition".
func isOwnershipLost(err error) bool {
	var ehErr *azeventhubs.Error
	if errors.As(err, &ehErr) && ehErr.Code == azeventhubs.ErrorCodeOwnershipLost {
		return true
	}
	return amqpCondition(err) == amqp.ErrCondStolen
}

// isUnauthorized reports whether err is an authentication or authorization refusal.
func isUnauthorized(err error) bool {
	var ehErr *azeventhubs.Error
	if errors.As(err, &ehErr) && ehErr.Code == azeventhubs.ErrorCodeUnauthorizedAccess {
		return true
	}
	return rpcCode(err) == 401 || amqpCondition(err) == amqp.ErrCondUnauthorizedAccess
}

// isNotFound reports whether err says an entity (hub, consumer group) is missing.
func isNotFound(err error) bool {
	return rpcCode(err) == 404 || amqpCondition(err) == amqp.ErrCondNotFound
}

// amqpCondition returns the AMQP error condition in err's chain, or "".
func amqpCondition(err error) amqp.ErrCond {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return ae.Condition
	}
	var le *amqp.LinkError
	if errors.As(err, &le) && le.RemoteErr != nil {
		return le.RemoteErr.Condition
	}
	return ""
}

// rpcCode returns the status code of a management (RPC) error in err's
// chain, or 0. The SDK's RPCError type is internal; its RPCCode method is
// the documented way to read the code.
func rpcCode(err error) int {
	var rpc interface{ RPCCode() int }
	if errors.As(err, &rpc) {
		return rpc.RPCCode()
	}
	return 0
}
